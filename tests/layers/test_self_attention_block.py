"""`SelfAttentionBlock` against NumPy versions of its formulas."""

import keras
import numpy as np
import pytest

from seqtasks.layers import SelfAttentionBlock, StructuredSelfAttention
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


def _layer_norm(x, gamma, beta, epsilon=1e-3):
    mean, variance = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


INPUTS = np.random.default_rng(0).normal(size=(2, 5, 6)).astype("float32")
MASK = np.array([[True] * 5, [True, True, True, False, False]])


@pytest.mark.parametrize(
    "attention, score", [("luong", "dot"), ("luong", "general"), ("luong", "concat"), ("bahdanau", None)]
)
def test_every_state_attends_over_its_own_sequence_then_residual_and_layer_norm(attention, score):
    block = SelfAttentionBlock(attention, score=score or "general", units=4)
    outputs, weights = (_np(x) for x in block(INPUTS, mask=MASK))
    layer = block.attention_layer
    if attention == "bahdanau":
        q, k = INPUTS @ _np(layer.query_dense.kernel), INPUTS @ _np(layer.key_dense.kernel)
        scores = np.tanh(q[:, :, None, :] + k[:, None, :, :]) @ _np(layer.attention_v)
    elif score == "concat":  # v^T tanh(W_q s + W_k h), with `units` hidden units
        q, k = INPUTS @ _np(layer.query_dense.kernel), INPUTS @ _np(layer.key_dense.kernel)
        assert q.shape == (2, 5, 4)
        scores = np.tanh(q[:, :, None, :] + k[:, None, :, :]) @ _np(layer.attention_v)
    elif score == "dot":
        scores = INPUTS @ INPUTS.transpose(0, 2, 1)
    else:  # general: s^T W h, the keys projected once by W (dim_k, dim_q)
        scores = INPUTS @ (INPUTS @ _np(layer.key_dense.kernel)).transpose(0, 2, 1)
    expected_weights = _softmax(scores, MASK[:, None, :]) * MASK[:, :, None]
    context = (expected_weights @ INPUTS) * MASK[:, :, None]
    expected = _layer_norm(INPUTS + context, _np(block.norm.gamma), _np(block.norm.beta))
    np.testing.assert_allclose(weights, expected_weights, **tolerance(rtol=1e-5, atol=1e-6))
    np.testing.assert_allclose(outputs, expected, **tolerance(rtol=1e-4, atol=1e-5))
    np.testing.assert_allclose(weights[0].sum(-1), 1.0, rtol=1e-5)
    assert (weights[1, 3:] == 0).all() and (weights[1, :, 3:] == 0).all()


@pytest.mark.slow
@pytest.mark.core
def test_the_block_s_contract_and_its_mask():
    run_layer_test(
        SelfAttentionBlock,
        {"attention": "luong", "score": "general", "dropout": 0.1},
        {"inputs": INPUTS},
        expected_output_shapes=((2, 5, 6), (2, 5, 5)),
        expected_num_trainable_weights=3,  # W of the general score, then the layer norm's gamma and beta
        expected_num_non_trainable_weights=0,
        expected_num_params=6 * 6 + 6 + 6,
    )
    embedded = keras.layers.Embedding(10, 6, mask_zero=True)
    x = embedded(np.array([[3, 4, 0]]))
    outputs, _ = SelfAttentionBlock()(x)
    assert _np(outputs._keras_mask).tolist() == [[True, True, False]]
    with pytest.raises(ValueError, match=r"Expected one of \{.*\}. Received: attention='dot'"):
        SelfAttentionBlock("dot")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"attention": "dot"}, r"Expected one of \{'luong', 'bahdanau'\}\. Received: attention='dot'"),
        ({"units": 0}, r"Expected a positive integer\. Received: units=0"),
        ({"attention": "bahdanau", "units": True}, r"Expected a positive integer\. Received: units=True"),
        ({"dropout": 1.0}, r"Expected a rate in \[0, 1\)\. Received: dropout=1\.0"),
        ({"dropout": "0.1"}, r"Expected a rate in \[0, 1\)\. Received: dropout='0\.1'"),
    ],
)
def test_the_block_s_bad_arguments_are_named_in_their_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SelfAttentionBlock(**kwargs)



