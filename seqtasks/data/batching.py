"""Shuffling and length-bucketed batching shared by the tasks' `tf.data` pipelines."""

from seqtasks.distribute import shard_by_data


def bucketed_batches(data, size, length_fn, boundaries, batch_size, shuffle_seed=None, padding_values=None):
    """Caches `data`, shuffles it when `shuffle_seed` is set, and pads batches of similar length.

    `size` is the number of elements (the shuffle buffer holds them all);
    `length_fn(*element)` gives the length buckets are chosen by. Batches are
    global batches; under a multi-worker strategy each worker keeps its share.
    """
    data = data.cache()
    if shuffle_seed is not None:
        data = data.shuffle(size, seed=shuffle_seed, reshuffle_each_iteration=True)
    data = data.bucket_by_sequence_length(
        length_fn,
        bucket_boundaries=boundaries,
        bucket_batch_sizes=[batch_size] * (len(boundaries) + 1),
        padding_values=padding_values,
    )
    return shard_by_data(data)
