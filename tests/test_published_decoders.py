"""The decoders as published: Bahdanau et al.'s RNNsearch and Show, Attend and Tell, against NumPy."""

import keras
import numpy as np
import pytest
from attention_reference import (
    bahdanau_scores,
    decoder_cells,
    linear_deep_output,
    luong_scores,
    maxout_deep_output,
    published_decoder_reference,
    random_initial_state,
)
from decoder_search import check_beam_one_is_greedy_and_wider_no_worse
from layer_test_utils import run_layer_test
from numerics import tolerance

from seqtasks.layers import AttentionDecoder

pytestmark = pytest.mark.backends

RNG = np.random.default_rng(11)
TARGET = RNG.normal(size=(3, 5, 6)).astype("float32")
MEMORY = RNG.normal(size=(3, 7, 12)).astype("float32")
MEMORY_MASK = np.arange(7)[None, :] < np.array([7, 4, 2])[:, None]


def _initial_state(config):
    return random_initial_state(config, 3, RNG)



def _score_fn(decoder):
    attention = decoder.attention_layer
    if decoder.attention == "bahdanau":
        w_q, w_k, v = (np.array(w) for w in (attention.query_dense.kernel, attention.key_dense.kernel, attention.attention_v))
        return lambda query, memory: bahdanau_scores(query, memory, w_q, w_k, v)
    w = np.array(attention.key_dense.kernel)
    return lambda query, memory: luong_scores(query, memory, "general", w=w)


def _output_fn(decoder):
    units, embedding = decoder.units, TARGET.shape[-1]
    if decoder.deep_output == "maxout":
        kernel = np.array(decoder.output_dense.kernel)
        # The layer reads [s_t; E y_{t-1}; c_t]: its kernel stacks U_o, V_o and C_o.
        u_o, v_o, c_o = kernel[:units], kernel[units : units + embedding], kernel[units + embedding :]
        return maxout_deep_output(u_o, v_o, c_o, np.array(decoder.output_dense.bias))
    if decoder.deep_output == "linear":
        return linear_deep_output(np.array(decoder.deep_state_dense.kernel), np.array(decoder.deep_context_dense.kernel))
    w_c = np.array(decoder.output_dense.kernel)
    return lambda state, embedded, context: np.tanh(np.concatenate([state, context], -1) @ w_c)


def _randomise_biases(decoder):
    # Zero biases would hide a bias read from the wrong place.
    for weight in decoder.weights:
        if "bias" in weight.path:
            weight.assign(RNG.normal(scale=0.5, size=weight.shape).astype("float32"))


RNNSEARCH = {"units": 8, "cell_type": "gru", "attention": "bahdanau", "placement": "before", "deep_output": "maxout", "output_size": 5}
SHOW_ATTEND_TELL = {"units": 8, "attention": "bahdanau", "placement": "before", "deep_output": "linear", "gate": True}
PUBLISHED = [
    RNNSEARCH,
    SHOW_ATTEND_TELL,
    {"units": 8, "num_layers": 2, "attention": "luong", "score": "general", "placement": "before"},
]


@pytest.mark.parametrize("config", PUBLISHED)
def test_teacher_forcing_matches_the_papers_equations_in_numpy(config):
    decoder = AttentionDecoder(**config)
    decoder.build(TARGET.shape, MEMORY.shape)
    _randomise_biases(decoder)
    initial_state = _initial_state(config)
    outputs, weights = decoder(
        TARGET, MEMORY, initial_state=initial_state, memory_mask=MEMORY_MASK, return_attention=True
    )
    gate = None
    if decoder.gate:
        gate = (np.array(decoder.gate_dense.kernel), np.array(decoder.gate_dense.bias))
    expected, expected_weights = published_decoder_reference(
        TARGET, MEMORY, decoder_cells(decoder), _score_fn(decoder), _output_fn(decoder), initial_state, MEMORY_MASK, gate
    )
    np.testing.assert_allclose(np.array(weights), expected_weights, **tolerance(atol=1e-5))
    np.testing.assert_allclose(np.array(outputs), expected, **tolerance(atol=1e-5))
    assert outputs.shape == (3, 5, decoder.attentional_size)


