"""Sentiment (text classification): a recurrent encoder's last state, attention or max pooling -> classes."""

import time

import numpy as np

from seqtasks.tasks.base import Evaluation, Task

_BUCKETS = [16, 32, 64, 128, 256, 512, 1024]
# An HTML tag such as IMDB's `<br />`; the same pattern in Python (`re`) and in the graph (RE2).
_HTML_TAG = r"<[^>]{0,100}>"


def class_labels(config, train, validation):
    """The label values in class order and the names served for them."""
    from seqtasks.errors import SeqtasksError

    labels = list(config.labels) or sorted({label for _, label in train})
    if len(labels) < 2:
        raise SeqtasksError(f"{config.path}: expected at least two labels; found {labels}")
    known = set(labels)
    for part, examples in (("training", train), ("validation", validation)):
        unknown = sorted({label for _, label in examples} - known)
        if unknown:
            raise SeqtasksError(
                f"{config.validation_path if part == 'validation' and config.validation_path else config.path}: "
                f"{part} label {unknown[0]!r} is not in data.labels ({', '.join(labels)})"
            )
    return labels, list(config.label_names) or labels


def make_text_encoder(config, tokenizer):
    """`encode(text [batch]) -> ragged ids`: HTML stripping, subwords, truncation as the recipe says."""
    import tensorflow as tf

    def encode(text):
        if config.strip_html:
            text = tf.strings.regex_replace(text, _HTML_TAG, " ")
        ids = tokenizer.tokenize(text)
        return ids[:, : config.max_length] if config.keep == "first" else ids[:, -config.max_length :]

    return encode


def _vocabulary_texts(config, examples):
    import re

    texts = [text for text, _ in examples]
    if config.strip_html:
        texts = [re.sub(_HTML_TAG, " ", text) for text in texts]
    return texts


def word_counts(texts, lower_case, batch=1000):
    """How often each word (`WordTokenizer(split="words")`'s) occurs in `texts`: a `collections.Counter`."""
    import collections

    import tensorflow as tf

    from seqtasks.text.word_tokenizer import split_words

    counts = collections.Counter()
    for start in range(0, len(texts), batch):
        words = split_words(tf.constant(texts[start : start + batch]), lower_case).flat_values.numpy()
        counts.update(word.decode() for word in words)
    return counts


def _embeddings(model):
    """The token embedding layers of a classifier or of every member of an ensemble."""
    return [member.embedding for member in getattr(model, "member_models", [model])]


def make_dataset(examples, label_index, encode, batch_size, shuffle_seed=None):
    """Length-bucketed batches `(token ids, class index)`; empty texts are left out."""
    import tensorflow as tf

    from seqtasks.data.batching import bucketed_batches

    texts = tf.constant([text for text, _ in examples])
    labels = tf.constant([label_index[label] for _, label in examples], tf.int32)
    data = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(1024)
    data = data.map(lambda t, y: (encode(t), y), num_parallel_calls=tf.data.AUTOTUNE).unbatch()
    # Unbatched rows keep a ragged spec, which bucketing's padded_batch rejects.
    data = data.map(lambda ids, y: (tf.identity(ids), y))
    data = data.filter(lambda ids, y: tf.size(ids) > 0)
    data = bucketed_batches(data, len(examples), lambda ids, y: tf.size(ids), _BUCKETS, batch_size, shuffle_seed)
    return data.prefetch(tf.data.AUTOTUNE)


def classification_metrics(predicted, actual, names):
    """Accuracy, macro-F1, per-class F1 and the confusion matrix (rows: actual)."""
    count = len(names)
    confusion = np.zeros((count, count), np.int64)
    np.add.at(confusion, (actual, predicted), 1)
    true_positive = np.diag(confusion).astype(float)
    precision = np.divide(true_positive, confusion.sum(0), out=np.zeros(count), where=confusion.sum(0) > 0)
    recall = np.divide(true_positive, confusion.sum(1), out=np.zeros(count), where=confusion.sum(1) > 0)
    f1 = np.divide(2 * precision * recall, precision + recall, out=np.zeros(count), where=precision + recall > 0)
    return {
        "accuracy": float(true_positive.sum() / max(1, confusion.sum())),
        "macro_f1": float(f1.mean()),
        "per_class_f1": {name: float(value) for name, value in zip(names, f1)},
        "confusion_matrix": confusion.tolist(),
    }


