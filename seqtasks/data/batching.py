"""Shuffling and length-bucketed batching shared by the tasks' `tf.data` pipelines."""

from seqtasks.training.distribute import shard_by_data
from seqtasks.training.position import training_position

def epoch_ordered(data, size, seed, batches, per_epoch=None):
    """`batches(data)`, shuffled in an order set by `seed` and the training epoch, less the batches done.

    `size` is the number of elements (the shuffle buffer holds them all).
    `per_epoch(elements, epoch)`, when given, maps the shuffled elements
    before they are batched, knowing the epoch (a recipe's `data.augment`).
    A run resumed mid-epoch so sees the rest of that epoch's batches in the
    order, and with the draws, the stopped run would have.
    """
    import tensorflow as tf

    position = training_position()

    def epoch(_):
        # A fixed graph-level seed for this function alone: the order then depends on `seed` and the
        # epoch only, and TensorFlow never compares a tensor seed with a global seed of 0.
        tf.random.set_seed(1)
        order = tf.constant(seed, tf.int64) * 1_000_003 + position.epoch.read_value()
        shuffled = data.shuffle(size, seed=order, reshuffle_each_iteration=False)
        if per_epoch is not None:
            shuffled = per_epoch(shuffled, position.epoch.read_value())
        return batches(shuffled).skip(position.batches_done.read_value())

    return tf.data.Dataset.from_tensors(0).flat_map(epoch)


def bucketed_batches(data, size, length_fn, boundaries, batch_size, shuffle_seed=None, padding_values=None,
                     per_epoch=None):
    """Caches `data`, shuffles it when `shuffle_seed` is set, and pads batches of similar length.

    `size` is the number of elements; `length_fn(*element)` gives the length
    buckets are chosen by. With a `shuffle_seed` the order follows the
    training position (`epoch_ordered`), and `per_epoch(elements, epoch)`,
    when given, maps each epoch's shuffled elements before they are batched
    (`length_fn` then reads what it returns). Batches are global batches; under a
    multi-worker strategy each worker keeps its share. Under Keras' JAX
    backend, where each new batch shape compiles the training step again,
    the batches are padded to their bucket's boundary (`pad_to_boundaries`).
    """
    import keras

    data = data.cache()

    def batches(elements):
        return elements.bucket_by_sequence_length(
            length_fn,
            bucket_boundaries=boundaries,
            bucket_batch_sizes=[batch_size] * (len(boundaries) + 1),
            padding_values=padding_values,
        )

    if keras.config.backend() == "jax":
        plain = batches
        batches = lambda elements: pad_to_boundaries(plain(elements), boundaries)  # noqa: E731
    if shuffle_seed is None:
        return shard_by_data(batches(data))
    return shard_by_data(epoch_ordered(data, size, shuffle_seed, batches, per_epoch))


def pad_to_boundaries(batches, boundaries):
    """Pads axis 1 of each tensor of rank 2 or more with zeros (or "") up to the first of `boundaries` that holds it
    (past the last boundary: the next power of two), so batches come in few shapes."""
    import tensorflow as tf

    last = max(boundaries)
    widths = tf.constant(sorted(boundaries) + [2**k for k in range(31) if 2**k > last], tf.int32)

    def pad(tensor):
        if tensor.shape.rank is None or tensor.shape.rank < 2:
            return tensor
        length = tf.shape(tensor)[1]
        width = tf.boolean_mask(widths, widths >= length)[0]
        padding = [[0, 0], [0, width - length]] + [[0, 0]] * (tensor.shape.rank - 2)
        return tf.pad(tensor, padding, constant_values="" if tensor.dtype == tf.string else 0)

    return batches.map(lambda *element: tf.nest.map_structure(pad, element if len(element) > 1 else element[0]))
