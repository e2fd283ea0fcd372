import keras
import numpy as np
import pytest

from seqtasks.layers import AttentionPooling
from tests.support.layer_test_utils import run_layer_test
from tests.support.numerics import tolerance

pytestmark = pytest.mark.backends


@pytest.mark.slow
@pytest.mark.core
def test_layer_contract(tmp_path):
    inputs = np.random.default_rng(0).normal(size=(3, 5, 6)).astype("float32")
    run_layer_test(
        AttentionPooling,
        {"units": 4},
        {"inputs": inputs},
        tmp_path=tmp_path,
        expected_output_shapes=((3, 6), (3, 5)),
        # The query (1, 4), then the attention's W_q (4, 4), W_k (6, 4) and v (4,).
        expected_num_trainable_weights=4,
        expected_num_non_trainable_weights=0,
        expected_num_params=4 + 4 * 4 + 6 * 4 + 4,
        expected_weight_paths=["query", "attention/attention_v", "attention/query_dense/kernel", "attention/key_dense/kernel"],
    )


def test_the_initializer_reaches_the_query_and_the_attention():
    pooling = AttentionPooling(3, kernel_initializer="ones")
    pooling(np.zeros((1, 2, 4), "float32"))
    for weight in [pooling.query, pooling.attention.query_dense.kernel, pooling.attention.key_dense.kernel]:
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(weight), 1.0)
    clone = AttentionPooling.from_config(pooling.get_config())
    assert isinstance(clone.kernel_initializer, keras.initializers.Ones)


def test_weights_sum_to_one_are_zero_on_padding_and_average_the_states():
    rng = np.random.default_rng(1)
    inputs = rng.normal(size=(2, 4, 3)).astype("float32")
    mask = np.array([[True, True, True, True], [True, True, False, False]])
    pooling = AttentionPooling(5)
    pooled, weights = (keras.ops.convert_to_numpy(x) for x in pooling(inputs, mask=mask))
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-6)
    assert (weights[1, 2:] == 0.0).all()
    np.testing.assert_allclose(pooled, np.einsum("bt,btd->bd", weights, inputs), **tolerance(rtol=1e-5, atol=1e-6))


def test_padding_does_not_change_the_result():
    rng = np.random.default_rng(2)
    inputs = rng.normal(size=(1, 3, 4)).astype("float32")
    padded = np.concatenate([inputs, rng.normal(size=(1, 2, 4)).astype("float32")], axis=1)
    pooling = AttentionPooling(6)
    alone, _ = pooling(inputs)
    masked, _ = pooling(padded, mask=np.array([[True] * 3 + [False] * 2]))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(masked), keras.ops.convert_to_numpy(alone), **tolerance(rtol=1e-6))


@pytest.mark.parametrize("units", [0, True, 4.0])
def test_rejects_bad_units(units):
    with pytest.raises(ValueError, match=f"Expected a positive integer. Received: units={units!r}"):
        AttentionPooling(units)


def test_mask_reaches_the_attention_in_a_functional_model():
    tokens = keras.Input((None,), dtype="int32")
    pooled, weights = AttentionPooling(4)(keras.layers.Embedding(10, 3, mask_zero=True)(tokens))
    assert pooled.shape == (None, 3) and weights.shape == (None, None)
    _, weights = keras.Model(tokens, [pooled, weights])(np.array([[1, 2, 0, 0]]))
    np.testing.assert_array_equal(np.array(weights)[0, 2:], 0.0)
