"""What the encoder-decoder tasks (translation, toy, captioning) share: compiling, decoding, serving."""

from seqtasks.text.special_ids import END_ID, PAD_ID, START_ID


def compile_model(model, training):
    import keras

    from seqtasks.training.losses import SmoothedSparseCrossentropy
    from seqtasks.training.fit import make_optimizer

    model.compile(
        optimizer=make_optimizer(training),
        loss=SmoothedSparseCrossentropy(training.label_smoothing),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="token_accuracy")],
        # XLA: under TensorFlow it cannot compile the gradient of the input-feeding scan (TensorArray
        # accumulators); under JAX the scan is a `lax.scan` it compiles, and eager steps would crawl.
        jit_compile=keras.backend.backend() == "jax",
    )


def make_decode(model, decoding, n_best=None):
    """`decode(inputs) -> (ids, lengths, scores)` with the recipe's search settings.

    With `n_best` (beam search), the `n_best` best hypotheses: `ids`
    `(batch, n_best, time)`, `lengths` and `scores` `(batch, n_best)`.

    `model` gives `encode(inputs) -> (cache, state)` and
    `decode_step(ids, state, cache) -> (logits, state, weights)`.
    """
    from keras import ops

    from seqtasks.decoding import beam_search, greedy_search, tile_beams

    def decode(inputs):
        cache, state = model.encode(inputs)
        start = ops.full((ops.shape(inputs)[0],), START_ID, dtype="int32")
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
            n_best=n_best,
        )[:3]

    return decode


def decode_in_batches(decode_fn, model, input_spec, items, to_batch, batch_size, label, lengths=None, timings=None):
    """Output id rows of `decode_fn` for every item, in the order of `items`.

    `decode_fn` reads `model`'s variables; it is compiled for `input_spec`
    (`(shape, dtype)`, `None` for any size: see `seqtasks.training.compiled`) and run
    on `to_batch(list of items)` NumPy batches, sorted by `lengths` when
    given. Where each shape compiles anew (JAX) the batches are padded to a
    few shapes (`seqtasks.training.compiled.pad_batch`). A `timings` dict receives
    `trace_seconds` (tracing and compiling) and `decode_seconds` (the rest).
    """
    import time

    from seqtasks.training.compiled import CompiledFunction, pad_batch
    from seqtasks.tasks.prediction_loop import predict_in_batches

    compiled = CompiledFunction(decode_fn, model, [input_spec])

    def predict_batch(batch):
        array = to_batch(batch)
        if compiled.compiles_per_shape:
            array = pad_batch(array, input_spec[0], batch_size, PAD_ID)
        return compiled(array)[0][: len(batch)]

    started = time.perf_counter()
    rows = predict_in_batches(predict_batch, items, batch_size, label, lengths)
    if timings is not None:
        seconds = time.perf_counter() - started
        timings.update(trace_seconds=compiled.compile_seconds, decode_seconds=seconds - compiled.compile_seconds)
    return rows


def decode_id_rows(decode_fn, model, rows, batch_size, timings=None):
    """Output id rows for source id rows (lists or arrays, padding allowed), decoded in length-sorted batches."""
    rows = [[int(i) for i in row if i != PAD_ID] for row in rows]
    return decode_in_batches(
        decode_fn,
        model,
        ((None, None), "int32"),
        rows,
        pad_rows,
        batch_size,
        "Decoding",
        lengths=[len(row) for row in rows],
        timings=timings,
    )


