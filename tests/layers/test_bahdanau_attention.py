import keras
import numpy as np
import pytest

from seqtasks.layers import BahdanauAttention
from tests.support.attention_reference import bahdanau_scores, softmax
from tests.support.layer_test_utils import run_layer_test
from tests.support.numerics import tolerance

pytestmark = pytest.mark.backends

RNG = np.random.default_rng(0)
QUERY = RNG.normal(size=(2, 3, 4)).astype("float32")
VALUE = RNG.normal(size=(2, 5, 6)).astype("float32")
KEY = RNG.normal(size=(2, 5, 7)).astype("float32")
MASK = np.array([[True, True, True, False, False], [True] * 5])


@pytest.mark.parametrize("normalize", [False, True])
def test_matches_numpy_formula(normalize):
    layer = BahdanauAttention(units=8, normalize=normalize)
    context, weights = layer(QUERY, VALUE, key=KEY, value_mask=MASK)
    b = None
    g = None
    if normalize:
        # Non-trivial g and b so the test sees them.
        layer.attention_g.assign(0.7)
        layer.attention_b.assign(RNG.normal(size=8).astype("float32"))
        context, weights = layer(QUERY, VALUE, key=KEY, value_mask=MASK)
        g, b = np.array(layer.attention_g), np.array(layer.attention_b)
    scores = bahdanau_scores(
        QUERY,
        KEY,
        np.array(layer.query_dense.kernel),
        np.array(layer.key_dense.kernel),
        np.array(layer.attention_v),
        g=g,
        b=b,
    )
    expected = softmax(scores, MASK[:, None, :])
    np.testing.assert_allclose(np.array(weights), expected, **tolerance(atol=1e-5))
    np.testing.assert_allclose(np.array(context), expected @ VALUE, **tolerance(atol=1e-5))


def test_padding_gets_exactly_zero_weight_and_rows_sum_to_one():
    context, weights = BahdanauAttention(units=8)(QUERY, VALUE, value_mask=MASK)
    weights = np.array(weights)
    assert np.all(weights[0, :, 3:] == 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)


def test_fully_padded_memory_gives_zero_weights_and_context():
    mask = np.zeros((2, 5), bool)
    context, weights = BahdanauAttention(units=8)(QUERY, VALUE, value_mask=mask)
    assert np.all(np.array(weights) == 0.0)
    assert np.all(np.array(context) == 0.0)


def test_single_step_query_equals_first_row_of_many_steps():
    layer = BahdanauAttention(units=8)
    context, weights = layer(QUERY, VALUE, value_mask=MASK)
    step_context, step_weights = layer(QUERY[:, 0], VALUE, value_mask=MASK)
    assert step_weights.shape == (2, 5)
    np.testing.assert_allclose(np.array(step_weights), np.array(weights)[:, 0], **tolerance(atol=1e-6))
    np.testing.assert_allclose(np.array(step_context), np.array(context)[:, 0], **tolerance(atol=1e-6))


def test_mask_comes_from_keras_mask_of_value():
    import keras

    ids = np.array([[3, 4, 5, 0, 0], [1, 2, 3, 4, 5]])
    memory = keras.layers.Embedding(10, 6, mask_zero=True)(ids)
    _, weights = BahdanauAttention(units=4)(QUERY, memory)
    assert np.all(np.array(weights)[0, :, 3:] == 0.0)


def test_query_mask_zeroes_the_context_of_padded_queries():
    query_mask = np.array([[True, True, False], [True, True, True]])
    context, _ = BahdanauAttention(units=8)(QUERY, VALUE, query_mask=query_mask)
    assert np.all(np.array(context)[0, 2] == 0.0)
    assert np.any(np.array(context)[1, 2] != 0.0)


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.parametrize("single_step", [False, True])
def test_layer_contract(single_step, tmp_path):
    query, steps = (QUERY[:, 0], ()) if single_step else (QUERY, (3,))
    run_layer_test(
        BahdanauAttention,
        {"units": 8, "normalize": True},
        {"query": query, "value": VALUE, "value_mask": MASK},
        tmp_path=tmp_path,
        expected_output_shapes=((2, *steps, 6), (2, *steps, 5)),
        # W_q (4, 8), W_k (6, 8), v (8,), g (), b (8,).
        expected_num_trainable_weights=5,
        expected_num_non_trainable_weights=0,
        expected_num_params=4 * 8 + 6 * 8 + 8 + 1 + 8,
        expected_weight_paths=["attention_v", "attention_g", "attention_b", "query_dense/kernel", "key_dense/kernel"],
    )


def test_query_and_key_projections_are_initialised_independently():
    # A shared unseeded initializer would give W_q and W_k of one shape the same values.
    layer = BahdanauAttention(units=8, kernel_initializer=keras.initializers.GlorotUniform())
    layer(VALUE, VALUE)
    assert not np.allclose(np.array(layer.query_dense.kernel), np.array(layer.key_dense.kernel))
    assert layer.query_dense.kernel_initializer is not layer.key_dense.kernel_initializer


def test_functional_model_takes_the_masks_of_query_and_value():
    query_ids = keras.Input((None,), dtype="int32")
    memory_ids = keras.Input((None,), dtype="int32")
    query = keras.layers.Embedding(10, 4, mask_zero=True)(query_ids)
    memory = keras.layers.Embedding(10, 6, mask_zero=True)(memory_ids)
    context, weights = BahdanauAttention(units=8)(query, memory)
    assert context.shape == (None, None, 6) and weights.shape == (None, None, None)
    assert context._keras_mask is not None
    step_context, step_weights = BahdanauAttention(units=8)(keras.Input((4,)), memory)
    assert step_context.shape == (None, 6) and step_weights.shape == (None, None)
    model = keras.Model([query_ids, memory_ids], [context, weights])
    context, weights = model([np.array([[1, 2, 0]]), np.array([[3, 4, 5, 0, 0]])])
    assert np.all(np.array(weights)[0, :, 3:] == 0.0)
    assert np.all(np.array(context)[0, 2] == 0.0) and np.any(np.array(context)[0, 1] != 0.0)


