"""Decoding a task's examples in batches through the one search."""

from seqtasks.text.special_ids import END_ID, PAD_ID


def make_decode(model, settings, lists=False):
    """`decode(inputs) -> (ids, lengths, scores)`: `seqtasks.decoding.search` with `settings` (a recipe's
    `model.decoding`)."""
    from seqtasks.decoding.model_search import search

    def decode(inputs):
        return search(model, inputs, settings, lists=lists)

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
    from seqtasks.evaluation.prediction_loop import predict_in_batches

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
