"""The batched prediction loop every task evaluates with."""

import numpy as np

from seqtasks.utils.progress import progress_bar


def predict_in_batches(predict_batch, items, batch_size, label, lengths=None):
    """`predict_batch` over `items` in batches; returns its rows in the order of `items`.

    With `lengths` the items are batched in order of length (ties in their
    order), so each batch is little padding. `predict_batch(list of items)`
    returns one row per item. A progress bar labelled `label` shows on a
    terminal.
    """
    order = np.arange(len(items)) if lengths is None else np.argsort(np.asarray(lengths), kind="stable")
    rows = [None] * len(items)
    with progress_bar(len(items), label) as bar:
        for start in range(0, len(items), batch_size):
            chunk = order[start : start + batch_size]
            for index, row in zip(chunk, predict_batch([items[i] for i in chunk])):
                rows[index] = row
            bar.update(len(chunk))
    return rows