@pytest.mark.parametrize("units", [0, -3, True, 2.0, None])
def test_invalid_units_is_a_clear_error(units):
    with pytest.raises(ValueError, match=f"Expected a positive integer. Received: units={units!r}"):
        BahdanauAttention(units=units)


@pytest.mark.parametrize("value, key", [(VALUE[:, 0], None), (VALUE, KEY[:, 0])])
def test_value_or_key_of_wrong_rank_is_a_clear_error(value, key):
    key_shape = (value if key is None else key).shape
    with pytest.raises(ValueError) as error:
        BahdanauAttention(units=4)(QUERY, value, key)
    assert str(error.value).endswith(
        "Expected `value` and `key` of shape (batch, Tv, dim). "
        f"Received: value.shape={value.shape}, key.shape={key_shape}"
    )


def test_query_of_wrong_rank_is_a_clear_error():
    with pytest.raises(ValueError) as error:
        BahdanauAttention(units=4)(QUERY[0, 0], VALUE)
    assert str(error.value).endswith(
        "Expected `query` of shape (batch, dim) or (batch, Tq, dim). Received: query.shape=(4,)"
    )


def test_without_a_mask_each_query_attends_over_its_own_row():
    layer = BahdanauAttention(units=4)
    context, weights = layer(QUERY, VALUE)
    kernels = [np.array(w) for w in (layer.query_dense.kernel, layer.key_dense.kernel, layer.attention_v)]
    expected = softmax(bahdanau_scores(QUERY, VALUE, *kernels))
    np.testing.assert_allclose(np.array(weights), expected, **tolerance(atol=1e-6))
    np.testing.assert_allclose(np.array(context), expected @ VALUE, **tolerance(atol=1e-5))


def test_a_single_query_of_a_batch_of_one_keeps_the_batch_axis():
    context, weights = BahdanauAttention(units=4)(QUERY[:1, 0], VALUE[:1])
    assert tuple(context.shape) == (1, 6) and tuple(weights.shape) == (1, 5)


def test_the_weights_are_computed_in_float32_under_a_float16_floatx(float16_floatx):
    from seqtasks.layers._attention_base import masked_softmax

    scores = np.array([[0.0, 1e-3, 2e-3]], "float32")
    weights = np.array(masked_softmax(scores, None))
    assert weights.dtype == np.float32
    np.testing.assert_allclose(weights, softmax(scores), rtol=1e-6)


@pytest.mark.parametrize("units", [4, 9])
def test_normalized_score_starts_with_g_sqrt_one_over_units_and_zero_bias(units):
    # Salimans & Kingma weight normalisation as in tfa's BahdanauAttention:
    # g is a learned scalar starting at sqrt(1 / units), b starts at zero.
    layer = BahdanauAttention(units=units, normalize=True)
    layer(QUERY, VALUE)
    g = np.array(layer.attention_g)
    assert g.shape == ()
    np.testing.assert_allclose(g, np.sqrt(1.0 / units), rtol=1e-6)
    assert np.all(np.array(layer.attention_b) == 0.0)
    # So the effective v = g v / ‖v‖ starts with norm sqrt(1 / units), whatever v is.
    v = np.array(layer.attention_v)
    assert np.linalg.norm(g * v / np.linalg.norm(v)) == pytest.approx((1.0 / units) ** 0.5, rel=1e-5)
    # ... and the layer scores with it (no assignment of g before calling).
    context, weights = layer(QUERY, VALUE, value_mask=MASK)
    scores = bahdanau_scores(
        QUERY,
        VALUE,
        np.array(layer.query_dense.kernel),
        np.array(layer.key_dense.kernel),
        v,
        g=np.sqrt(1.0 / units),
        b=np.zeros(units),
    )
    expected = softmax(scores, MASK[:, None, :])
    np.testing.assert_allclose(np.array(weights), expected, **tolerance(atol=1e-5))
    np.testing.assert_allclose(np.array(context), expected @ VALUE, **tolerance(atol=1e-5))


def test_unnormalized_score_has_no_g_or_b():
    layer = BahdanauAttention(units=4)
    layer(QUERY, VALUE)
    assert not hasattr(layer, "attention_g") and not hasattr(layer, "attention_b")
    assert [w.name for w in layer.weights].count("attention_v") == 1


def test_a_known_batch_size_is_kept_when_traced():
    context, weights = BahdanauAttention(4)(keras.Input((5,), batch_size=3), keras.Input((7, 6), batch_size=3))
    assert (tuple(context.shape), tuple(weights.shape)) == ((3, 6), (3, 7))


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_a_query_mask_keeps_the_compute_dtype(policy):
    rng = np.random.default_rng(4)
    query = rng.normal(size=(2, 3, 4)).astype("float32")
    value = rng.normal(size=(2, 5, 6)).astype("float32")
    query_mask = np.array([[True, True, False], [True, False, False]])
    context, weights = BahdanauAttention(4, dtype=policy)(query, value, query_mask=query_mask)
    assert keras.backend.standardize_dtype(context.dtype) == keras.DTypePolicy(policy).compute_dtype
    context = keras.ops.convert_to_numpy(keras.ops.cast(context, "float32"))
    assert (context[0, 2] == 0).all() and (context[1, 1:] == 0).all() and (context[0, :2] != 0).any()