def test_the_query_is_the_previous_state_not_the_new_one():
    # Step 0 attends with the initial state itself: its weights need no cell step.
    decoder = AttentionDecoder(**RNNSEARCH)
    initial_state = _initial_state(RNNSEARCH)
    _, weights = decoder(TARGET, MEMORY, initial_state=initial_state, memory_mask=MEMORY_MASK, return_attention=True)
    first = decoder.attention_layer(initial_state[0][0], MEMORY, value_mask=MEMORY_MASK)[1]
    np.testing.assert_allclose(np.array(weights)[:, 0], np.array(first), **tolerance(atol=1e-6))
    # Luong's placement with the same weights attends with s_0 only after a step, so it differs.
    after = AttentionDecoder(**{**RNNSEARCH, "placement": "after"})
    after.build(TARGET.shape, MEMORY.shape)
    _, after_weights = after(TARGET, MEMORY, initial_state=initial_state, memory_mask=MEMORY_MASK, return_attention=True)
    assert np.abs(np.array(after_weights)[:, 0] - np.array(first)).max() > 1e-3


def test_the_context_enters_the_cell():
    decoder = AttentionDecoder(**SHOW_ATTEND_TELL)
    decoder.build(TARGET.shape, MEMORY.shape)
    # The first LSTM reads the embedding and then the context: 6 + 12 inputs.
    assert tuple(decoder.rnn_layers[0].cell.kernel.shape) == (6 + 12, 4 * 8)
    outputs = np.array(decoder(TARGET, MEMORY, memory_mask=MEMORY_MASK))
    other = np.array(decoder(TARGET, MEMORY * 2.0, memory_mask=MEMORY_MASK))
    assert np.abs(outputs - other).max() > 1e-3


def test_maxout_keeps_the_larger_unit_of_each_pair():
    decoder = AttentionDecoder(**RNNSEARCH)
    decoder.build(TARGET.shape, MEMORY.shape)
    kernel = np.zeros(decoder.output_dense.kernel.shape, "float32")
    decoder.output_dense.kernel.assign(kernel)
    decoder.output_dense.bias.assign(np.array([1, -1, 3, 0, 2, -2, 5, 0, 4, 1], "float32"))
    outputs = np.array(decoder(TARGET, MEMORY))
    np.testing.assert_allclose(outputs, np.broadcast_to([1, 5, 3, 4, 2], outputs.shape))


def test_linear_deep_output_defaults_to_the_embedding_size():
    decoder = AttentionDecoder(units=8, placement="before", deep_output="linear")
    outputs = decoder(TARGET, MEMORY)
    assert decoder.attentional_size == 6 and outputs.shape == (3, 5, 6)
    decoder.deep_state_dense.kernel.assign(np.zeros((8, 6), "float32"))
    decoder.deep_context_dense.kernel.assign(np.zeros((12, 6), "float32"))
    np.testing.assert_allclose(np.array(decoder(TARGET, MEMORY)), TARGET, atol=1e-6)


@pytest.mark.parametrize(
    "config",
    [
        RNNSEARCH,
        SHOW_ATTEND_TELL,
        {"units": 8, "attention": "luong", "placement": "after", "deep_output": "maxout", "input_feeding": False},
        {"units": 8, "attention": "luong", "placement": "after", "deep_output": "linear"},
    ],
)
def test_teacher_forcing_equals_step_by_step(config):
    decoder = AttentionDecoder(**config)
    initial_state = _initial_state(config)
    outputs, weights = decoder(
        TARGET, MEMORY, initial_state=initial_state, memory_mask=MEMORY_MASK, return_attention=True
    )
    cache = decoder.prepare_memory(MEMORY, MEMORY_MASK)
    state = decoder.get_initial_state(3, initial_state)
    for t in range(TARGET.shape[1]):
        output, state, step_weights = decoder.step(TARGET[:, t], state, cache)
        np.testing.assert_allclose(np.array(outputs)[:, t], np.array(output), **tolerance(atol=1e-5))
        np.testing.assert_allclose(np.array(weights)[:, t], np.array(step_weights), **tolerance(atol=1e-5))
        assert np.all(np.array(step_weights)[1, 4:] == 0.0)


def test_input_feeding_defaults_follow_the_placement():
    assert AttentionDecoder(units=4).input_feeding is True
    assert AttentionDecoder(units=4, placement="before").input_feeding is False
    assert AttentionDecoder(units=4, placement="after", input_feeding=False).input_feeding is False


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"placement": "middle"}, r"Expected one of \{'after', 'before'\}. Received: placement='middle'"),
        ({"deep_output": "relu"}, r"Expected one of \{None, 'maxout', 'linear'\}. Received: deep_output='relu'"),
        ({"placement": "before", "input_feeding": True}, "takes no input feeding. Received: input_feeding=True"),
        ({"deep_output": "maxout", "combine": "residual"}, "replaces the combination .* Received: combine='residual'"),
    ],
)
def test_invalid_arguments_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AttentionDecoder(units=8, **kwargs)


