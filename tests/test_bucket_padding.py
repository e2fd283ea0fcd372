import numpy as np
import tensorflow as tf

from seqtasks.data.batching import pad_to_boundaries
from seqtasks.training.distribute import divisible_batches


def test_batches_are_padded_to_the_first_boundary_that_holds_them():
    lengths = [5, 8, 9, 13, 17, 40]
    batches = tf.data.Dataset.from_generator(
        lambda: ((np.ones((2, n), np.int32), np.ones((2,), np.int32)) for n in lengths),
        output_signature=(tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)),
    )
    padded = list(pad_to_boundaries(batches, [8, 16]).as_numpy_iterator())
    # Past the last boundary: the next power of two.
    assert [ids.shape for ids, _ in padded] == [(2, 8), (2, 8), (2, 16), (2, 16), (2, 32), (2, 64)]
    assert [labels.shape for _, labels in padded] == [(2,)] * 6
    first = padded[0][0]
    assert first[:, :5].all() and not first[:, 5:].any()


def test_strings_and_nested_features_are_padded_too():
    batches = tf.data.Dataset.from_tensors(
        ({"words": tf.constant([["a", "b", "c"]]), "characters": tf.ones((1, 3, 4), tf.int32)}, tf.ones((1, 3), tf.int32))
    )
    features, tags = next(iter(pad_to_boundaries(batches, [6])))
    assert features["words"].numpy().tolist() == [[b"a", b"b", b"c", b"", b"", b""]]
    assert features["characters"].shape == (1, 6, 4) and int(tf.reduce_sum(features["characters"])) == 12
    assert tags.shape == (1, 6)


def test_batches_are_cut_to_a_multiple_of_the_devices_and_empty_ones_dropped():
    sizes = [8, 7, 3, 1]
    batches = tf.data.Dataset.from_generator(
        lambda: (({"ids": np.arange(n * 2).reshape(n, 2)}, np.arange(n)) for n in sizes),
        output_signature=({"ids": tf.TensorSpec([None, 2], tf.int64)}, tf.TensorSpec([None], tf.int64)),
    )
    cut = list(divisible_batches(batches, 4).as_numpy_iterator())
    assert [labels.tolist() for _, labels in cut] == [list(range(8)), [0, 1, 2, 3]]
    assert cut[1][0]["ids"].tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]]