class SentimentTask(Task):
    """Labelled texts -> a subword vocabulary -> `TextClassifier` -> accuracy, macro-F1, confusion matrix."""

    def read_splits(self):
        from seqtasks.data.labelled_text import read_labelled_texts, split_examples

        config = self.recipe.data
        train = read_labelled_texts(config, config.path)
        if config.validation_path:
            return train, read_labelled_texts(config, config.validation_path)
        return split_examples(train, config.validation_size, self.recipe.seed)

    def input_paths(self):
        data = self.recipe.data
        for path, _ in super().input_paths():
            if data.format == "folders":
                yield path, "folder"
            elif data.format == "lines":  # one file per label: <path>.<label>
                yield from ((f"{path}.{label}", "file") for label in data.labels)
            else:
                yield path, "file"

    def start_paths(self):
        from seqtasks.models.pretrained_vectors import vectors_path

        return vectors_path(self.recipe.model.word_vectors)

    def read_file(self, path):
        from seqtasks.data.labelled_text import read_labelled_texts
        from seqtasks.errors import SeqtasksError

        examples = read_labelled_texts(self.recipe.data, path)
        unknown = sorted({label for _, label in examples} - set(self.labels))
        if unknown:
            raise SeqtasksError(
                f"{path}: label {unknown[0]!r} is not one the model was trained on ({', '.join(self.labels)})"
            )
        return examples

    def prepare(self, train, validation, run_dir):
        from seqtasks.models.pretrained_vectors import extended_vocabulary, start_vectors
        from seqtasks.text.special_ids import RESERVED_TOKENS
        from seqtasks.text.subword_tokenizer import learn_vocabulary
        from seqtasks.utils.io_utils import write_text_atomic

        config, vectors = self.recipe.data, self.recipe.model.word_vectors
        if vectors.path and (run_dir / "vocab.txt").is_file():
            self.restore(run_dir)  # a resumed run: its vocabulary came from the vectors file once already
            return
        labels, names = class_labels(config, train, validation)
        print(f"Texts: {len(train)} training, {len(validation)} validation; classes: {', '.join(names)}")
        texts = _vocabulary_texts(config, train)
        if config.tokenizer == "words":
            counts = word_counts(texts, config.lower_case)
            vocab = list(RESERVED_TOKENS) + sorted(counts, key=lambda word: (-counts[word], word))[: config.vocab_size]
            trained = len(vocab)
            vocab = extended_vocabulary(vocab, vectors, str.lower if config.lower_case else (lambda word: word))
            self.initial_vectors = start_vectors(
                vectors, vocab, len(RESERVED_TOKENS), counts, self.recipe.model.embedding_dim, self.recipe.seed, run_dir
            )
            added = f", {len(vocab) - trained} more from the word vectors" if len(vocab) > trained else ""
            described = f"{trained} words{added}"
        else:
            vocab = learn_vocabulary(texts, config.vocab_size, config.lower_case, "data.vocab_size")
            described = f"{len(vocab)} subwords"
        write_text_atomic(run_dir / "vocab.txt", "\n".join(vocab) + "\n")
        write_text_atomic(run_dir / "labels.txt", "\n".join(labels) + "\n")
        self._set(vocab, labels)
        self.run_dir = run_dir
        print(f"Vocabulary: {described}")

    def restore(self, run_dir):
        from seqtasks.training.run_folders import read_lines

        self.run_dir = run_dir
        self._set(read_lines(run_dir, "vocab.txt"), read_lines(run_dir, "labels.txt"))

    def _set(self, vocab, labels):
        from seqtasks.text.subword_tokenizer import SubwordTokenizer
        from seqtasks.text.word_tokenizer import WordTokenizer

        config = self.recipe.data
        if config.tokenizer == "words":
            self.tokenizer = WordTokenizer(vocab, split="words", lower_case=config.lower_case)
        else:
            self.tokenizer = SubwordTokenizer(vocab, config.lower_case)
        self.encode = make_text_encoder(self.recipe.data, self.tokenizer)
        self.labels = labels
        self.names = list(self.recipe.data.label_names) or labels

    def datasets(self, train, validation):
        label_index = {label: index for index, label in enumerate(self.labels)}
        batch_size = self.recipe.training.batch_size
        return (
            make_dataset(train, label_index, self.encode, batch_size, self.recipe.seed),
            make_dataset(validation, label_index, self.encode, batch_size),
        )

    def build_model(self):
        from seqtasks.models.text_classifier import TextClassifier, TextClassifierEnsemble

        from seqtasks.models.pretrained_vectors import apply_vectors

        model_class = TextClassifierEnsemble if self.recipe.model.ensemble > 1 else TextClassifier
        model = model_class.from_recipe(self.recipe.model, self.tokenizer.vocab_size, len(self.labels))
        model.build()
        apply_vectors(self.recipe.model.word_vectors, _embeddings(model), getattr(self, "initial_vectors", None))
        return model

    def compile_model(self, model):
        from seqtasks.tasks.sentiment.training import compile_classifier
        from seqtasks.models.pretrained_vectors import freeze_for_epochs

        compile_classifier(model, self.recipe.training)
        freeze_for_epochs(self.recipe.model.word_vectors, _embeddings(model), model.optimizer)

    def data_notes(self):
        from seqtasks.models.pretrained_vectors import read_coverage, vectors_note

        return vectors_note(read_coverage(self.run_dir)) if getattr(self, "run_dir", None) else []

    def training_metrics(self, train, validation, history):
        from seqtasks.models.pretrained_vectors import read_coverage

        coverage = read_coverage(self.run_dir)
        return {
            **({"word_vectors": coverage} if coverage else {}),
            "train_examples": len(train),
            "validation_examples": len(validation),
            # Wall time of `fit`, validation passes and tracing included.
            "train_examples_per_second": round(
                history.batches_seen * self.recipe.training.batch_size / history.train_seconds, 1
            ),
        }

    def evaluate(self, model, examples, out_dir):
        """Accuracy, macro-F1 and confusion matrix (JSON and PNG); predictions in `out_dir`."""
        from seqtasks.errors import SeqtasksError
        from seqtasks.utils.io_utils import write_text_atomic
        from seqtasks.evaluation.plots import save_confusion_matrix
        from seqtasks.tasks.sentiment.prediction import predict_probabilities

        if not examples:
            raise SeqtasksError("no texts to evaluate")
        names = self.names
        texts = [text for text, _ in examples]
        label_index = {label: index for index, label in enumerate(self.labels)}
        actual = np.array([label_index[label] for _, label in examples])
        started = time.time()
        probabilities = predict_probabilities(model, self.encode, texts, self.recipe.evaluation.batch_size)
        predict_seconds = time.time() - started
        predicted = probabilities.argmax(axis=1)
        scores = classification_metrics(predicted, actual, names)
        save_confusion_matrix(np.array(scores["confusion_matrix"]), names, out_dir / "confusion_matrix.png")
        write_text_atomic(
            out_dir / "predictions.tsv",
            "".join(f"{names[p]}\t{names[a]}\t{' '.join(text.split())}\n" for p, a, text in zip(predicted, actual, texts)),
        )
        report = ["Sample predictions:"]
        report += [
            f"  {names[predicted[i]]:>10} (actual {names[actual[i]]}): {texts[i][:100]}" for i in range(min(5, len(texts)))
        ]
        drawn = self._draw_attention(model, texts, out_dir / "attention")
        if drawn:
            report.append(f"Attention maps: {drawn} drawn in {out_dir / 'attention'}")
        metrics = {
            "validation": {"accuracy": scores["accuracy"], "macro_f1": scores["macro_f1"]},
            "per_class_f1": scores["per_class_f1"],
            "confusion_matrix": {"labels": names, "rows_actual_columns_predicted": scores["confusion_matrix"]},
            "predict_texts_per_second": round(len(texts) / predict_seconds, 1),
        }
        return Evaluation(metrics, report)

    def _draw_attention(self, model, texts, folder):
        from seqtasks.tasks.sentiment.prediction import classifier_attention_maps
        from seqtasks.evaluation.token_attention import HEATMAPS, draw_token_attention
        from seqtasks.text.special_ids import PAD_ID

        maps, ids = classifier_attention_maps(model, self.encode, texts[:HEATMAPS])
        tokens = [[self.tokenizer.vocab[i] for i in row if i != PAD_ID] for row in ids]
        return draw_token_attention(maps, tokens, folder) if maps else 0

    def label_names(self):
        return list(self.names)

    def reading_limits(self):
        data = self.recipe.data
        return [
            super().reading_limits()[0],
            f"A longer text keeps its {data.keep} {data.max_length} subwords (`data.max_length`, `data.keep`).",
        ]

    def serving_module(self, model):
        from seqtasks.tasks.sentiment.export import make_classifier_module

        return make_classifier_module(
            model, self.tokenizer, self.encode, self.names, self.recipe.data.max_length, self.recipe.data.keep
        )
