"""The toy task: reverse sequences of digits ("3 1 4" -> "4 1 3").

It exercises the whole path of a real task (recipe -> data -> model -> fit ->
greedy decoding -> metrics -> SavedModel) in about a minute on a CPU, and the
attention it needs (output step t reads input step T - t) is easy to check.
"""

import time

import numpy as np

from seqtasks.models.seq2seq import PAD_ID

START_ID, END_ID, UNK_ID = 1, 2, 3
SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]


def vocabulary(num_symbols):
    return SPECIALS + [str(digit) for digit in range(num_symbols)]


def make_examples(config, count, rng):
    """Returns `(source, target_in, target_out)` int32 arrays, 0-padded."""
    width = config.max_length
    source = np.zeros((count, width), np.int32)
    target_in = np.zeros((count, width + 1), np.int32)
    target_out = np.zeros((count, width + 1), np.int32)
    for row in range(count):
        length = rng.integers(config.min_length, config.max_length + 1)
        ids = rng.integers(0, config.num_symbols, size=length) + len(SPECIALS)
        source[row, :length] = ids
        target_in[row, 0] = START_ID
        target_in[row, 1 : length + 1] = ids[::-1]
        target_out[row, :length] = ids[::-1]
        target_out[row, length] = END_ID
    return source, target_in, target_out


def _dataset(arrays, batch_size, shuffle_seed=None):
    import tensorflow as tf

    source, target_in, target_out = arrays
    data = tf.data.Dataset.from_tensor_slices(((source, target_in), target_out))
    if shuffle_seed is not None:
        data = data.shuffle(len(source), seed=shuffle_seed, reshuffle_each_iteration=True)
    return data.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def greedy_decoder(model, max_length):
    """A `tf.function` mapping source ids `(batch, Ts)` to greedy output ids."""
    import tensorflow as tf

    from seqtasks.decoding import greedy_search

    @tf.function(reduce_retracing=True)
    def decode(source):
        cache, state = model.encode(source)

        def step(ids, state):
            logits, state, _ = model.decode_step(ids, state, cache)
            return logits, state

        start = tf.fill([tf.shape(source)[0]], START_ID)
        return greedy_search(step, state, start, END_ID, max_length)

    return decode


def evaluate(model, arrays, batch_size):
    """Sequence and token accuracy of greedy decoding against the references."""
    source, _, target_out = arrays
    decode = greedy_decoder(model, target_out.shape[1])
    exact = correct_tokens = total_tokens = 0
    predictions = []
    for start in range(0, len(source), batch_size):
        ids, _, _, _ = decode(source[start : start + batch_size])
        ids = np.asarray(ids)
        reference = target_out[start : start + batch_size]
        real = reference != PAD_ID
        correct_tokens += int(((ids == reference) & real).sum())
        total_tokens += int(real.sum())
        exact += int(np.all((ids == reference) | ~real, axis=1).sum())
        predictions.extend(ids)
    return {
        "sequence_accuracy": exact / len(source),
        "token_accuracy": correct_tokens / total_tokens,
    }, predictions


def _to_text(ids, vocab):
    words = []
    for token in ids:
        if token in (END_ID, PAD_ID):
            break
        words.append(vocab[token])
    return " ".join(words)


def make_server(model, vocab, max_input_length, max_output_length):
    """A `tf.Module` whose `serve` maps text `[None]` to `output` and `score`."""
    import tensorflow as tf

    from seqtasks.decoding import greedy_search

    class ToyServer(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = model
            self.token_to_id = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(
                    tf.constant(vocab), tf.range(len(vocab), dtype=tf.int64)
                ),
                default_value=UNK_ID,
            )
            self.id_to_token = tf.Variable(vocab, trainable=False, dtype=tf.string)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            # Inputs longer than the longest training sequence are truncated.
            tokens = tf.strings.split(text)[:, :max_input_length]
            ids = tf.cast(self.token_to_id.lookup(tokens), tf.int32)
            source = ids.to_tensor(default_value=PAD_ID, shape=[None, max_input_length])
            cache, state = self.model.encode(source)

            def step(ids, state):
                logits, state, _ = self.model.decode_step(ids, state, cache)
                return logits, state

            start = tf.fill([tf.shape(source)[0]], START_ID)
            out, lengths, scores, _ = greedy_search(step, state, start, END_ID, max_output_length)
            keep = tf.logical_and(tf.sequence_mask(lengths, max_output_length), out != END_ID)
            words = tf.ragged.boolean_mask(tf.gather(self.id_to_token, out), keep)
            return {
                "output": tf.strings.reduce_join(words, axis=1, separator=" "),
                "score": scores,
            }

    return ToyServer()


def run(recipe, run_dir):
    """Trains, evaluates and exports the toy model; returns the metrics."""
    import keras

    from seqtasks.distribute import make_strategy
    from seqtasks.export import export_saved_model
    from seqtasks.io_utils import publish_folder
    from seqtasks.models import Seq2Seq
    from seqtasks.training import fit, make_optimizer

    started = time.time()
    keras.utils.set_random_seed(recipe.seed)
    rng = np.random.default_rng(recipe.seed)
    config = recipe.data
    train = make_examples(config, config.train_size, rng)
    validation = make_examples(config, config.validation_size, rng)
    vocab = vocabulary(config.num_symbols)
    batch_size = recipe.training.batch_size

    strategy = make_strategy(recipe.distribute)
    with strategy.scope():
        model = Seq2Seq.from_recipe(recipe.model, len(vocab), len(vocab), seed=recipe.seed)
        model.build()
        model.compile(
            optimizer=make_optimizer(recipe.training),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=[keras.metrics.SparseCategoricalAccuracy(name="token_accuracy")],
            # XLA cannot compile the gradient of the input-feeding scan (TensorArray accumulators).
            jit_compile=False,
        )
    history = fit(
        model,
        _dataset(train, batch_size, shuffle_seed=recipe.seed),
        _dataset(validation, batch_size),
        recipe.training,
        run_dir,
    )
    scores, predictions = evaluate(model, validation, batch_size)
    publish_folder(lambda folder: model.save(f"{folder}/model.keras"), run_dir / "model")

    print("Sample outputs (validation):")
    for row in range(min(3, len(predictions))):
        source_text = _to_text(validation[0][row], vocab)
        print(f"  {source_text}  ->  {_to_text(predictions[row], vocab)}")

    metrics = {
        "task": "toy",
        "validation": scores,
        "history": {key: [float(v) for v in values] for key, values in history.history.items()},
        "epochs_run": len(history.history["loss"]),
        "train_examples": config.train_size,
        "validation_examples": config.validation_size,
        "parameters": int(model.count_params()),
    }
    if recipe.export.enabled:
        server = make_server(model, vocab, config.max_length, config.max_length + 1)
        path = export_saved_model(server, server.serve, recipe.export.directory, recipe.name)
        metrics["export"] = str(path)
    metrics["seconds"] = round(time.time() - started, 1)
    return metrics
