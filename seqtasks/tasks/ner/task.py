"""Named-entity recognition: word, character and casing features -> bidirectional RNN -> CRF; seqeval F1."""

import time

from seqtasks.text.special_ids import PAD_ID
from seqtasks.tasks.base import Evaluation, Task

_BUCKETS = [8, 16, 24, 32, 48, 64, 96, 128]
_VOCABULARY_FILES = ("word_vocab.txt", "char_vocab.txt", "tags.txt")
# The id of the first word seen once in training; those words come last in word_vocab.txt.
_SINGLETONS_FILE = "first_singleton.txt"
# Training sentences the pre-tokenizer is checked on, from the start of the file.
_PRETOKENIZER_SAMPLE = 2000


def _embeddings(model):
    """The word embedding layers of a tagger or of every member of an ensemble."""
    return [member.word_embedding for member in getattr(model, "member_models", [model])]


def tag_vocabulary(config, train, validation):
    """`O` first, then `B-`/`I-` of every entity type in the training data, sorted."""
    from seqtasks.errors import SeqtasksError

    types = sorted({tag[2:] for _, tags in train for tag in tags if tag != "O"})
    vocab = ["O"] + [f"{prefix}-{name}" for name in types for prefix in ("B", "I")]
    unknown = sorted({tag for _, tags in validation for tag in tags} - set(vocab))
    if unknown:
        where = config.validation_path or config.path
        raise SeqtasksError(f"{where}: validation tag {unknown[0]!r} has an entity type absent from the training data")
    return vocab


