"""`StructuredSelfAttention` (Lin et al.'s structured self-attention) against NumPy versions of its formulas."""

import keras
import numpy as np
import pytest

from seqtasks.layers import StructuredSelfAttention
from tests.support.layer_test_utils import run_layer_test
from tests.support.numerics import tolerance

pytestmark = pytest.mark.backends


def _np(x):
    return keras.ops.convert_to_numpy(x)


def _softmax(scores, mask):
    scores = np.where(mask, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    return np.where(mask, weights / weights.sum(axis=-1, keepdims=True), 0.0)


INPUTS = np.random.default_rng(0).normal(size=(2, 5, 6)).astype("float32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])


def test_structured_self_attention_is_lin_et_al_s_formula_with_its_penalty():
    attention = StructuredSelfAttention(hops=3, units=4, penalty=0.5)
    embedding, weights = (_np(x) for x in attention(INPUTS, mask=MASK, training=True))
    scores = (np.tanh(INPUTS @ _np(attention.w_s1)) @ _np(attention.w_s2)).transpose(0, 2, 1)
    expected = _softmax(scores, MASK[:, None, :])
    np.testing.assert_allclose(weights, expected, **tolerance(rtol=1e-5, atol=1e-6))
    np.testing.assert_allclose(embedding, (expected @ INPUTS).reshape(2, 18), **tolerance(rtol=1e-5, atol=1e-6))
    overlap = expected @ expected.transpose(0, 2, 1) - np.eye(3)
    (loss,) = attention.losses
    np.testing.assert_allclose(_np(loss), 0.5 * (overlap**2).sum(axis=(1, 2)).mean(), rtol=1e-5)
    assert (weights[1, :, 3:] == 0).all()
    attention(INPUTS, mask=MASK)
    assert attention.losses == []  # the penalty is a training loss only


@pytest.mark.slow
@pytest.mark.core
def test_structured_self_attention_s_contract():
    run_layer_test(
        StructuredSelfAttention,
        {"hops": 2, "units": 3, "penalty": 0.0},
        {"inputs": INPUTS},
        expected_output_shapes=((2, 12), (2, 2, 5)),
        expected_num_trainable_weights=2,
        expected_num_non_trainable_weights=0,
        expected_num_params=6 * 3 + 3 * 2,
        expected_weight_paths=["w_s1", "w_s2"],
    )
    for bad in ({"hops": 0}, {"units": True}, {"penalty": -1.0}):
        with pytest.raises(ValueError, match="Expected"):
            StructuredSelfAttention(**bad)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"hops": 0}, r"Expected a positive integer\. Received: hops=0"),
        ({"hops": 2.0}, r"Expected a positive integer\. Received: hops=2\.0"),
        ({"units": True}, r"Expected a positive integer\. Received: units=True"),
        ({"penalty": -1.0}, r"Expected a number >= 0\. Received: penalty=-1\.0"),
        ({"penalty": True}, r"Expected a number >= 0\. Received: penalty=True"),
        ({"penalty": "1"}, r"Expected a number >= 0\. Received: penalty='1'"),
        ({"penalty": float("nan")}, r"Expected a number >= 0\. Received: penalty=nan"),
    ],
)
def test_structured_self_attention_s_bad_arguments_are_named_in_their_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        StructuredSelfAttention(**kwargs)


def test_structured_self_attention_takes_a_numpy_number_as_its_penalty():
    layer = StructuredSelfAttention(penalty=np.float32(0.5))
    assert layer.penalty == 0.5 and type(layer.penalty) is float


def test_structured_self_attention_s_config_round_trips_and_its_initializer_reaches_both_weights():
    attention = StructuredSelfAttention(hops=2, units=3, penalty=0.5, kernel_initializer="ones")
    config = attention.get_config()
    assert (config["hops"], config["units"], config["penalty"]) == (2, 3, 0.5)
    assert config["kernel_initializer"]["class_name"] == "Ones"
    clone = StructuredSelfAttention.from_config(config)
    assert clone.get_config() == config
    for layer in (attention, clone):
        layer(INPUTS)
        assert (_np(layer.w_s1) == 1.0).all() and (_np(layer.w_s2) == 1.0).all()


def test_structured_self_attention_takes_the_keras_mask_without_a_warning():
    import warnings

    embedded = keras.layers.Embedding(10, 6, mask_zero=True)
    ids = np.array([[3, 4, 0], [5, 0, 0]])
    attention = StructuredSelfAttention(hops=2, units=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Keras warns when a layer without mask support drops a mask
        embedding, weights = attention(embedded(ids))
    expected_embedding, expected_weights = attention(embedded(ids), mask=ids != 0)
    np.testing.assert_allclose(_np(weights), _np(expected_weights), rtol=1e-6)
    np.testing.assert_allclose(_np(embedding), _np(expected_embedding), rtol=1e-6)
    assert (_np(weights)[0, :, 2] == 0).all() and (_np(weights)[1, :, 1:] == 0).all()


def test_structured_self_attention_scores_in_the_policy_s_compute_dtype():
    # Under mixed_float16 the scores are float16 products: 2048 + 1 is 2048 there, so the two
    # states get equal weights (in float32 they would get 0.27 and 0.73).
    attention = StructuredSelfAttention(hops=1, units=2, dtype="mixed_float16")
    inputs = np.array([[[1.0, 0.0], [1.0, 1.0]]], "float32")
    attention(inputs)
    attention.w_s1.assign(100 * np.eye(2, dtype="float32"))  # tanh -> (1, 0) and (1, 1)
    attention.w_s2.assign(np.array([[2048.0], [1.0]], "float32"))  # scores 2048 and 2049
    embedding, weights = attention(inputs)
    assert keras.backend.standardize_dtype(weights.dtype) == "float16"
    np.testing.assert_array_equal(_np(weights), [[[0.5, 0.5]]])
    np.testing.assert_array_equal(_np(embedding), [[1.0, 0.5]])


def test_structured_self_attention_s_penalty_under_a_float16_floatx(float16_floatx):
    attention = StructuredSelfAttention(hops=3, units=4, penalty=0.5)
    _, weights = attention(INPUTS, mask=MASK, training=True)
    weights = _np(weights).astype("float64")
    overlap = weights @ weights.transpose(0, 2, 1) - np.eye(3)
    (loss,) = attention.losses
    assert keras.backend.standardize_dtype(loss.dtype) == "float32"  # the penalty is computed in float32
    np.testing.assert_allclose(float(_np(loss)), 0.5 * (overlap**2).sum(axis=(1, 2)).mean(), rtol=1e-5)
