"""What the encoder-decoder tasks share: compiling, decoding, serving."""

from seqtasks.text.subword_tokenizer import END_ID, PAD_ID, START_ID


def compile_model(model, training):
    import keras

    from seqtasks.losses import SmoothedSparseCrossentropy
    from seqtasks.training import make_optimizer

    model.compile(
        optimizer=make_optimizer(training),
        loss=SmoothedSparseCrossentropy(training.label_smoothing),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="token_accuracy")],
        # XLA cannot compile the gradient of the input-feeding scan (TensorArray accumulators).
        jit_compile=False,
    )


def make_decode(model, decoding):
    """`decode(source_ids) -> (ids, lengths, scores)` with the recipe's search settings."""
    from keras import ops

    from seqtasks.decoding import beam_search, greedy_search, tile_beams

    def decode(source_ids):
        cache, state = model.encode(source_ids)
        start = ops.full((ops.shape(source_ids)[0],), START_ID, dtype="int32")
        if decoding.beam_width > 1:
            cache, state = tile_beams((cache, state), decoding.beam_width)

        def step(ids, state):
            logits, state, _ = model.decode_step(ids, state, cache)
            return logits, state

        if decoding.beam_width == 1:
            return greedy_search(step, state, start, END_ID, decoding.max_length)[:3]
        return beam_search(
            step,
            state,
            start,
            END_ID,
            decoding.max_length,
            decoding.beam_width,
            alpha=decoding.length_penalty,
        )[:3]

    return decode


def decode_all(decode_fn, rows, batch_size, timings=None):
    """Decodes id rows (lists or arrays, padding allowed) in length-sorted batches.

    Sorting by length keeps padding low; the input signature has no fixed
    sizes, so the decode function is traced once for all batches. Returns the
    output id arrays in the order of `rows`. A `timings` dict receives
    `trace_seconds` and `decode_seconds` (all batches, tracing excluded).
    """
    import time

    import numpy as np
    import tensorflow as tf

    from seqtasks.progress import progress_bar

    compiled = tf.function(decode_fn, input_signature=[tf.TensorSpec([None, None], tf.int32)])
    started = time.perf_counter()
    compiled.get_concrete_function()
    traced = time.perf_counter()
    rows = [[int(i) for i in row if i != PAD_ID] for row in rows]
    order = np.argsort([len(row) for row in rows], kind="stable")
    outputs = [None] * len(rows)
    with progress_bar(len(rows), "Decoding") as bar:
        for start in range(0, len(rows), batch_size):
            chunk = order[start : start + batch_size]
            ids, _, _ = compiled(tf.constant(pad_rows([rows[i] for i in chunk])))
            for index, output in zip(chunk, np.asarray(ids)):
                outputs[index] = output
            bar.update(len(chunk))
    if timings is not None:
        timings.update(trace_seconds=traced - started, decode_seconds=time.perf_counter() - traced)
    return outputs


def make_server(model, decode_fn, source_tokenizer, target_tokenizer, max_input_length, output_name):
    """A `tf.Module` whose `serve` maps `text` `[None]` to `output_name` and `score`."""
    import tensorflow as tf

    class Seq2SeqServer(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = model
            self.source_tokenizer = source_tokenizer
            self.target_tokenizer = target_tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            # Inputs are truncated to `max_input_length` tokens; at least one
            # column keeps the encoder's time axis non-empty.
            tokens = self.source_tokenizer.tokenize(text)[:, :max_input_length]
            source = tokens.to_tensor(default_value=PAD_ID)
            source = tf.pad(source, [[0, 0], [0, tf.maximum(0, 1 - tf.shape(source)[1])]])
            ids, _, scores = decode_fn(source)
            return {output_name: self.target_tokenizer.detokenize(ids), "score": scores}

    return Seq2SeqServer()


def pad_rows(rows, width=None):
    """Right-pads lists of ids with `PAD_ID` into an int32 array."""
    import numpy as np

    width = width or max((len(row) for row in rows), default=1) or 1
    out = np.full((len(rows), width), PAD_ID, np.int32)
    for index, row in enumerate(rows):
        out[index, : len(row)] = row[:width]
    return out
