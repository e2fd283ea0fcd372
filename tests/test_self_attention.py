"""`SelfAttentionBlock` and `StructuredSelfAttention` against NumPy versions of their formulas."""

import keras
import numpy as np
import pytest
from layer_test_utils import run_layer_test
from numerics import tolerance

from seqtasks.layers import SelfAttentionBlock, StructuredSelfAttention

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


@pytest.mark.parametrize("attention, score", [("luong", "dot"), ("luong", "general"), ("bahdanau", None)])
def test_every_state_attends_over_its_own_sequence_then_residual_and_layer_norm(attention, score):
    block = SelfAttentionBlock(attention, score=score or "general", units=4)
    outputs, weights = (_np(x) for x in block(INPUTS, mask=MASK))
    layer = block.attention_layer
    if attention == "bahdanau":
        q, k = INPUTS @ _np(layer.query_dense.kernel), INPUTS @ _np(layer.key_dense.kernel)
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


ENCODER = {"cell_type": "gru", "units": 4, "bidirectional": True}


def test_the_models_attention_maps_are_the_weights_they_pool_and_tag_with():
    from seqtasks.models import SequenceTagger
    from seqtasks.models.text_classifier import TextClassifier

    ids = np.array([[5, 6, 7, 8], [9, 4, 0, 0]], "int32")
    real = ids != 0
    classifier = TextClassifier(20, 2, embedding_dim=6, encoder=ENCODER, pooling="structured", hops=3, self_attention="luong")
    maps = {name: _np(value) for name, value in classifier.attention_maps(ids).items()}
    assert sorted(maps) == ["hops", "self_attention"]
    assert maps["hops"].shape == (2, 3, 4) and maps["self_attention"].shape == (2, 4, 4)
    np.testing.assert_allclose(maps["hops"].mean(axis=1), _np(classifier.text_vectors(ids)[1]), **tolerance(atol=1e-6))
    np.testing.assert_allclose(maps["self_attention"].sum(-1), real.astype("float32"), **tolerance(atol=1e-6))
    assert np.all(maps["self_attention"][1][:, 2:] == 0) and np.all(maps["hops"][1][:, 2:] == 0)
    pooled = TextClassifier(20, 2, embedding_dim=6, encoder=ENCODER, pooling="attention")
    (weights,) = pooled.attention_maps(ids).values()
    np.testing.assert_allclose(_np(weights)[:, 0], _np(pooled.text_vectors(ids)[1]), **tolerance(atol=1e-6))
    assert TextClassifier(20, 2, embedding_dim=6, encoder=ENCODER, pooling="max").attention_maps(ids) == {}

    tagger = SequenceTagger(20, 10, 3, word_embedding_dim=6, encoder=ENCODER, self_attention="bahdanau", output_layer="softmax")
    features = {"words": ids, "characters": np.ones((2, 4, 5), "int32"), "casing": np.zeros((2, 4), "int32")}
    (weights,) = tagger.attention_maps(features).values()
    np.testing.assert_allclose(_np(weights).sum(-1), real.astype("float32"), **tolerance(atol=1e-6))
    assert SequenceTagger(20, 10, 3, word_embedding_dim=6, encoder=ENCODER).attention_maps(features) == {}


def test_token_attention_is_drawn_per_text_with_its_tokens(tmp_path):
    from seqtasks.tasks.token_attention import HEATMAPS, draw_token_attention

    maps = {"self_attention": np.full((7, 3, 3), 1 / 3), "hops": np.full((7, 2, 3), 1 / 3)}
    tokens = [["a", "b", "c"], [], *[["x", "y"]] * 5]
    assert draw_token_attention(maps, tokens, tmp_path / "attention") == 2 * (HEATMAPS - 1)
    drawn = sorted(path.name for path in (tmp_path / "attention").iterdir())
    assert drawn == sorted(f"{name}_{i}.png" for name in maps for i in (0, 2, 3, 4))


def test_a_long_text_is_drawn_up_to_its_first_tokens(tmp_path, monkeypatch):
    from seqtasks.tasks import token_attention

    drawn = []
    monkeypatch.setattr(
        "seqtasks.evaluation.plots.save_attention_heatmap",
        lambda weights, tokens, rows, path, title, labels: drawn.append((np.shape(weights), len(tokens), len(rows), title)),
    )
    words = [f"w{i}" for i in range(token_attention.MAX_DRAWN_TOKENS + 5)]
    size = len(words)
    maps = {"self_attention": np.zeros((1, size, size)), "pooling": np.zeros((1, 1, size))}
    token_attention.draw_token_attention(maps, [words], tmp_path)
    cut = token_attention.MAX_DRAWN_TOKENS
    assert [entry[:3] for entry in drawn] == [((1, cut), cut, 1), ((cut, cut), cut, cut)]
    assert all(title.endswith(f"(its first {cut} of {size} tokens)") for *_, title in drawn)
