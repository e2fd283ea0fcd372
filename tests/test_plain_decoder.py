"""The decoder without attention (`attention="none"`): the plain encoder-decoder attention is measured against."""

import numpy as np
import pytest
from attention_reference import decoder_cells, plain_decoder_reference, random_initial_state
from decoder_search import check_beam_one_is_greedy_and_wider_no_worse
from layer_test_utils import run_layer_test
from numerics import tolerance

from seqtasks.layers import AttentionDecoder
from seqtasks.models import Seq2Seq

pytestmark = pytest.mark.backends

RNG = np.random.default_rng(5)
TARGET = RNG.normal(size=(3, 5, 6)).astype("float32")
SUMMARY = RNG.normal(size=(3, 10)).astype("float32")


def _initial_state(config):
    return random_initial_state(config, 3, RNG)



def _output_fn(decoder):
    if decoder.deep_output == "maxout":
        kernel, bias = np.array(decoder.output_dense.kernel), np.array(decoder.output_dense.bias)

        def maxout(state, embedded, summary):
            pieces = [state, embedded] + ([] if summary is None else [summary])
            hidden = np.concatenate(pieces, -1) @ kernel + bias
            size = hidden.shape[-1] // 2
            return np.maximum(hidden[:, :size], hidden[:, size:])

        return maxout
    if decoder.combine == "residual":
        gamma, beta = np.array(decoder.output_norm.gamma), np.array(decoder.output_norm.beta)

        def residual(state, embedded, summary):
            mean, variance = state.mean(-1, keepdims=True), state.var(-1, keepdims=True)
            return (state - mean) / np.sqrt(variance + decoder.output_norm.epsilon) * gamma + beta

        return residual
    w_c = np.array(decoder.output_dense.kernel)
    return lambda state, embedded, summary: np.tanh(
        np.concatenate([state] + ([] if summary is None else [summary]), -1) @ w_c
    )


PLAIN = [
    {"units": 8, "attention": "none"},  # Sutskever et al. with Luong's input feeding
    {"units": 8, "attention": "none", "cell_type": "gru", "summary_input": True, "input_feeding": False},  # Cho et al.
    {"units": 8, "num_layers": 2, "attention": "none", "summary_input": True},
    {"units": 8, "attention": "none", "summary_input": True, "deep_output": "maxout", "output_size": 4},
    {"units": 8, "attention": "none", "combine": "residual", "input_feeding": False},
]


@pytest.mark.parametrize("config", PLAIN)
def test_teacher_forcing_and_each_step_match_the_equations_in_numpy(config):
    decoder = AttentionDecoder(**config)
    summary = SUMMARY if decoder.summary_input else None
    decoder.build(TARGET.shape, None if summary is None else summary.shape)
    for weight in decoder.weights:  # zero biases would hide one read from the wrong place
        if "bias" in weight.path or "beta" in weight.path:
            weight.assign(RNG.normal(scale=0.5, size=weight.shape).astype("float32"))
    initial_state = _initial_state(config)
    outputs = np.array(decoder(TARGET, summary, initial_state=initial_state))
    expected = plain_decoder_reference(
        TARGET,
        decoder_cells(decoder),
        _output_fn(decoder),
        initial_state,
        summary,
        decoder.attentional_size if decoder.input_feeding else None,
    )
    np.testing.assert_allclose(outputs, expected, **tolerance(atol=1e-5))
    cache = decoder.prepare_memory(summary)
    state = decoder.get_initial_state(3, initial_state)
    for t in range(TARGET.shape[1]):
        output, state, weights = decoder.step(TARGET[:, t], state, cache)
        assert weights is None
        np.testing.assert_allclose(np.array(output), expected[:, t], **tolerance(atol=1e-5))


def test_the_summary_enters_every_step_and_the_output():
    decoder = AttentionDecoder(units=8, attention="none", summary_input=True, input_feeding=False)
    decoder.build(TARGET.shape, SUMMARY.shape)
    # The cell reads the embedding and the summary; the output reads the state and the summary.
    assert tuple(decoder.rnn_layers[0].cell.kernel.shape) == (6 + 10, 4 * 8)
    assert tuple(decoder.output_dense.kernel.shape) == (8 + 10, 8)
    outputs = np.array(decoder(TARGET, SUMMARY))
    assert np.abs(outputs - np.array(decoder(TARGET, SUMMARY * 2.0))).max() > 1e-3


