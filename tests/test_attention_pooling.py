import keras
import numpy as np
import pytest
from layer_test_utils import run_layer_test

from seqtasks.layers import AttentionPooling


def test_layer_contract(tmp_path):
    inputs = np.random.default_rng(0).normal(size=(3, 5, 6)).astype("float32")
    pooled, weights = run_layer_test(AttentionPooling, {"units": 4}, {"inputs": inputs}, tmp_path=tmp_path)
    assert pooled.shape == (3, 6) and weights.shape == (3, 5)


def test_weights_sum_to_one_are_zero_on_padding_and_average_the_states():
    rng = np.random.default_rng(1)
    inputs = rng.normal(size=(2, 4, 3)).astype("float32")
    mask = np.array([[True, True, True, True], [True, True, False, False]])
    pooling = AttentionPooling(5)
    pooled, weights = (keras.ops.convert_to_numpy(x) for x in pooling(inputs, mask=mask))
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-6)
    assert (weights[1, 2:] == 0.0).all()
    np.testing.assert_allclose(pooled, np.einsum("bt,btd->bd", weights, inputs), rtol=1e-5, atol=1e-6)


def test_padding_does_not_change_the_result():
    rng = np.random.default_rng(2)
    inputs = rng.normal(size=(1, 3, 4)).astype("float32")
    padded = np.concatenate([inputs, rng.normal(size=(1, 2, 4)).astype("float32")], axis=1)
    pooling = AttentionPooling(6)
    alone, _ = pooling(inputs)
    masked, _ = pooling(padded, mask=np.array([[True] * 3 + [False] * 2]))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(masked), keras.ops.convert_to_numpy(alone), rtol=1e-6)


def test_rejects_bad_units():
    with pytest.raises(ValueError, match=r"Expected a positive integer. Received: units=0"):
        AttentionPooling(0)
