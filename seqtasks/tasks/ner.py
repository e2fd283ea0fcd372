"""Named-entity recognition: word, character and casing features -> bidirectional RNN -> CRF; seqeval F1."""

import time

import numpy as np

_BUCKETS = [8, 16, 24, 32, 48, 64, 96, 128]


def _load(recipe):
    from seqtasks.data.conll import read_conll
    from seqtasks.data.labelled_text import split_examples

    config = recipe.data

    def read(path):
        return read_conll(path, config.token_column, config.tag_column, config.scheme, config.encoding)

    train = read(config.path)
    if config.validation_path:
        return train, read(config.validation_path)
    return split_examples(train, config.validation_size, recipe.seed)


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


def make_dataset(sentences, featurizer, tag_index, batch_size, shuffle_seed=None):
    """Length-bucketed batches `(features, tag ids)`, padded with 0."""
    import tensorflow as tf

    from seqtasks.data.batching import bucketed_batches

    tokens = tf.ragged.constant([words for words, _ in sentences], dtype=tf.string)
    tags = tf.ragged.constant([[tag_index[t] for t in labels] for _, labels in sentences], dtype=tf.int32)
    data = tf.data.Dataset.from_tensor_slices((tokens, tags))
    # Sliced rows keep a ragged spec, which bucketing's padded_batch rejects.
    data = data.map(lambda words, labels: (tf.identity(words), tf.identity(labels)))
    data = bucketed_batches(
        data, len(sentences), lambda words, labels: tf.size(words), _BUCKETS, batch_size, shuffle_seed, ("", 0)
    )
    data = data.map(
        lambda words, labels: (featurizer.features(tf.RaggedTensor.from_tensor(words, padding="")), labels),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    return data.prefetch(tf.data.AUTOTUNE)


def run(recipe, run_dir):
    """Trains, evaluates (seqeval entity F1 per type) and exports; returns the metrics."""
    import keras

    from seqtasks.io_utils import write_text_atomic
    from seqtasks.models import SequenceTagger
    from seqtasks.text.token_features import TokenFeaturizer, build_vocabularies
    from seqtasks.training import fit_metrics, make_optimizer, train_model

    started = time.time()
    keras.utils.set_random_seed(recipe.seed)
    config = recipe.data
    train, validation = _load(recipe)
    tags = tag_vocabulary(config, train, validation)
    print(f"Sentences: {len(train)} training, {len(validation)} validation; tags: {' '.join(tags)}")
    word_vocab, char_vocab = build_vocabularies([w for w, _ in train], config.lower_case, config.min_word_count)
    for name, vocab in (("word_vocab.txt", word_vocab), ("char_vocab.txt", char_vocab), ("tags.txt", tags)):
        write_text_atomic(run_dir / name, "\n".join(vocab) + "\n")
    featurizer = TokenFeaturizer(word_vocab, char_vocab, config.lower_case, config.max_word_length)
    print(f"Vocabularies: {len(word_vocab)} words, {len(char_vocab)} characters")

    tag_index = {tag: index for index, tag in enumerate(tags)}
    batch_size = recipe.training.batch_size
    train_data = make_dataset(train, featurizer, tag_index, batch_size, recipe.seed)
    validation_data = make_dataset(validation, featurizer, tag_index, batch_size)

    model, history, train_seconds = train_model(
        recipe,
        run_dir,
        lambda: SequenceTagger.from_recipe(recipe.model, len(word_vocab), len(char_vocab), len(tags), seed=recipe.seed),
        # The tagger computes its own loss (CRF log-likelihood or masked cross-entropy).
        lambda model: model.compile(optimizer=make_optimizer(recipe.training)),
        train_data,
        validation_data,
    )

    tokens_per_batch = sum(len(words) for words, _ in train) / max(1, -(-len(train) // batch_size))
    metrics = fit_metrics("ner", history, train_seconds, model)
    metrics.update({
        "train_sentences": len(train),
        "validation_sentences": len(validation),
        # Wall time of `fit`, validation passes and tracing included.
        "train_tokens_per_second": round(tokens_per_batch * history.batches_seen / train_seconds, 1),
    })
    metrics.update(evaluate_and_export(recipe, run_dir, model, featurizer, tags, validation))
    metrics["seconds"] = round(time.time() - started, 1)
    return metrics


def predict_tags(model, featurizer, tags, sentences, batch_size):
    """Tag lists for token lists, in length-sorted batches with one traced function."""
    import tensorflow as tf

    from seqtasks.progress import progress_bar

    @tf.function(input_signature=[tf.RaggedTensorSpec([None, None], tf.string)])
    def decode(tokens):
        return model.decode(featurizer.features(tokens))

    order = np.argsort([len(words) for words in sentences], kind="stable")
    out = [None] * len(sentences)
    with progress_bar(len(sentences), "Tagging") as bar:
        for start in range(0, len(sentences), batch_size):
            chunk = order[start : start + batch_size]
            ids = decode(tf.ragged.constant([sentences[i] for i in chunk], dtype=tf.string)).numpy()
            for index, row in zip(chunk, ids):
                out[index] = [tags[i] for i in row[: len(sentences[index])]]
            bar.update(len(chunk))
    return out


def make_tagger_server(model, featurizer, tags, max_length):
    """A `tf.Module` whose `serve` maps whitespace-tokenized `text` `[None]` to `tokens` and `tags`."""
    import tensorflow as tf

    class TaggerServer(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = model
            self.featurizer = featurizer
            self.tags = tf.constant(tags)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            # Sentences are cut to `max_length` tokens.
            tokens = tf.strings.split(text)[:, :max_length]
            features = self.featurizer.features(tokens)
            ids = self.model.decode(features)
            real = tf.not_equal(features["words"], 0)
            names = tf.where(real, tf.gather(self.tags, ids), "")
            words = tokens.to_tensor("")
            words = tf.pad(words, [[0, 0], [0, tf.shape(ids)[1] - tf.shape(words)[1]]], constant_values="")
            return {"tokens": words, "tags": names}

    return TaggerServer()


def load_run(run_dir, overrides=(), checkpoint=None):
    """A trained run: its recipe (with `KEY=VALUE` overrides), featurizer, tags and model (see `seqtasks.trained`)."""
    from seqtasks import trained
    from seqtasks.models import SequenceTagger
    from seqtasks.text.token_features import TokenFeaturizer

    recipe = trained.read_run_recipe(run_dir, overrides)
    word_vocab, char_vocab, tags = (
        trained.read_lines(run_dir, name) for name in ("word_vocab.txt", "char_vocab.txt", "tags.txt")
    )
    config = recipe.data
    model = trained.load_model(
        run_dir,
        checkpoint,
        SequenceTagger,
        lambda: SequenceTagger.from_recipe(recipe.model, len(word_vocab), len(char_vocab), len(tags), seed=recipe.seed),
        recipe.training,
    )
    featurizer = TokenFeaturizer(word_vocab, char_vocab, config.lower_case, config.max_word_length)
    return trained.TrainedRun(run_dir, recipe, model, {"featurizer": featurizer, "tags": tags})


def evaluate_file(run, path):
    """Entity F1 per type on every sentence of the CoNLL file `path`; predictions in `run_dir/eval/`."""
    from seqtasks.data.conll import read_conll
    from seqtasks.errors import SeqtasksError
    from seqtasks.trained import eval_folder

    config = run.recipe.data
    sentences = read_conll(path, config.token_column, config.tag_column, config.scheme, config.encoding)
    unknown = sorted({tag for _, tags in sentences for tag in tags} - set(run.parts["tags"]))
    if unknown:
        raise SeqtasksError(f"{path}: tag {unknown[0]!r} has an entity type the model was not trained on")
    return evaluate(run.recipe, eval_folder(run.run_dir, path), run.model, run.parts["featurizer"], run.parts["tags"], sentences)


def export_run(run):
    """Writes the run's SavedModel under `export.directory`; returns its folder."""
    return export(run.recipe, run.model, run.parts["featurizer"], run.parts["tags"])


def evaluate_and_export(recipe, run_dir, model, featurizer, tags, validation):
    """`evaluate` on the validation sentences, then `export` where the recipe asks for it."""
    from seqtasks.export import export_if_enabled

    metrics = evaluate(recipe, run_dir, model, featurizer, tags, validation)
    return export_if_enabled(recipe, metrics, lambda: export(recipe, model, featurizer, tags))


def export(recipe, model, featurizer, tags):
    """The text-to-tags SavedModel under `export.directory`; its folder (None on a worker that is not the chief)."""
    from seqtasks.export import export_saved_model

    server = make_tagger_server(model, featurizer, tags, recipe.data.max_length)
    return export_saved_model(server, server.serve, recipe.export.directory, recipe.name)


def evaluate(recipe, out_dir, model, featurizer, tags, validation):
    """Entity-level precision, recall and F1 (seqeval, conlleval rules) per type; `predictions.conll` in `out_dir`."""
    from seqeval.metrics import classification_report

    from seqtasks.errors import SeqtasksError
    from seqtasks.io_utils import write_text_atomic

    if not validation:
        raise SeqtasksError("no sentences to evaluate")
    sentences = [words for words, _ in validation]
    gold = [labels for _, labels in validation]
    predict_started = time.time()
    predicted = predict_tags(model, featurizer, tags, sentences, recipe.training.batch_size)
    predict_seconds = time.time() - predict_started
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
    print("Entities (seqeval):")
    for name, scores in sorted(per_type.items()):
        print(f"  {name:<16} P {scores['precision']:.3f}  R {scores['recall']:.3f}  F1 {scores['f1-score']:.3f}  n={int(scores['support'])}")
    print("Sample tags:")
    for words, labels in list(zip(sentences, predicted))[:3]:
        print("  " + " ".join(w if t == "O" else f"[{w}|{t}]" for w, t in zip(words, labels)))
    metrics = {
        "validation": {
            "f1": float(overall["f1-score"]),
            "precision": float(overall["precision"]),
            "recall": float(overall["recall"]),
        },
        "per_type": per_type,
        "predict_sentences_per_second": round(len(sentences) / predict_seconds, 1),
    }
    return metrics
