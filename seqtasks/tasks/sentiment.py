"""Sentiment (text classification): a recurrent encoder's last state or attention pooling -> classes."""

import time

import numpy as np


_BUCKETS = [16, 32, 64, 128, 256, 512, 1024]
# An HTML tag such as IMDB's `<br />`; the same pattern in Python (`re`) and in the graph (RE2).
_HTML_TAG = r"<[^>]{0,100}>"


def _load(recipe):
    from seqtasks.data.labelled_text import read_labelled_texts, split_examples

    config = recipe.data
    train = read_labelled_texts(config, config.path)
    if config.validation_path:
        return train, read_labelled_texts(config, config.validation_path)
    return split_examples(train, config.validation_size, recipe.seed)


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


def run(recipe, run_dir):
    """Trains, evaluates (accuracy, macro-F1, confusion matrix) and exports; returns the metrics."""
    import keras

    from seqtasks.io_utils import write_text_atomic
    from seqtasks.models import TextClassifier
    from seqtasks.tasks.classification_common import compile_classifier
    from seqtasks.text.subword_tokenizer import SubwordTokenizer, learn_vocabulary
    from seqtasks.training import fit_metrics, train_model

    started = time.time()
    keras.utils.set_random_seed(recipe.seed)
    config = recipe.data
    train, validation = _load(recipe)
    labels, names = class_labels(config, train, validation)
    label_index = {label: index for index, label in enumerate(labels)}
    print(f"Texts: {len(train)} training, {len(validation)} validation; classes: {', '.join(names)}")

    vocab = learn_vocabulary(
        _vocabulary_texts(config, train), config.vocab_size, config.lower_case, "data.vocab_size"
    )
    write_text_atomic(run_dir / "vocab.txt", "\n".join(vocab) + "\n")
    write_text_atomic(run_dir / "labels.txt", "\n".join(labels) + "\n")
    tokenizer = SubwordTokenizer(vocab, config.lower_case)
    encode = make_text_encoder(config, tokenizer)
    print(f"Vocabulary: {len(vocab)} subwords")

    batch_size = recipe.training.batch_size
    train_data = make_dataset(train, label_index, encode, batch_size, recipe.seed)
    validation_data = make_dataset(validation, label_index, encode, batch_size)

    model, history, train_seconds = train_model(
        recipe,
        run_dir,
        lambda: TextClassifier.from_recipe(recipe.model, len(vocab), len(labels)),
        lambda model: compile_classifier(model, recipe.training),
        train_data,
        validation_data,
    )

    metrics = fit_metrics("sentiment", history, train_seconds, model)
    metrics.update({
        "train_examples": len(train),
        "validation_examples": len(validation),
        # Wall time of `fit`, validation passes and tracing included.
        "train_examples_per_second": round(history.batches_seen * batch_size / train_seconds, 1),
    })
    metrics.update(evaluate_and_export(recipe, run_dir, model, tokenizer, validation, labels, names))
    metrics["seconds"] = round(time.time() - started, 1)
    return metrics


def load_run(run_dir, overrides=(), checkpoint=None):
    """A trained run: its recipe (with `KEY=VALUE` overrides), tokenizer, labels and model (see `seqtasks.trained`)."""
    from seqtasks import trained
    from seqtasks.models import TextClassifier
    from seqtasks.text.subword_tokenizer import SubwordTokenizer

    recipe = trained.read_run_recipe(run_dir, overrides)
    vocab = trained.read_lines(run_dir, "vocab.txt")
    labels = trained.read_lines(run_dir, "labels.txt")
    names = list(recipe.data.label_names) or labels
    model = trained.load_model(
        run_dir,
        checkpoint,
        TextClassifier,
        lambda: TextClassifier.from_recipe(recipe.model, len(vocab), len(labels)),
        recipe.training,
    )
    tokenizer = SubwordTokenizer(vocab, recipe.data.lower_case)
    return trained.TrainedRun(run_dir, recipe, model, {"tokenizer": tokenizer, "labels": labels, "names": names})


def evaluate_file(run, path):
    """Accuracy, macro-F1 and confusion matrix on every text of `path` (the recipe's format); outputs in `run_dir/eval/`."""
    from seqtasks.data.labelled_text import read_labelled_texts
    from seqtasks.errors import SeqtasksError
    from seqtasks.trained import eval_folder

    examples = read_labelled_texts(run.recipe.data, path)
    labels = run.parts["labels"]
    unknown = sorted({label for _, label in examples} - set(labels))
    if unknown:
        raise SeqtasksError(f"{path}: label {unknown[0]!r} is not one the model was trained on ({', '.join(labels)})")
    return evaluate(
        run.recipe, eval_folder(run.run_dir, path), run.model, run.parts["tokenizer"], examples, labels,
        run.parts["names"],
    )


def export_run(run):
    """Writes the run's SavedModel under `export.directory`; returns its folder."""
    return export(run.recipe, run.model, run.parts["tokenizer"], run.parts["names"])


def evaluate_and_export(recipe, run_dir, model, tokenizer, validation, labels, names):
    """`evaluate` on the validation texts, then `export` where the recipe asks for it."""
    from seqtasks.export import export_if_enabled

    metrics = evaluate(recipe, run_dir, model, tokenizer, validation, labels, names)
    return export_if_enabled(recipe, metrics, lambda: export(recipe, model, tokenizer, names))


def export(recipe, model, tokenizer, names):
    """The text-to-label SavedModel under `export.directory`; its folder (None on a worker that is not the chief)."""
    from seqtasks.export import export_saved_model
    from seqtasks.tasks.classification_common import make_classifier_server

    server = make_classifier_server(model, tokenizer, make_text_encoder(recipe.data, tokenizer), names)
    return export_saved_model(server, server.serve, recipe.export.directory, recipe.name)


def evaluate(recipe, out_dir, model, tokenizer, examples, labels, names):
    """Accuracy, macro-F1 and confusion matrix (JSON and PNG) on `examples`; predictions in `out_dir`."""
    from seqtasks.errors import SeqtasksError
    from seqtasks.io_utils import write_text_atomic
    from seqtasks.plots import save_confusion_matrix
    from seqtasks.tasks.classification_common import predict_probabilities

    if not examples:
        raise SeqtasksError("no texts to evaluate")
    encode = make_text_encoder(recipe.data, tokenizer)
    texts = [text for text, _ in examples]
    label_index = {label: index for index, label in enumerate(labels)}
    actual = np.array([label_index[label] for _, label in examples])
    predict_started = time.time()
    probabilities = predict_probabilities(model, encode, texts, recipe.training.batch_size)
    predict_seconds = time.time() - predict_started
    predicted = probabilities.argmax(axis=1)
    scores = classification_metrics(predicted, actual, names)
    save_confusion_matrix(np.array(scores["confusion_matrix"]), names, out_dir / "confusion_matrix.png")
    write_text_atomic(
        out_dir / "predictions.tsv",
        "".join(
            f"{names[p]}\t{names[a]}\t{' '.join(text.split())}\n" for p, a, text in zip(predicted, actual, texts)
        ),
    )
    print("Sample predictions:")
    for index in range(min(5, len(texts))):
        print(f"  {names[predicted[index]]:>10} (actual {names[actual[index]]}): {texts[index][:100]}")
    return {
        "validation": {"accuracy": scores["accuracy"], "macro_f1": scores["macro_f1"]},
        "per_class_f1": scores["per_class_f1"],
        "confusion_matrix": {"labels": names, "rows_actual_columns_predicted": scores["confusion_matrix"]},
        "predict_texts_per_second": round(len(texts) / predict_seconds, 1),
    }