def test_without_a_summary_no_memory_is_read_and_nothing_is_attended():
    decoder = AttentionDecoder(units=8, attention="none")
    outputs = decoder(TARGET)
    assert outputs.shape == (3, 5, 8)
    assert decoder.attention_layer is None and decoder.prepare_memory(None) == ()
    assert tuple(decoder.output_dense.kernel.shape) == (8, 8)  # tanh(W_c h_t)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"attention": "none", "gate": True}, "attention='none' has none. Received: gate=True"),
        ({"attention": "none", "placement": "before"}, "attention='none' has none .* Received: placement='before'"),
        ({"attention": "luong", "summary_input": True}, "needs attention='none'. Received: attention='luong'"),
        ({"attention": "attend"}, r"Expected one of \{'bahdanau', 'luong', 'none'\}. Received: attention='attend'"),
    ],
)
def test_invalid_arguments_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AttentionDecoder(units=8, **kwargs)


def test_asking_for_weights_or_forgetting_the_summary_are_clear_errors():
    with pytest.raises(ValueError, match="no attention weights to return: it was built with attention='none'"):
        AttentionDecoder(units=8, attention="none")(TARGET, return_attention=True)
    with pytest.raises(ValueError, match="summary_input=True, the summary. Received: memory=None"):
        AttentionDecoder(units=8, attention="none", summary_input=True)(TARGET)


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.parametrize(
    "config, memory, weights, params",
    [
        # LSTM over [x; h̃]: (6 + 8) * 32 + 8 * 32 + 32; W_c 8 * 8.
        ({"units": 8, "attention": "none"}, None, 4, (6 + 8) * 32 + 8 * 32 + 32 + 64),
        # GRU over [x; c]: (6 + 10) * 24 + 8 * 24 + 48; W_c (8 + 10) * 8.
        ({"units": 8, "attention": "none", "cell_type": "gru", "summary_input": True, "input_feeding": False},
         SUMMARY, 4, 16 * 24 + 8 * 24 + 48 + 18 * 8),
    ],
)
def test_layer_contract(config, memory, weights, params, tmp_path):
    inputs = {"inputs": TARGET} if memory is None else {"inputs": TARGET, "memory": memory}
    run_layer_test(
        AttentionDecoder,
        config,
        inputs,
        tmp_path=tmp_path,
        expected_output_shapes=(3, 5, 8),
        expected_num_trainable_weights=weights,
        expected_num_non_trainable_weights=0,
        expected_num_params=params,
    )


def test_greedy_and_beam_search_decode_without_attention():
    decoder = AttentionDecoder(units=8, attention="none", summary_input=True)
    decoder.build((None, None, 6), SUMMARY.shape)
    check_beam_one_is_greedy_and_wider_no_worse(decoder, decoder.get_initial_state(3), decoder.prepare_memory(SUMMARY), RNG)


def _seq2seq(encoder, summary_input=True):
    model = Seq2Seq(
        12, 9, embedding_dim=6, encoder=encoder,
        decoder={"units": 8, "attention": "none", "summary_input": summary_input},
    )
    model.build()
    return model


@pytest.mark.parametrize("cell_type", ["lstm", "gru"])
def test_the_summary_is_the_encoder_s_final_state_both_directions(cell_type):
    model = _seq2seq({"units": 5, "num_layers": 2, "cell_type": cell_type, "bidirectional": True})
    source = np.array([[3, 4, 5, 6, 0, 0], [7, 8, 9, 10, 11, 3]], "int32")
    mask = source != 0
    outputs, states = model.encoder_layer(model.source_embedding(source), mask=mask)
    summary = np.array(model._summary(states))
    outputs = np.array(outputs)
    # Forward: the output at the last real step; backward: the output at the first step.
    np.testing.assert_allclose(summary[0, :5], outputs[0, 3, :5], atol=1e-6)
    np.testing.assert_allclose(summary[1, :5], outputs[1, 5, :5], atol=1e-6)
    np.testing.assert_allclose(summary[:, 5:], outputs[:, 0, 5:], atol=1e-6)
    cache, _ = model.encode(source)
    np.testing.assert_allclose(np.array(cache[0]), summary, atol=1e-6)


def test_a_model_without_attention_says_so_when_asked_for_its_weights():
    model = _seq2seq({"units": 5}, summary_input=False)
    source = np.array([[3, 4, 5]], "int32")
    logits = model((source, np.array([[1, 4]], "int32")))
    assert logits.shape == (1, 2, 9)
    with pytest.raises(ValueError, match="This model has no attention"):
        model.attention(source, np.array([[1, 4]], "int32"))