def test_the_defaults_are_a_general_luong_score_64_units_and_four_hops_with_a_unit_penalty():
    block = SelfAttentionBlock()
    outputs, _ = block(INPUTS)
    assert (block.attention, block.score, block.dropout) == ("luong", "general", 0.0)
    assert tuple(block.attention_layer.key_dense.kernel.shape) == (6, 6)  # general: W maps the keys to the queries
    bahdanau = SelfAttentionBlock("bahdanau")
    bahdanau(INPUTS)
    assert tuple(bahdanau.attention_layer.query_dense.kernel.shape) == (6, 64)
    assert tuple(bahdanau.attention_layer.attention_v.shape) == (64,)

    attention = StructuredSelfAttention()
    embedding, weights = (_np(x) for x in attention(INPUTS, training=True))
    assert embedding.shape == (2, 4 * 6) and weights.shape == (2, 4, 5)
    assert tuple(attention.w_s1.shape) == (6, 64) and tuple(attention.w_s2.shape) == (64, 4)
    overlap = weights @ weights.transpose(0, 2, 1) - np.eye(4)
    (loss,) = attention.losses
    np.testing.assert_allclose(_np(loss), 1.0 * (overlap**2).sum(axis=(1, 2)).mean(), rtol=1e-5)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"attention": "luong", "score": "concat", "units": 3, "dropout": 0.25},
        {"attention": "bahdanau", "units": 3, "dropout": 0.0},
    ],
)
def test_the_block_s_config_round_trips_and_its_initializer_reaches_every_projection(kwargs):
    block = SelfAttentionBlock(**kwargs, kernel_initializer="ones")
    config = block.get_config()
    assert {name: config[name] for name in kwargs} == kwargs
    assert config["kernel_initializer"]["class_name"] == "Ones"
    clone = SelfAttentionBlock.from_config(config)
    assert clone.get_config() == config
    for layer in (block, clone):
        layer(INPUTS)
        attention_weights = layer.attention_layer.weights
        assert len(attention_weights) == 3  # v, W_q and W_k of the additive score
        assert all((_np(w) == 1.0).all() for w in attention_weights), [w.path for w in attention_weights]
    # The block's attention is the package's own layer, configured as it would be alone.
    from seqtasks.layers.bahdanau_attention import BahdanauAttention
    from seqtasks.layers.luong_attention import LuongAttention

    if kwargs["attention"] == "luong":
        alone = LuongAttention("concat", units=3, kernel_initializer="ones", name="attention")
    else:
        alone = BahdanauAttention(3, kernel_initializer="ones", name="attention")
    assert block.attention_layer.get_config() == alone.get_config()


@pytest.mark.parametrize("score", ["dot", "general"])
def test_a_dot_or_general_block_s_attention_is_that_luong_layer_without_units(score):
    from seqtasks.layers.luong_attention import LuongAttention

    block = SelfAttentionBlock("luong", score=score, units=8)
    assert block.attention_layer.get_config() == LuongAttention(score, name="attention").get_config()


def test_the_block_s_sublayers_and_weight_paths_keep_their_names():
    # Checkpoints and saved models find the weights by these paths.
    for kwargs, paths in [
        ({"attention": "luong", "score": "general"}, ["attention/key_dense/kernel", "norm/gamma", "norm/beta"]),
        (
            {"attention": "bahdanau", "units": 3},
            [
                "attention/attention_v",
                "attention/query_dense/kernel",
                "attention/key_dense/kernel",
                "norm/gamma",
                "norm/beta",
            ],
        ),
    ]:
        block = SelfAttentionBlock(**kwargs, name="block")
        block(INPUTS)
        assert [w.path for w in block.weights] == [f"block/{path}" for path in paths]
        assert [block.attention_layer.name, block.dropout_layer.name, block.norm.name] == ["attention", "dropout", "norm"]


@pytest.mark.parametrize("attention", ["luong", "bahdanau"])
def test_a_mixed_precision_block_computes_in_float16_with_a_mask(attention):
    reference = SelfAttentionBlock(attention, units=4, dtype="float32")
    expected_outputs, expected_weights = (_np(x) for x in reference(INPUTS, mask=MASK))
    block = SelfAttentionBlock(attention, units=4, dtype="mixed_float16")
    block(INPUTS)
    block.set_weights(reference.get_weights())
    outputs, weights = block(INPUTS, mask=MASK)
    for sublayer in block._flatten_layers(include_self=False):
        assert sublayer.dtype_policy.name == "mixed_float16", sublayer.name
    assert keras.backend.standardize_dtype(outputs.dtype) == "float16"
    assert keras.backend.standardize_dtype(weights.dtype) == "float16"
    weights = _np(weights).astype("float32")
    np.testing.assert_allclose(weights, expected_weights, atol=2e-3)
    np.testing.assert_allclose(_np(outputs).astype("float32"), expected_outputs, atol=2e-2)
    assert (weights[1, 3:] == 0).all() and (weights[1, :, 3:] == 0).all()


def test_the_block_s_dropout_follows_the_training_argument_of_call():
    block = SelfAttentionBlock(dropout=0.5)
    expected, _ = block(INPUTS, training=False)
    assert not np.allclose(_np(block(INPUTS, training=True)[0]), _np(expected))
    # `call` hands `training` to its dropout itself: the same when called directly (outside `__call__`).
    np.testing.assert_allclose(_np(block.call(INPUTS, training=False)[0]), _np(expected), rtol=1e-6)
    assert not np.allclose(_np(block.call(INPUTS, training=True)[0]), _np(expected))
