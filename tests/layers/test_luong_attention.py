import keras
import numpy as np
import pytest

from seqtasks.layers import LuongAttention
from tests.support.attention_reference import luong_scores, softmax
from tests.support.layer_test_utils import run_layer_test
from tests.support.numerics import tolerance

pytestmark = pytest.mark.backends

RNG = np.random.default_rng(1)
QUERY = RNG.normal(size=(2, 3, 6)).astype("float32")
VALUE = RNG.normal(size=(2, 5, 6)).astype("float32")
KEY = RNG.normal(size=(2, 5, 4)).astype("float32")
MASK = np.array([[True, True, False, False, False], [True] * 5])


def _check(layer, key, expected_scores):
    expected = softmax(expected_scores, MASK[:, None, :])
    context, weights = layer(QUERY, VALUE, key=key, value_mask=MASK)
    np.testing.assert_allclose(np.array(weights), expected, **tolerance(atol=1e-5))
    np.testing.assert_allclose(np.array(context), expected @ VALUE, **tolerance(atol=1e-5))


def test_dot_matches_numpy_formula():
    _check(LuongAttention(score="dot"), VALUE, luong_scores(QUERY, VALUE, "dot"))


def test_general_matches_numpy_formula():
    layer = LuongAttention(score="general")
    layer(QUERY, VALUE, key=KEY)
    expected = luong_scores(QUERY, KEY, "general", w=np.array(layer.key_dense.kernel))
    _check(layer, KEY, expected)


def test_concat_matches_numpy_formula():
    layer = LuongAttention(score="concat", units=5)
    layer(QUERY, VALUE, key=KEY)
    expected = luong_scores(
        QUERY,
        KEY,
        "concat",
        w_q=np.array(layer.query_dense.kernel),
        w_k=np.array(layer.key_dense.kernel),
        v=np.array(layer.attention_v),
    )
    _check(layer, KEY, expected)


@pytest.mark.parametrize("score, initial", [("dot", 6**-0.5), ("general", 6**-0.5), ("concat", 1.0)])
def test_learned_scale_starts_as_a_scaled_dot_product(score, initial):
    layer = LuongAttention(score=score, units=4 if score == "concat" else None, scale=True)
    layer(QUERY, VALUE)  # queries of size 6
    np.testing.assert_allclose(float(layer.attention_g), initial, rtol=1e-6)


def test_learned_scale_multiplies_the_scores():
    layer = LuongAttention(score="dot", scale=True)
    layer(QUERY, VALUE)
    layer.attention_g.assign(2.5)
    _check(layer, VALUE, luong_scores(QUERY, VALUE, "dot", g=2.5))


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_padding_gets_exactly_zero_weight(score):
    layer = LuongAttention(score=score, units=4 if score == "concat" else None)
    _, weights = layer(QUERY[:, 0], VALUE, value_mask=MASK)
    weights = np.array(weights)
    assert weights.shape == (2, 5)
    assert np.all(weights[0, 2:] == 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)


# Queries and keys of size 6; every score has the scale g ().
@pytest.mark.slow
@pytest.mark.core
@pytest.mark.parametrize(
    "score, num_weights, num_params, paths",
    [
        ("dot", 1, 1, ["attention_g"]),
        ("general", 2, 6 * 6 + 1, ["attention_g", "key_dense/kernel"]),  # W (6, 6)
        # W_q (6, 4), W_k (6, 4), v (4,)
        ("concat", 4, 6 * 4 + 6 * 4 + 4 + 1, ["attention_v", "attention_g", "query_dense/kernel", "key_dense/kernel"]),
    ],
)
def test_layer_contract(score, num_weights, num_params, paths, tmp_path):
    run_layer_test(
        LuongAttention,
        {"score": score, "units": 4 if score == "concat" else None, "scale": True},
        {"query": QUERY, "value": VALUE, "value_mask": MASK},
        tmp_path=tmp_path,
        expected_output_shapes=((2, 3, 6), (2, 3, 5)),
        expected_num_trainable_weights=num_weights,
        expected_num_non_trainable_weights=0,
        expected_num_params=num_params,
        expected_weight_paths=paths,
    )


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_symbolic_single_step_query(score):
    context, weights = LuongAttention(score=score, units=4 if score == "concat" else None)(
        keras.Input((6,)), keras.Input((None, 6))
    )
    assert context.shape == (None, 6) and weights.shape == (None, None)


def test_concat_projections_are_initialised_independently():
    layer = LuongAttention(score="concat", units=6)
    layer(QUERY, VALUE)
    assert not np.allclose(np.array(layer.query_dense.kernel), np.array(layer.key_dense.kernel))


def test_unknown_score_is_a_clear_error():
    with pytest.raises(ValueError) as error:
        LuongAttention(score="x")
    assert str(error.value) == "Expected one of {'dot', 'general', 'concat'}. Received: score='x'"


def test_concat_without_units_is_a_clear_error():
    with pytest.raises(ValueError) as error:
        LuongAttention(score="concat")
    assert str(error.value) == "Expected a positive integer `units` for score='concat'. Received: units=None"


@pytest.mark.parametrize("score", ["concat", "dot"])
@pytest.mark.parametrize("units", [0, True, 4.0])
def test_invalid_units_is_a_clear_error(score, units):
    with pytest.raises(ValueError, match=f"Expected a positive integer. Received: units={units!r}"):
        LuongAttention(score=score, units=units)


def test_dot_with_mismatched_sizes_is_a_clear_error():
    with pytest.raises(ValueError, match="score='dot' needs queries and keys of the same size"):
        LuongAttention(score="dot")(QUERY, KEY)


def test_dot_is_the_default_and_needs_equal_sizes():
    layer = LuongAttention()
    assert layer.score == "dot"
    message = (
        r"^score='dot' needs queries and keys of the same size. Received: query dim=4, key dim=6; "
        r"use score='general' to learn a projection between them.$"
    )
    with pytest.raises(ValueError, match=message):
        layer(np.zeros((2, 4), "float32"), np.zeros((2, 5, 6), "float32"))


def test_the_initializer_reaches_the_concat_projections_and_v():
    layer = LuongAttention(score="concat", units=3, kernel_initializer="ones")
    layer(QUERY, VALUE)
    for weight in [layer.attention_v, layer.query_dense.kernel, layer.key_dense.kernel]:
        np.testing.assert_array_equal(np.array(weight), 1.0)