def make_dataset(sentences, featurizer, tag_index, batch_size, shuffle_seed=None, augmenter=None):
    """Length-bucketed batches `(features, tag ids)`, padded with 0; with an `augmenter`
    (`seqtasks.data.augmentation.TokenAugmenter`; training, with a `shuffle_seed`), each epoch's draws change
    the case of a share of the sentences."""
    import keras
    import tensorflow as tf

    from seqtasks.data.batching import bucketed_batches, pad_to_boundaries

    tokens = tf.ragged.constant([words for words, _ in sentences], dtype=tf.string)
    tags = tf.ragged.constant([[tag_index[t] for t in labels] for _, labels in sentences], dtype=tf.int32)
    data = tf.data.Dataset.from_tensor_slices((tokens, tags))
    # Sliced rows keep a ragged spec, which bucketing's padded_batch rejects.
    data = data.map(lambda words, labels: (tf.identity(words), tf.identity(labels)))
    per_epoch = None
    if augmenter is not None and shuffle_seed is not None:
        data = data.enumerate().map(lambda index, pair: (index, *pair))
        per_epoch = augmenter.epochs(len(sentences))
    data = bucketed_batches(
        data, len(sentences), lambda words, labels: tf.size(words), _BUCKETS, batch_size, shuffle_seed, ("", 0),
        per_epoch=per_epoch,
    )
    data = data.map(
        lambda words, labels: (featurizer.features(tf.RaggedTensor.from_tensor(words, padding="")), labels),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    if keras.config.backend() == "jax":  # the features are as long as the longest sentence: pad them as the tags
        data = pad_to_boundaries(data, _BUCKETS)
    return data.prefetch(tf.data.AUTOTUNE)


def predict_tags(model, featurizer, tags, sentences, batch_size):
    """Tag lists for token lists, in length-sorted batches with one compiled function (`seqtasks.training.compiled`)."""
    import tensorflow as tf

    from seqtasks.training.compiled import CompiledFunction, pad_batch
    from seqtasks.evaluation.prediction_loop import predict_in_batches

    compiled = None

    def predict_batch(batch):
        nonlocal compiled
        features = {name: value.numpy() for name, value in featurizer.features(tf.ragged.constant(batch, tf.string)).items()}
        names = sorted(features)
        if compiled is None:
            specs = [((None, None) + features[name].shape[2:], features[name].dtype) for name in names]
            compiled = CompiledFunction(lambda *arrays: model.decode(dict(zip(names, arrays))), model, specs)
        if compiled.compiles_per_shape:
            features = {name: pad_batch(value, (None, None), batch_size, PAD_ID) for name, value in features.items()}
        ids = compiled(*(features[name] for name in names))
        return [[tags[i] for i in row[: len(words)]] for words, row in zip(batch, ids)]

    return predict_in_batches(predict_batch, sentences, batch_size, "Tagging", [len(words) for words in sentences])


class NerTask(Task):
    """CoNLL sentences -> word, character and tag vocabularies -> `SequenceTagger` (or an ensemble of them)
    -> seqeval entity F1."""

    def read_splits(self):
        from seqtasks.data.conll import read_conll_documents, split_documents
        from seqtasks.data.labelled_text import split_examples

        config = self.recipe.data
        self.heldout = []
        if config.heldout_documents:
            documents = read_conll_documents(
                config.path, config.token_column, config.tag_column, config.scheme, config.encoding
            )
            train, self.heldout = split_documents(documents, config.heldout_documents, self.recipe.seed)
        else:
            train = self._read(config.path)
        if config.heldout_sentences:
            documents = [[sentence] for sentence in train]
            train, self.heldout = split_documents(documents, config.heldout_sentences, self.recipe.seed)
        if config.validation_path:
            return train, self._read(config.validation_path)
        return split_examples(train, config.validation_size, self.recipe.seed)

    def start_paths(self):
        from seqtasks.models.pretrained_vectors import vectors_path

        return vectors_path(self.recipe.model.word_vectors)

    def heldout_splits(self):
        # Whole documents where the file has them: sentences of one story share names, so a split by
        # sentence would leak them.
        return {"heldout": self.heldout} if getattr(self, "heldout", None) else {}

    def read_file(self, path):
        from seqtasks.errors import SeqtasksError

        sentences = self._read(path)
        unknown = sorted({tag for _, tags in sentences for tag in tags} - set(self.tags))
        if unknown:
            raise SeqtasksError(f"{path}: tag {unknown[0]!r} has an entity type the model was not trained on")
        return sentences

    def _read(self, path):
        from seqtasks.data.conll import read_conll

        config = self.recipe.data
        return read_conll(path, config.token_column, config.tag_column, config.scheme, config.encoding)

    def prepare(self, train, validation, run_dir):
        import re

        from seqtasks.models.pretrained_vectors import extended_vocabulary, start_vectors
        from seqtasks.text.token_features import RESERVED, build_vocabularies, word_counts
        from seqtasks.utils.io_utils import write_text_atomic

        config, vectors = self.recipe.data, self.recipe.model.word_vectors
        if vectors.path and (run_dir / _VOCABULARY_FILES[0]).is_file():
            self.restore(run_dir)  # a resumed run: its vocabulary came from the vectors file once already
            return
        tags = tag_vocabulary(config, train, validation)
        print(f"Sentences: {len(train)} training, {len(validation)} validation; tags: {' '.join(tags)}")
        singletons_last = self.recipe.model.singleton_unk > 0
        words = [w for w, _ in train]
        word_vocab, char_vocab = build_vocabularies(
            words, config.lower_case, config.min_word_count, singletons_last=singletons_last
        )
        counts = word_counts(words, config.lower_case)
        first_singleton = None
        if singletons_last:
            first_singleton = len(word_vocab) - sum(1 for word in word_vocab[len(RESERVED) :] if counts[word] == 1)

        def normalize(word):  # as `normalize_words` looks words up
            return re.sub(r"\d", "0", word.lower()) if config.lower_case else word

        trained = len(word_vocab)
        word_vocab = extended_vocabulary(word_vocab, vectors, normalize)
        self.initial_vectors = start_vectors(
            vectors, word_vocab, len(RESERVED), counts, self.recipe.model.word_embedding_dim, self.recipe.seed, run_dir
        )
        for name, vocab in zip(_VOCABULARY_FILES, (word_vocab, char_vocab, tags)):
            write_text_atomic(run_dir / name, "\n".join(vocab) + "\n")
        if singletons_last:
            write_text_atomic(run_dir / _SINGLETONS_FILE, f"{first_singleton}\n")
        self._set(word_vocab, char_vocab, tags, first_singleton)
        self.run_dir = run_dir
        self._check_pretokenizer(train)
        singletons = f" ({trained - first_singleton} seen once)" if singletons_last else ""
        added = f", {len(word_vocab) - trained} more from the word vectors" if len(word_vocab) > trained else ""
        print(f"Vocabularies: {trained} words{singletons}{added}, {len(char_vocab)} characters")

    def _check_pretokenizer(self, train):
        """Prints how many training sentences, written out as text, the export's pre-tokenizer splits as the
        data does: a low share means `data.pretokenizer` is not the convention the data was made with."""
        from seqtasks.text.pretokenizers import agreement

        name = self.recipe.data.pretokenizer
        sample = [words for words, _ in train[:_PRETOKENIZER_SAMPLE]]
        self.pretokenizer_agreement = round(agreement(sample, name), 4)
        print(f"Pre-tokenizer {name!r}: {self.pretokenizer_agreement:.1%} of {len(sample)} training sentences, "
              "written out as text, split back into their tokens")
        if self.pretokenizer_agreement < 0.9:
            print("  Raw text will be tagged worse than the data: is data.pretokenizer the data's convention?")

    def restore(self, run_dir):
        from seqtasks.training.run_folders import read_lines

        self.run_dir = run_dir
        first_singleton = None
        if (run_dir / _SINGLETONS_FILE).is_file():
            first_singleton = int(read_lines(run_dir, _SINGLETONS_FILE)[0])
        self._set(*(read_lines(run_dir, name) for name in _VOCABULARY_FILES), first_singleton)

    def _set(self, word_vocab, char_vocab, tags, first_singleton=None):
        from seqtasks.text.token_features import TokenFeaturizer

        config = self.recipe.data
        self.featurizer = TokenFeaturizer(word_vocab, char_vocab, config.lower_case, config.max_word_length)
        self.vocabulary_sizes = (len(word_vocab), len(char_vocab))
        self.tags = tags
        self.first_singleton = first_singleton

    def datasets(self, train, validation):
        from seqtasks.data.augmentation import TokenAugmenter

        tag_index = {tag: index for index, tag in enumerate(self.tags)}
        batch_size = self.recipe.training.batch_size
        augment = self.recipe.data.augment
        augmenter = TokenAugmenter(augment, self.recipe.seed) if augment.enabled else None
        return (
            make_dataset(train, self.featurizer, tag_index, batch_size, self.recipe.seed, augmenter),
            make_dataset(validation, self.featurizer, tag_index, batch_size),
        )

    def build_model(self):
        from seqtasks.layers.crf import iob2_constraints
        from seqtasks.models import SequenceTagger, SequenceTaggerEnsemble

        from seqtasks.models.pretrained_vectors import apply_vectors

        model_class = SequenceTaggerEnsemble if self.recipe.model.ensemble > 1 else SequenceTagger
        # Decoding (CRF or softmax) only returns valid IOB2: no I-X after O or another type.
        model = model_class.from_recipe(
            self.recipe.model,
            *self.vocabulary_sizes,
            len(self.tags),
            seed=self.recipe.seed,
            constraints=iob2_constraints(self.tags),
            first_singleton=self.first_singleton,
            tag_names=self.tags,
        )
        model.build()
        apply_vectors(self.recipe.model.word_vectors, _embeddings(model), getattr(self, "initial_vectors", None))
        return model

    def compile_model(self, model):
        from seqtasks.models.pretrained_vectors import freeze_for_epochs
        from seqtasks.training.distribute import STEP_REPLICAS
        from seqtasks.training.fit import make_optimizer

        optimizer = make_optimizer(self.recipe.training)
        freeze_for_epochs(self.recipe.model.word_vectors, _embeddings(model), optimizer)
        # The tagger computes its own loss (CRF log-likelihood or masked cross-entropy), weighing each replica
        # of a distributed step by its share of the batch: the strategy's replicas come in here.
        model.compile(optimizer=optimizer)
        model.use_replicas(STEP_REPLICAS)

    def data_notes(self):
        from seqtasks.models.pretrained_vectors import read_coverage, vectors_note

        return vectors_note(read_coverage(self.run_dir)) if getattr(self, "run_dir", None) else []

    def training_metrics(self, train, validation, history):
        from seqtasks.models.pretrained_vectors import read_coverage

        batch_size = self.recipe.training.batch_size
        tokens_per_batch = sum(len(words) for words, _ in train) / max(1, -(-len(train) // batch_size))
        coverage = read_coverage(self.run_dir)
        agreement = getattr(self, "pretokenizer_agreement", None)
        return {
            **({"word_vectors": coverage} if coverage else {}),
            **({"pretokenizer_agreement": agreement} if agreement is not None else {}),
            "train_sentences": len(train),
            "validation_sentences": len(validation),
            # Wall time of `fit`, validation passes and tracing included.
            "train_tokens_per_second": round(tokens_per_batch * history.batches_seen / history.train_seconds, 1),
        }

    def _draw_attention(self, model, sentences, folder):
        import numpy as np
        import tensorflow as tf

        from seqtasks.evaluation.token_attention import HEATMAPS, draw_token_attention

        batch = sentences[:HEATMAPS]
        features = self.featurizer.features(tf.ragged.constant(batch, tf.string))
        maps = {name: np.asarray(value, np.float32) for name, value in model.attention_maps(features).items()}
        if not maps:
            return 0
        length = next(iter(maps.values())).shape[-1]
        return draw_token_attention(maps, [words[:length] for words in batch], folder)

    def evaluate(self, model, examples, out_dir):
        """Entity-level precision, recall and F1 (seqeval, conlleval rules) per type; `predictions.conll` in `out_dir`."""
        from seqeval.metrics import classification_report

        from seqtasks.errors import SeqtasksError
        from seqtasks.utils.io_utils import write_text_atomic

        if not examples:
            raise SeqtasksError("no sentences to evaluate")
        sentences = [words for words, _ in examples]
        gold = [labels for _, labels in examples]
        started = time.time()
        predicted = predict_tags(model, self.featurizer, self.tags, sentences, self.recipe.evaluation.batch_size)
        predict_seconds = time.time() - started
        report = classification_report(gold, predicted, output_dict=True, zero_division=0)
        write_text_atomic(
            out_dir / "predictions.conll",
            "\n".join(
                "".join(f"{w}\t{g}\t{p}\n" for w, g, p in zip(words, gold_tags, predicted_tags))
                for words, gold_tags, predicted_tags in zip(sentences, gold, predicted)
            ),
        )
        overall = report["micro avg"]
        per_type = {
            name: {key: float(value) for key, value in scores.items()}
            for name, scores in report.items()
            if not name.endswith(" avg")
        }
        lines = ["Entities (seqeval):"]
        lines += [
            f"  {name:<16} P {s['precision']:.3f}  R {s['recall']:.3f}  F1 {s['f1-score']:.3f}  n={int(s['support'])}"
            for name, s in sorted(per_type.items())
        ]
        drawn = self._draw_attention(model, sentences, out_dir / "attention")
        if drawn:
            lines.append(f"Attention maps: {drawn} drawn in {out_dir / 'attention'}")
        lines.append("Sample tags:")
        lines += [
            "  " + " ".join(w if t == "O" else f"[{w}|{t}]" for w, t in zip(words, labels))
            for words, labels in list(zip(sentences, predicted))[:3]
        ]
        metrics = {
            "validation": {
                "f1": float(overall["f1-score"]),
                "precision": float(overall["precision"]),
                "recall": float(overall["recall"]),
            },
            "per_type": per_type,
            "predict_sentences_per_second": round(len(sentences) / predict_seconds, 1),
        }
        return Evaluation(metrics, lines)

    def reading_limits(self):
        return [
            super().reading_limits()[0],
            f"A text is split into tokens by the `{self.recipe.data.pretokenizer}` pre-tokenizer "
            f"(`data.pretokenizer`); its first {self.recipe.data.max_length} tokens are tagged and later ones "
            "are cut off (`data.max_length`). Offsets count Unicode characters.",
        ]

    def serving_module(self, model):
        from seqtasks.tasks.ner.export import make_tagger_module

        data = self.recipe.data
        return make_tagger_module(model, self.featurizer, self.tags, data.max_length, data.pretokenizer)
