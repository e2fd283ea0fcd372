"""The toy task: reverse sequences of digits ("3 1 4" -> "4 1 3").

It exercises the whole path of a real task (recipe -> data -> model -> fit ->
decoding -> metrics -> SavedModel) in about half a minute on a CPU, and the
attention it needs (output step t reads input step T - t) is easy to check.
"""

import time

import numpy as np

from seqtasks.text.subword_tokenizer import END_ID, PAD_ID, RESERVED_TOKENS, START_ID


def make_examples(config, count, rng):
    """Returns `(source, target_in, target_out)` int32 arrays, 0-padded.

    Digit `d` has id `len(RESERVED_TOKENS) + d`, as in `WordTokenizer` over
    the digits.
    """
    width = config.max_length
    source = np.full((count, width), PAD_ID, np.int32)
    target_in = np.full((count, width + 1), PAD_ID, np.int32)
    target_out = np.full((count, width + 1), PAD_ID, np.int32)
    for row in range(count):
        length = rng.integers(config.min_length, config.max_length + 1)
        ids = rng.integers(0, config.num_symbols, size=length) + len(RESERVED_TOKENS)
        source[row, :length] = ids
        target_in[row, 0] = START_ID
        target_in[row, 1 : length + 1] = ids[::-1]
        target_out[row, :length] = ids[::-1]
        target_out[row, length] = END_ID
    return source, target_in, target_out


def _dataset(arrays, batch_size, shuffle_seed=None):
    import tensorflow as tf

    from seqtasks.data.batching import epoch_ordered

    source, target_in, target_out = arrays
    data = tf.data.Dataset.from_tensor_slices(((source, target_in), target_out))
    if shuffle_seed is None:
        data = data.batch(batch_size)
    else:
        data = epoch_ordered(data, len(source), shuffle_seed, lambda elements: elements.batch(batch_size))
    return data.prefetch(tf.data.AUTOTUNE)


def evaluate(predictions, target_out):
    """Sequence and token accuracy of decoded id rows against the references."""
    width = target_out.shape[1]
    predicted = np.stack([np.pad(row[:width], (0, max(0, width - len(row)))) for row in predictions])
    real = target_out != PAD_ID
    return {
        "sequence_accuracy": float(np.all((predicted == target_out) | ~real, axis=1).mean()),
        "token_accuracy": float(((predicted == target_out) & real).sum() / real.sum()),
    }


def run(recipe, run_dir):
    """Trains, evaluates and exports the toy model; returns the metrics."""
    import keras

    from seqtasks.export import export_if_enabled
    from seqtasks.models import Seq2Seq
    from seqtasks.tasks.seq2seq_common import compile_model, decode_all, make_decode
    from seqtasks.training import fit_metrics, train_model

    started = time.time()
    keras.utils.set_random_seed(recipe.seed)
    rng = np.random.default_rng(recipe.seed)
    config = recipe.data
    train = make_examples(config, config.train_size, rng)
    validation = make_examples(config, config.validation_size, rng)
    tokenizer = _tokenizer(config)
    batch_size = recipe.training.batch_size

    model, history, train_seconds = train_model(
        recipe,
        run_dir,
        lambda: Seq2Seq.from_recipe(recipe.model, tokenizer.vocab_size, tokenizer.vocab_size, seed=recipe.seed),
        lambda model: compile_model(model, recipe.training),
        _dataset(train, batch_size, shuffle_seed=recipe.seed),
        _dataset(validation, batch_size),
    )
    decode = make_decode(model, recipe.model.decoding)
    predictions = decode_all(decode, validation[0], batch_size)
    scores = evaluate(predictions, validation[2])

    sources = tokenizer.detokenize(validation[0][:3]).numpy()
    outputs = tokenizer.detokenize(np.stack(predictions[:3])).numpy()
    print("Sample outputs (validation):")
    for source, output in zip(sources, outputs):
        print(f"  {source.decode()}  ->  {output.decode()}")

    metrics = fit_metrics("toy", history, train_seconds, model)
    metrics.update(
        validation=scores, train_examples=config.train_size, validation_examples=config.validation_size
    )
    export_if_enabled(recipe, metrics, lambda: export(recipe, model, tokenizer))
    metrics["seconds"] = round(time.time() - started, 1)
    return metrics


def export(recipe, model, tokenizer):
    """The digits-to-digits SavedModel under `export.directory`; its folder (None on a worker that is not the chief)."""
    from seqtasks.export import export_saved_model
    from seqtasks.tasks.seq2seq_common import make_decode, make_server

    decode = make_decode(model, recipe.model.decoding)
    server = make_server(model, decode, tokenizer, tokenizer, recipe.data.max_length, "output")
    return export_saved_model(server, server.serve, recipe.export.directory, recipe.name)


def load_run(run_dir, overrides=(), checkpoint=None):
    """A trained run: its recipe (with `KEY=VALUE` overrides), tokenizer and model (see `seqtasks.trained`)."""
    from seqtasks import trained
    from seqtasks.models import Seq2Seq

    recipe = trained.read_run_recipe(run_dir, overrides)
    tokenizer = _tokenizer(recipe.data)
    size = tokenizer.vocab_size
    model = trained.load_model(
        run_dir, checkpoint, Seq2Seq, lambda: Seq2Seq.from_recipe(recipe.model, size, size, seed=recipe.seed),
        recipe.training,
    )
    return trained.TrainedRun(run_dir, recipe, model, {"tokenizer": tokenizer})


def export_run(run):
    """Writes the run's SavedModel under `export.directory`; returns its folder."""
    return export(run.recipe, run.model, run.parts["tokenizer"])


def _tokenizer(config):
    from seqtasks.text.word_tokenizer import WordTokenizer

    return WordTokenizer([str(digit) for digit in range(config.num_symbols)])