def test_linear_deep_output_of_another_size_is_a_clear_error():
    decoder = AttentionDecoder(units=8, deep_output="linear", output_size=4)
    with pytest.raises(ValueError, match=r"input embedding \(size 6\).*output_size must be 6. Received: output_size=4"):
        decoder.build(TARGET.shape, MEMORY.shape)


def _lstm_params(input_dim, units):
    return input_dim * 4 * units + units * 4 * units + 4 * units


def _gru_params(input_dim, units):
    return input_dim * 3 * units + units * 3 * units + 2 * 3 * units


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.parametrize(
    "config, num_weights, num_params",
    [
        # GRU reading [x; c] (3); Bahdanau W_q, W_k, v (3); maxout kernel and bias (2).
        (
            RNNSEARCH,
            8,
            _gru_params(6 + 12, 8) + (8 * 8 + 12 * 8 + 8) + (8 + 6 + 12) * 10 + 10,
        ),
        # LSTM reading [x; c] (3); Bahdanau (3); gate kernel and bias (2); L_h, L_z (2).
        (
            SHOW_ATTEND_TELL,
            10,
            _lstm_params(6 + 12, 8) + (8 * 8 + 12 * 8 + 8) + (8 + 1) + 8 * 6 + 12 * 6,
        ),
    ],
)
def test_layer_contract(config, num_weights, num_params, tmp_path):
    run_layer_test(
        AttentionDecoder,
        config,
        {"inputs": TARGET, "memory": MEMORY, "initial_state": _initial_state(config), "memory_mask": MEMORY_MASK},
        call_kwargs={"return_attention": True},
        tmp_path=tmp_path,
        expected_output_shapes=((3, 5, 5 if config is RNNSEARCH else 6), (3, 5, 7)),
        expected_num_trainable_weights=num_weights,
        expected_num_non_trainable_weights=0,
        expected_num_params=num_params,
    )


def test_dropout_falls_on_the_deep_output_only_when_training():
    decoder = AttentionDecoder(**{**RNNSEARCH, "dropout": 0.5, "seed": 3})
    inference = np.array(decoder(TARGET, MEMORY))
    np.testing.assert_allclose(np.array(decoder(TARGET, MEMORY, training=False)), inference)
    trained = np.array(decoder(TARGET, MEMORY, training=True))
    dropped = trained == 0.0
    assert 0.3 < dropped.mean() < 0.7
    # The kept units are scaled by 1 / (1 - rate); the state feeding the next step carries no dropout
    # of its own, so step 0 (whose state is the initial one) keeps the inference values exactly.
    np.testing.assert_allclose(trained[:, 0][~dropped[:, 0]], 2.0 * inference[:, 0][~dropped[:, 0]], rtol=1e-5)


def test_greedy_and_beam_search_decode_with_the_published_decoder():
    decoder = AttentionDecoder(**RNNSEARCH)
    decoder.build((None, None, 6), MEMORY.shape)
    state = decoder.get_initial_state(3, _initial_state(RNNSEARCH))
    check_beam_one_is_greedy_and_wider_no_worse(decoder, state, decoder.prepare_memory(MEMORY, MEMORY_MASK), RNG)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("config", [RNNSEARCH, SHOW_ATTEND_TELL])
def test_mixed_precision_keeps_the_compute_dtype_and_the_float32_values(policy, config):
    decoder = AttentionDecoder(**config, dtype=policy)
    reference = AttentionDecoder(**config)
    outputs, weights = decoder(TARGET, MEMORY, memory_mask=MEMORY_MASK, return_attention=True, training=True)
    compute = policy.split("_")[1]
    assert keras.backend.standardize_dtype(outputs.dtype) == compute
    assert keras.backend.standardize_dtype(weights.dtype) == compute
    reference.build(TARGET.shape, MEMORY.shape)
    reference.set_weights(decoder.get_weights())
    np.testing.assert_allclose(
        np.array(keras.ops.cast(decoder(TARGET, MEMORY), "float32")), np.array(reference(TARGET, MEMORY)), atol=0.1
    )