def make_server(model, decode_fn, source_tokenizer, target_tokenizer, max_input_length, output_name, n_best=1):
    """A `tf.Module` whose `serve` maps `text` `[None]` to `output_name` and `score`.

    Texts are cut to `text_character_limit(max_input_length)` characters,
    then to `max_input_length` tokens. A text with no tokens (empty, blank) gets an
    empty output and a score of 0.0, the log-probability of a certain output.
    With `n_best` > 1 (`decode_fn` from `make_decode(..., n_best=n_best)`),
    `serve` also returns the `n_best` best, best first: `output_name + "s"`
    and `"scores"`, `[None, n_best]`.

    `serving_signatures()` names every signature an export holds: `serve`
    as `serving_default`; `with_settings`, which also takes the decoding
    settings (`seqtasks.tasks.decoding_settings`) and always returns the
    n-best outputs; and, for a model with attention, `attention`: the
    default decoding's output with `source_tokens` `[None, S]`,
    `target_tokens` `[None, T]` (the end token included; both padded with
    "") and `attention` `[None, T, S]` (0 on padding).
    """
    import tensorflow as tf

    from seqtasks.tasks.decoding_settings import (
        ATTENTION_SIGNATURE,
        SETTINGS_SIGNATURE,
        make_settings_decode,
        read_settings,
        settings_specs,
    )
    from seqtasks.tasks.serving_limits import cut_text

    settings_decode = make_settings_decode(model)
    text_spec = tf.TensorSpec([None], tf.string, name="text")

    class Seq2SeqServer(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = model
            self.source_tokenizer = source_tokenizer
            self.target_tokenizer = target_tokenizer
            # Only then: saving traces every tf.function a module holds.
            if getattr(model.decoder_layer, "attention", "none") != "none":
                self.attention = tf.function(self._attention, input_signature=[text_spec])

        def _source(self, text):
            tokens = self.source_tokenizer.tokenize(cut_text(text, max_input_length))[:, :max_input_length]
            # At least one column keeps the encoder's time axis non-empty.
            source = tokens.to_tensor(default_value=PAD_ID)
            source = tf.pad(source, [[0, 0], [0, tf.maximum(0, 1 - tf.shape(source)[1])]])
            # The decoder would write something even for no input.
            return source, tf.equal(tokens.row_lengths(), 0)

        @tf.function(input_signature=[text_spec])
        def serve(self, text):
            source, empty = self._source(text)
            ids, _, scores = decode_fn(source)
            return serving_outputs(self.target_tokenizer, ids, scores, output_name, n_best, blank=empty)

        @tf.function(input_signature=[text_spec, *settings_specs()])
        def serve_with_settings(self, text, beam_width, n_best, max_length, length_penalty):
            settings = read_settings(beam_width, n_best, max_length, length_penalty)
            source, empty = self._source(text)
            ids, _, scores = settings_decode(source, *settings)
            return serving_outputs(self.target_tokenizer, ids, scores, output_name, "any", blank=empty)

        def _attention(self, text):
            source, empty = self._source(text)
            ids, scores, weights, target_mask = decoded_attention(self.model, decode_fn, n_best, source, empty)
            source_mask = tf.not_equal(source, PAD_ID)
            weights = tf.where(target_mask[:, :, None] & source_mask[:, None, :], weights, 0.0)
            outputs = serving_outputs(self.target_tokenizer, ids, scores, output_name, 1, blank=empty)
            outputs.update(
                source_tokens=token_strings(self.source_tokenizer, source, source_mask),
                target_tokens=token_strings(self.target_tokenizer, ids, target_mask),
                attention=weights,
            )
            return outputs

        def serving_signatures(self):
            signatures = {"serving_default": self.serve, SETTINGS_SIGNATURE: self.serve_with_settings}
            if hasattr(self, "attention"):
                signatures[ATTENTION_SIGNATURE] = self.attention
            return signatures

    return Seq2SeqServer()


def decoded_attention(model, decode_fn, n_best, inputs, empty=None):
    """The best output of `decode_fn` for `inputs` and the attention the decoder gave while writing it.

    Feeding the output back through `model.attention` gives the weights of
    its own decoding. Returns `(ids, scores, weights, mask)`: `ids` `[batch,
    T]` cut to the longest output, `weights` float32 `[batch, T, source]`,
    `mask` `[batch, T]` true up to each output's end token; rows where
    `empty` is true have no output.
    """
    import tensorflow as tf

    ids, lengths, scores = make_decode_best(decode_fn, n_best)(inputs)
    if empty is not None:
        lengths = tf.where(empty, 0, lengths)
    ids = ids[:, : tf.maximum(1, tf.reduce_max(lengths))]
    start = tf.fill([tf.shape(ids)[0], 1], START_ID)
    weights = tf.cast(model.attention(inputs, tf.concat([start, ids[:, :-1]], 1)), tf.float32)
    return ids, scores, weights, tf.sequence_mask(lengths, tf.shape(ids)[1])


def make_decode_best(decode_fn, n_best):
    """`decode_fn` (of `make_decode`, with `n_best` kept) cut to its best hypothesis: `(ids, lengths, scores)`."""
    if n_best == 1:
        return decode_fn

    def best(inputs):
        ids, lengths, scores = decode_fn(inputs)
        return ids[:, 0], lengths[:, 0], scores[:, 0]

    return best


def token_strings(tokenizer, ids, mask):
    """The vocabulary entries of `ids` `[batch, time]`, "" where `mask` is false."""
    import tensorflow as tf

    strings = tf.gather(tf.constant(tokenizer.vocab), tf.cast(ids, tf.int32))
    return tf.where(mask, strings, "")


def serving_outputs(tokenizer, ids, scores, output_name, n_best, blank=None):
    """An export's outputs from decoded `ids`: `output_name` and `score`, and with `n_best` > 1
    also `output_name + "s"` and `"scores"` `[batch, n_best]`, best first. `n_best="any"`: `ids`
    has an n-best axis of any size (`with_settings`).

    Rows where `blank` is true get empty texts and a score of 0.0.
    """
    import tensorflow as tf

    if n_best == 1:
        texts = tokenizer.detokenize(ids)
    else:
        texts = tokenizer.detokenize(tf.reshape(ids, [-1, tf.shape(ids)[2]]))
        texts = tf.reshape(texts, [-1, tf.shape(ids)[1]])
    if blank is not None:
        rows = blank if n_best == 1 else blank[:, None]
        texts, scores = tf.where(rows, "", texts), tf.where(rows, tf.zeros_like(scores), scores)
    if n_best == 1:
        return {output_name: texts, "score": scores}
    return {output_name: texts[:, 0], "score": scores[:, 0], output_name + "s": texts, "scores": scores}


def pad_rows(rows, width=None):
    """Right-pads lists of ids with `PAD_ID` into an int32 array."""
    import numpy as np

    width = width or max((len(row) for row in rows), default=1) or 1
    out = np.full((len(rows), width), PAD_ID, np.int32)
    for index, row in enumerate(rows):
        out[index, : len(row)] = row[:width]
    return out


def decoded_prefix(output_ids):
    """A decoded id row up to and including its first `END_ID`, padding dropped: the tokens the decoder wrote."""
    output = [int(i) for i in output_ids if i != PAD_ID]
    if END_ID in output:
        output = output[: output.index(END_ID) + 1]
    return output
