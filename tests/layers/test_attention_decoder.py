"""`AttentionDecoder`: with attention, against NumPy and the Keras cells; without it; and as published.

The decoder without attention (`attention="none"`): the plain encoder-decoder attention is measured against.

The decoders as published: Bahdanau et al.'s RNNsearch and Show, Attend and Tell, against NumPy.
"""

import keras
import numpy as np
import pytest

from seqtasks.layers import AttentionDecoder, StackedRNN
from seqtasks.models import Seq2Seq
from tests.support.attention_reference import (
    bahdanau_scores,
    decoder_cells,
    decoder_reference,
    linear_deep_output,
    luong_scores,
    maxout_deep_output,
    plain_decoder_reference,
    published_decoder_reference,
    random_initial_state,
)
from tests.support.decoder_search import check_beam_one_is_greedy_and_wider_no_worse
from tests.support.layer_test_utils import run_layer_test
from tests.support.numerics import tolerance

pytestmark = pytest.mark.backends


RNG = np.random.default_rng(3)
TARGET = RNG.normal(size=(3, 4, 5)).astype("float32")
MEMORY = RNG.normal(size=(3, 7, 12)).astype("float32")
MEMORY_MASK = np.arange(7)[None, :] < np.array([7, 5, 2])[:, None]

CONFIGS = [
    {"units": 12, "num_layers": 2, "attention": "luong", "score": "dot"},
    {"units": 10, "cell_type": "gru", "attention": "bahdanau", "normalize": True},
    {"units": 10, "num_layers": 2, "attention": "luong", "score": "concat", "output_size": 6},
    {"units": 10, "input_feeding": False, "attention": "bahdanau", "num_layers": 2},
    {"units": 10, "input_feeding": False, "cell_type": "gru", "score": "general", "scale": True},
    {"units": 10, "attention": "bahdanau", "gate": True},
    {"units": 10, "input_feeding": False, "attention": "bahdanau", "gate": True},
    {"units": 10, "input_feeding": False, "cell_type": "gru", "combine": "residual"},
    {"units": 10, "num_layers": 2, "combine": "residual"},
]


def _step_by_step(decoder, target, memory, memory_mask, initial_state=None):
    cache = decoder.prepare_memory(memory, memory_mask)
    state = decoder.get_initial_state(target.shape[0], initial_state)
    outputs, weights = [], []
    for t in range(target.shape[1]):
        output, state, step_weights = decoder.step(target[:, t], state, cache)
        outputs.append(np.array(output))
        weights.append(np.array(step_weights))
    return np.stack(outputs, 1), np.stack(weights, 1)


@pytest.mark.parametrize("config", CONFIGS)
def test_teacher_forcing_equals_step_by_step(config):
    decoder = AttentionDecoder(**config)
    outputs, weights = decoder(TARGET, MEMORY, memory_mask=MEMORY_MASK, return_attention=True)
    step_outputs, step_weights = _step_by_step(decoder, TARGET, MEMORY, MEMORY_MASK)
    np.testing.assert_allclose(np.array(outputs), step_outputs, **tolerance(atol=1e-5))
    np.testing.assert_allclose(np.array(weights), step_weights, **tolerance(atol=1e-5))
    assert outputs.shape == (3, 4, config.get("output_size", config["units"]))


@pytest.mark.parametrize("config", CONFIGS[:2])
def test_attention_weights_sum_to_one_and_are_zero_on_padding(config):
    _, weights = AttentionDecoder(**config)(
        TARGET, MEMORY, memory_mask=MEMORY_MASK, return_attention=True
    )
    weights = np.array(weights)
    assert weights.shape == (3, 4, 7)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)
    assert np.all(weights[1, :, 5:] == 0.0)
    assert np.all(weights[2, :, 2:] == 0.0)


def test_input_feeding_feeds_the_previous_attentional_vector():
    decoder = AttentionDecoder(units=8, attention="luong", score="general")
    decoder(TARGET, MEMORY)
    cache = decoder.prepare_memory(MEMORY)
    state = decoder.get_initial_state(3)
    output, state, _ = decoder.step(TARGET[:, 0], state, cache)
    np.testing.assert_array_equal(np.array(state[-1]), np.array(output))
    # The first layer reads the embedding and the fed vector.
    assert decoder.rnn_layers[0].cell.kernel.shape[0] == 5 + 8


def test_initial_state_from_an_encoder_is_used():
    encoder = StackedRNN(units=10, num_layers=2)
    memory, states = encoder(MEMORY, mask=MEMORY_MASK)
    decoder = AttentionDecoder(units=10, num_layers=2, score="dot")
    with_state = np.array(decoder(TARGET, memory, initial_state=states, memory_mask=MEMORY_MASK))
    without = np.array(decoder(TARGET, memory, memory_mask=MEMORY_MASK))
    assert not np.allclose(with_state, without)
    stepped, _ = _step_by_step(decoder, TARGET, memory, MEMORY_MASK, states)
    np.testing.assert_allclose(with_state, stepped, **tolerance(atol=1e-5))


def test_outputs_at_padded_target_steps_are_zero_and_mask_propagates():
    target_ids = np.array([[1, 4, 5, 0], [1, 3, 0, 0], [1, 2, 3, 4]])
    embedded = keras.layers.Embedding(10, 5, mask_zero=True)(target_ids)
    outputs = AttentionDecoder(units=8)(embedded, MEMORY)
    assert np.all(np.array(outputs)[0, 3] == 0.0)
    assert np.all(np.array(outputs)[1, 2:] == 0.0)
    np.testing.assert_array_equal(np.array(outputs._keras_mask), target_ids != 0)


@pytest.mark.parametrize("config", [CONFIGS[0], CONFIGS[3], CONFIGS[4]])
def test_a_target_mask_zeroes_outputs_and_the_recurrence_runs_through_padded_steps(config):
    # The fused path (no input feeding) and the scan (input feeding) compute what `step` computes, step by
    # step, whatever the mask: a masked step (even one between real steps) only has its output zeroed.
    inputs_mask = np.array([[True, True, True, False], [True, False, True, True], [True, True, False, False]])
    decoder = AttentionDecoder(**config)
    outputs, weights = decoder(
        TARGET, MEMORY, inputs_mask=inputs_mask, memory_mask=MEMORY_MASK, return_attention=True
    )
    step_outputs, step_weights = _step_by_step(decoder, TARGET, MEMORY, MEMORY_MASK)
    np.testing.assert_allclose(np.array(outputs), step_outputs * inputs_mask[..., None], **tolerance(atol=1e-5))
    np.testing.assert_allclose(np.array(weights), step_weights, **tolerance(atol=1e-5))


@pytest.mark.parametrize("input_feeding", [True, False])
def test_dropout_only_when_training(input_feeding):
    decoder = AttentionDecoder(units=8, num_layers=2, dropout=0.5, input_feeding=input_feeding)
    first = np.array(decoder(TARGET, MEMORY, training=False))
    np.testing.assert_array_equal(first, np.array(decoder(TARGET, MEMORY, training=False)))
    assert not np.allclose(first, np.array(decoder(TARGET, MEMORY, training=True)))


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.parametrize("input_feeding", [True, False])
def test_fit_with_dropout_on_sequences_of_unknown_length(input_feeding):
    target = keras.Input((None, 5))
    memory = keras.Input((None, 12))
    outputs = AttentionDecoder(units=8, num_layers=2, dropout=0.3, input_feeding=input_feeding)(target, memory)
    model = keras.Model([target, memory], outputs)
    model.compile(optimizer="sgd", loss="mse")
    history = model.fit([TARGET, MEMORY], np.zeros((3, 4, 8)), epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))


def test_wrong_initial_state_is_a_clear_error():
    decoder = AttentionDecoder(units=8, num_layers=2)
    decoder(TARGET, MEMORY)
    with pytest.raises(ValueError, match="Expected an initial state for each of the 2 layers"):
        decoder.get_initial_state(3, [[np.zeros((3, 8)), np.zeros((3, 8))]])
    with pytest.raises(ValueError, match="Expected 2 state tensors per lstm layer"):
        decoder.get_initial_state(3, [[np.zeros((3, 8))], [np.zeros((3, 8))]])


def test_stepping_an_unbuilt_decoder_is_a_clear_error():
    with pytest.raises(ValueError) as error:
        AttentionDecoder(units=8).get_initial_state(2)
    assert str(error.value) == (
        "AttentionDecoder is not built: call it once on a target batch and the memory (or call `build`) before stepping."
    )


@pytest.mark.parametrize(
    "kwargs, expected_units",
    [
        ({"attention": "bahdanau"}, 4),
        ({"attention": "luong", "score": "concat"}, 4),
        ({"attention": "luong", "score": "general"}, None),
    ],
)
def test_attention_units_reach_the_attention_layer(kwargs, expected_units):
    decoder = AttentionDecoder(units=6, attention_units=4, **kwargs)
    decoder(TARGET, MEMORY)
    assert decoder.attention_units == 4 and decoder.get_config()["attention_units"] == 4
    assert decoder.attention_layer.units == expected_units


def test_luong_scale_and_kernel_initializer_reach_the_attention_layer():
    decoder = AttentionDecoder(units=6, score="general", scale=True, kernel_initializer="ones", seed=7)
    decoder(TARGET, MEMORY)
    assert (decoder.scale, decoder.seed) == (True, 7)
    assert decoder.get_config()["scale"] is True and decoder.get_config()["seed"] == 7
    attention = decoder.attention_layer
    assert attention.scale is True and float(attention.attention_g) == pytest.approx(6**-0.5)
    assert np.all(np.array(attention.key_dense.kernel) == 1.0)


def test_the_memory_mask_prepared_for_stepping_is_boolean():
    decoder = AttentionDecoder(units=6)
    decoder(TARGET, MEMORY)
    for mask in (None, MEMORY_MASK.astype("float32")):
        _, _, prepared = decoder.prepare_memory(MEMORY, mask)
        assert keras.backend.standardize_dtype(prepared.dtype) == "bool"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"units": 8, "cell_type": "rnn"}, "Received: cell_type='rnn'"),
        ({"units": 8, "attention": "dot"}, "Received: attention='dot'"),
        ({"units": 8, "score": "dott"}, "Received: score='dott'"),
        ({"units": 8, "output_size": -1}, "Received: output_size=-1"),
        ({"units": 8, "combine": "add"}, "Received: combine='add'"),
        (
            {"units": 8, "combine": "linear", "deep_output": "maxout", "placement": "before"},
            r"^deep_output='maxout' replaces the combination of state and context\. Received: combine='linear'$",
        ),
        ({"units": 8, "combine": "residual", "output_size": 6}, "output_size must be units \\(8\\). Received: output_size=6"),
        ({"units": True}, "Expected a positive integer. Received: units=True"),
        ({"units": 8, "attention_units": True}, "Received: attention_units=True"),
        ({"units": 8, "output_size": 6.0}, "Received: output_size=6.0"),
        ({"units": 8, "num_layers": 0}, "Received: num_layers=0"),
        ({"units": 8, "dropout": True}, r"Expected a rate in \[0, 1\). Received: dropout=True"),
        ({"units": 8, "dropout": 1}, r"Expected a rate in \[0, 1\). Received: dropout=1"),
        (
            {"units": 8, "attention": "dot"},
            r"Expected one of \{'bahdanau', 'luong', 'none'\}. Received: attention='dot'",
        ),
        (
            {"units": 8, "attention": "none", "gate": True},
            r"^gate=True scales an attention context; attention='none' has none\. Received: gate=True$",
        ),
        (
            {"units": 8, "attention": "none", "placement": "before"},
            r"^placement says where attention sits in a step; attention='none' has none \(summary_input feeds a "
            r"fixed context instead\)\. Received: placement='before'$",
        ),
    ],
)
def test_invalid_arguments_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AttentionDecoder(**kwargs)


def test_gate_scales_the_context_by_a_sigmoid_of_the_query():
    decoder = AttentionDecoder(units=6, attention="bahdanau", gate=True, input_feeding=False)
    decoder(TARGET, MEMORY)
    cache = decoder.prepare_memory(MEMORY)
    state = decoder.get_initial_state(3)
    gate = decoder.gate_dense
    w_c = np.array(decoder.output_dense.kernel)
    # β = σ(0·h + ln(1/3)) = 1/4 everywhere, then β = σ(1e4) = 1: the ungated context.
    for bias, beta in ((np.log(1 / 3), 0.25), (1e4, 1.0)):
        gate.kernel.assign(np.zeros((6, 1), "float32"))
        gate.bias.assign(np.array([bias], "float32"))
        output, new_state, weights = decoder.step(TARGET[:, 0], state, cache)
        h = np.array(new_state[0])
        context = np.einsum("bt,btd->bd", np.array(weights), MEMORY)
        expected = np.tanh(np.concatenate([h, beta * context], -1) @ w_c)
        np.testing.assert_allclose(np.array(output), expected, **tolerance(atol=1e-5))


def test_the_linear_combine_is_the_tanh_one_without_the_tanh():
    # combine="linear" is tfa.seq2seq's AttentionWrapper attention layer: W_c [h; c], no activation.
    decoder = AttentionDecoder(units=6, attention="luong", combine="linear", output_size=5)
    decoder(TARGET, MEMORY)
    decoder.output_dense.kernel.assign(RNG.normal(scale=3.0, size=(6 + MEMORY.shape[-1], 5)).astype("float32"))
    cache = decoder.prepare_memory(MEMORY)
    state = decoder.get_initial_state(3)
    output, new_state, weights = decoder.step(TARGET[:, 0], state, cache)
    context = np.einsum("bt,btd->bd", np.array(weights), MEMORY)
    expected = np.concatenate([np.array(new_state[0]), context], -1) @ np.array(decoder.output_dense.kernel)
    assert np.abs(expected).max() > 1.5  # beyond tanh's range, so a tanh would show
    np.testing.assert_allclose(np.array(output), expected, **tolerance(atol=1e-5))
    # It is fed back as the next step's input, as the attentional vector is.
    np.testing.assert_allclose(np.array(new_state[-1]), expected, **tolerance(atol=1e-5))


def _lstm_params(input_dim, units):
    # kernel (input_dim, 4u), recurrent kernel (u, 4u), bias (4u,)
    return input_dim * 4 * units + units * 4 * units + 4 * units


# Target features 5, memory features 12. Weights: 3 per LSTM layer; Bahdanau
# W_q, W_k, v; Luong `general` W; the gate's kernel and bias; W_c (no bias);
# LayerNorm gamma and beta.
CONTRACT_CASES = [
    # Input feeding: the first layer reads 5 + 12 features; W_c reads [h; c].
    (CONFIGS[0], 3 + 3 + 1, _lstm_params(5 + 12, 12) + _lstm_params(12, 12) + (12 + 12) * 12),
    (
        CONFIGS[3],
        3 + 3 + 3 + 1,
        _lstm_params(5, 10) + _lstm_params(10, 10) + (10 * 10 + 12 * 10 + 10) + (10 + 12) * 10,
    ),
    (CONFIGS[6], 3 + 3 + 2 + 1, _lstm_params(5, 10) + (10 * 10 + 12 * 10 + 10) + (10 + 1) + (10 + 12) * 10),
    # Residual combine: W_c projects the context only, then LayerNorm.
    (
        CONFIGS[8],
        3 + 3 + 1 + 1 + 2,
        _lstm_params(5 + 10, 10) + _lstm_params(10, 10) + 12 * 10 + 12 * 10 + 2 * 10,
    ),
]


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.parametrize("config, num_weights, num_params", CONTRACT_CASES)
def test_layer_contract(config, num_weights, num_params, tmp_path):
    initial_state = [[RNG.normal(size=(3, config["units"])).astype("float32")] * 2] * config.get(
        "num_layers", 1
    )
    run_layer_test(
        AttentionDecoder,
        config,
        {
            "inputs": TARGET,
            "memory": MEMORY,
            "initial_state": initial_state,
            "memory_mask": MEMORY_MASK,
        },
        call_kwargs={"return_attention": True},
        tmp_path=tmp_path,
        expected_output_shapes=((3, 4, config["units"]), (3, 4, 7)),
        expected_num_trainable_weights=num_weights,
        expected_num_non_trainable_weights=0,
        expected_num_params=num_params,
    )


@pytest.mark.parametrize("input_feeding", [True, False])
def test_symbolic_outputs_match_the_eager_ones(input_feeding):
    decoder = AttentionDecoder(units=8, output_size=6, input_feeding=input_feeding, dtype="mixed_float16")
    outputs, weights = decoder(TARGET, MEMORY, memory_mask=MEMORY_MASK, return_attention=True)
    target = keras.Input((None, 5))
    memory = keras.Input((7, 12))
    symbolic_outputs, symbolic_weights = decoder(target, memory, return_attention=True)
    assert symbolic_outputs.shape == (None, None, 6) and symbolic_weights.shape == (None, None, 7)
    assert symbolic_outputs.dtype == keras.backend.standardize_dtype(outputs.dtype)
    assert symbolic_weights.dtype == keras.backend.standardize_dtype(weights.dtype) == decoder.compute_dtype
    alone = decoder(target, memory)
    assert not isinstance(alone, (tuple, list)) and alone.shape == (None, None, 6)


def test_default_initializers_are_those_of_the_keras_layers():
    config = AttentionDecoder(units=8).get_config()
    assert config["kernel_initializer"]["class_name"] == "GlorotUniform"
    assert config["recurrent_initializer"]["class_name"] == "Orthogonal"
    assert config["bias_initializer"]["class_name"] == "Zeros"


def test_initializers_reach_every_sublayer():
    decoder = AttentionDecoder(
        units=6,
        num_layers=2,
        attention="bahdanau",
        gate=True,
        kernel_initializer="ones",
        recurrent_initializer="zeros",
        bias_initializer=keras.initializers.Constant(0.5),
    )
    decoder(TARGET, MEMORY)
    for rnn in decoder.rnn_layers:
        assert np.all(np.array(rnn.cell.kernel) == 1.0)
        assert np.all(np.array(rnn.cell.recurrent_kernel) == 0.0)
        # Keras' LSTM starts the forget gate bias at 1 whatever the initializer.
        np.testing.assert_array_equal(np.array(rnn.cell.bias), np.repeat([0.5, 1.0, 0.5, 0.5], 6))
    attention = decoder.attention_layer
    for weight in (attention.query_dense.kernel, attention.key_dense.kernel, attention.attention_v):
        assert np.all(np.array(weight) == 1.0)
    assert np.all(np.array(decoder.gate_dense.kernel) == 1.0) and np.all(np.array(decoder.gate_dense.bias) == 0.5)
    assert np.all(np.array(decoder.output_dense.kernel) == 1.0)
    restored = AttentionDecoder.from_config(decoder.get_config())
    assert restored.get_config() == decoder.get_config()
    assert restored.bias_initializer.value == 0.5


def test_sublayers_get_their_own_initializers():
    initializer = keras.initializers.GlorotUniform()
    decoder = AttentionDecoder(units=8, num_layers=3, input_feeding=False, kernel_initializer=initializer)
    decoder(TARGET, MEMORY)
    assert decoder.kernel_initializer is initializer
    cells = [rnn.cell for rnn in decoder.rnn_layers]
    assert len({id(cell.kernel_initializer) for cell in cells} | {id(initializer)}) == 4
    assert not np.allclose(np.array(cells[1].kernel), np.array(cells[2].kernel))
    assert not np.allclose(np.array(cells[1].recurrent_kernel), np.array(cells[2].recurrent_kernel))


def test_residual_combine_is_the_normalised_sum_of_state_and_projected_context():
    decoder = AttentionDecoder(units=10, input_feeding=False, cell_type="gru", combine="residual")
    outputs, weights = decoder(TARGET, MEMORY, memory_mask=MEMORY_MASK, return_attention=True)
    states, *_ = decoder.rnn_layers[0](TARGET)
    context = np.einsum("btm,bmd->btd", np.array(weights), MEMORY)
    summed = np.array(states) + context @ np.array(decoder.output_dense.kernel)
    mean, variance = summed.mean(-1, keepdims=True), summed.var(-1, keepdims=True)
    expected = (summed - mean) / np.sqrt(variance + decoder.output_norm.epsilon)  # LayerNorm starts at gamma 1, beta 0
    np.testing.assert_allclose(np.array(outputs), expected, **tolerance(atol=1e-4))


def _reference_parts(decoder):
    """The decoder's own weights, read from its sublayers, for `decoder_reference`."""
    cells = [
        (decoder.cell_type, np.array(rnn.cell.kernel), np.array(rnn.cell.recurrent_kernel), np.array(rnn.cell.bias))
        for rnn in decoder.rnn_layers
    ]
    attention = decoder.attention_layer
    if decoder.attention == "bahdanau":
        w_q, w_k, v = (np.array(w) for w in (attention.query_dense.kernel, attention.key_dense.kernel, attention.attention_v))
        g = b = None
        if decoder.normalize:
            g, b = np.array(attention.attention_g), np.array(attention.attention_b)

        def score_fn(query, memory):
            return bahdanau_scores(query, memory, w_q, w_k, v, g=g, b=b)

    else:
        assert decoder.score == "general"
        w = np.array(attention.key_dense.kernel)

        def score_fn(query, memory):
            return luong_scores(query, memory, "general", w=w)

    return cells, score_fn, np.array(decoder.output_dense.kernel)


REFERENCE_CONFIGS = [
    {"units": 6, "num_layers": 2, "attention": "luong", "score": "general"},
    {"units": 6, "cell_type": "gru", "attention": "bahdanau", "normalize": True},
    {"units": 6, "num_layers": 2, "attention": "bahdanau", "input_feeding": False},
    {"units": 6, "cell_type": "gru", "attention": "luong", "score": "general", "input_feeding": False},
]


@pytest.mark.parametrize("config", REFERENCE_CONFIGS)
def test_teacher_forcing_matches_a_numpy_decoder(config):
    # An independent reference: a NumPy LSTM/GRU, attention and W_c with the
    # layer's weights. With input feeding, step t reads [x_t; h̃_{t-1}], so a
    # decoder feeding zeros (or h_{t-1}, or the context) fails from step 1 on.
    target, memory = TARGET[:, :3], MEMORY
    decoder = AttentionDecoder(**config)
    decoder.build(target.shape, memory.shape)
    if config.get("normalize"):
        decoder.attention_layer.attention_g.assign(1.3)
        decoder.attention_layer.attention_b.assign(RNG.normal(size=6).astype("float32"))
    outputs, weights = decoder(target, memory, memory_mask=MEMORY_MASK, return_attention=True)
    cells, score_fn, w_c = _reference_parts(decoder)
    input_feeding = config.get("input_feeding", True)
    expected, expected_weights = decoder_reference(
        target, memory, cells, score_fn, w_c, input_feeding=input_feeding, memory_mask=MEMORY_MASK
    )
    np.testing.assert_allclose(np.array(weights), expected_weights, **tolerance(atol=1e-5))
    np.testing.assert_allclose(np.array(outputs), expected, **tolerance(atol=1e-5))
    if input_feeding:
        # The check has teeth: feeding zeros instead of h̃_{t-1} changes steps 1 and 2.
        zeros = np.zeros((3, 3, w_c.shape[1]), "float32")
        unfed, _ = decoder_reference(
            np.concatenate([target, zeros], -1),
            memory,
            cells,
            score_fn,
            w_c,
            input_feeding=False,
            memory_mask=MEMORY_MASK,
        )
        np.testing.assert_allclose(unfed[:, 0], expected[:, 0], atol=1e-6)
        assert np.abs(unfed[:, 1:] - expected[:, 1:]).max() > 1e-3


@pytest.mark.parametrize("input_feeding", [False, True])
@pytest.mark.parametrize("cell_type", ["lstm", "gru"])
def test_initial_state_is_the_state_the_first_step_starts_from(cell_type, input_feeding):
    target, memory = TARGET[:, :3], MEMORY
    decoder = AttentionDecoder(units=6, num_layers=2, cell_type=cell_type, input_feeding=input_feeding)
    per_layer = 2 if cell_type == "lstm" else 1
    initial_state = [
        [RNG.normal(size=(3, 6)).astype("float32") for _ in range(per_layer)] for _ in range(2)
    ]
    with_state = np.array(decoder(target, memory, initial_state=initial_state, memory_mask=MEMORY_MASK))
    zero_state = np.array(decoder(target, memory, memory_mask=MEMORY_MASK))
    assert np.abs(with_state - zero_state).max() > 1e-3
    cells, score_fn, w_c = _reference_parts(decoder)
    expected, _ = decoder_reference(
        target, memory, cells, score_fn, w_c, initial_state, input_feeding=input_feeding, memory_mask=MEMORY_MASK
    )
    np.testing.assert_allclose(with_state, expected, **tolerance(atol=1e-5))
    expected_zero, _ = decoder_reference(
        target, memory, cells, score_fn, w_c, input_feeding=input_feeding, memory_mask=MEMORY_MASK
    )
    np.testing.assert_allclose(zero_state, expected_zero, **tolerance(atol=1e-5))


def _one_step(decoder, batch_size, training, memory=MEMORY):
    cache = decoder.prepare_memory(memory)
    state = decoder.get_initial_state(batch_size)
    output, new_state, _ = decoder.step(TARGET[:batch_size, 0], state, cache, training=training)
    return np.array(output), [np.array(s) for s in new_state]


def test_step_applies_dropout_to_the_attentional_vector_when_training():
    rate = 0.5
    decoder = AttentionDecoder(units=8, dropout=rate, seed=1)
    decoder(TARGET, MEMORY)
    inference, inference_state = _one_step(decoder, 3, training=False)
    np.testing.assert_array_equal(inference, _one_step(decoder, 3, training=False)[0])
    np.testing.assert_array_equal(inference, _one_step(decoder, 3, training=None)[0])
    default, _, _ = decoder.step(TARGET[:, 0], decoder.get_initial_state(3), decoder.prepare_memory(MEMORY))
    np.testing.assert_array_equal(inference, np.array(default))  # inference unless told otherwise
    training, training_state = _one_step(decoder, 3, training=True)
    # One layer: the only dropout site is h̃, so each entry is dropped or scaled by 1 / (1 - rate).
    dropped = training == 0.0
    assert dropped.any() and not dropped.all()
    np.testing.assert_allclose(training[~dropped], inference[~dropped] / (1.0 - rate), rtol=1e-5)
    # The recurrent state is untouched; the fed vector is the dropped-out h̃, as in `call`.
    for state, expected in zip(training_state[:-1], inference_state[:-1]):
        np.testing.assert_allclose(state, expected, atol=1e-6)
    np.testing.assert_array_equal(training_state[-1], training)
    np.testing.assert_array_equal(inference_state[-1], inference)


def test_step_dropout_drops_about_the_rate_with_fresh_masks():
    memory = np.repeat(MEMORY[:1], 64, axis=0)
    target = np.repeat(TARGET[:1], 64, axis=0)
    decoder = AttentionDecoder(units=8, dropout=0.25, seed=3)
    decoder(target, memory)
    cache = decoder.prepare_memory(memory)
    state = decoder.get_initial_state(64)
    first, _, _ = decoder.step(target[:, 0], state, cache, training=True)
    second, _, _ = decoder.step(target[:, 0], state, cache, training=True)
    first, second = np.array(first), np.array(second)
    assert 0.15 < np.mean(first == 0.0) < 0.35
    assert not np.array_equal(first == 0.0, second == 0.0)


@pytest.mark.parametrize("input_feeding", [True, False])
def test_step_dropout_between_layers_when_training(input_feeding):
    decoder = AttentionDecoder(units=8, num_layers=2, dropout=0.5, seed=2, input_feeding=input_feeding)
    decoder(TARGET, MEMORY)
    inference, inference_state = _one_step(decoder, 3, training=False)
    training, training_state = _one_step(decoder, 3, training=True)
    assert np.abs(training - inference).max() > 1e-3
    # The first layer reads no dropout; the second reads the dropped-out first layer.
    np.testing.assert_allclose(training_state[0], inference_state[0], atol=1e-6)
    assert np.abs(training_state[2] - inference_state[2]).max() > 1e-3


@pytest.mark.parametrize("cell_type, per_layer", [("lstm", 2), ("gru", 1)])
def test_unflatten_state_splits_layer_by_layer_then_h_before_c(cell_type, per_layer):
    decoder = AttentionDecoder(units=2, num_layers=3, cell_type=cell_type)
    assert decoder.flat_state_size == 2 * per_layer * 3
    vector = np.arange(2 * decoder.flat_state_size, dtype="float32").reshape(2, -1)
    states = decoder.unflatten_state(vector)
    assert [len(layer) for layer in states] == [per_layer] * 3
    for layer_index, layer in enumerate(states):
        for state_index, state in enumerate(layer):
            start = 2 * (layer_index * per_layer + state_index)
            np.testing.assert_array_equal(np.array(state), vector[:, start : start + 2])


def _sequence_outputs(decoder, training):
    return np.array(decoder(TARGET, MEMORY, training=training))


def test_without_input_feeding_dropout_falls_on_the_attentional_vectors_only_when_training():
    rate = 0.5
    decoder = AttentionDecoder(units=8, dropout=rate, seed=5, input_feeding=False)
    inference = _sequence_outputs(decoder, False)
    np.testing.assert_array_equal(_sequence_outputs(decoder, None), inference)
    training = _sequence_outputs(decoder, True)
    # One layer: its inputs are not dropped, so each h̃ entry is dropped or scaled by 1 / (1 - rate).
    dropped = training == 0.0
    assert 0.3 < dropped.mean() < 0.7
    np.testing.assert_allclose(training[~dropped], inference[~dropped] / (1.0 - rate), rtol=1e-5)


def test_without_input_feeding_dropout_between_layers_when_training():
    rate = 0.5
    decoder = AttentionDecoder(units=8, num_layers=2, dropout=rate, seed=6, input_feeding=False)
    inference = _sequence_outputs(decoder, False)
    training = _sequence_outputs(decoder, True)
    kept = training != 0.0
    # The second layer read a dropped-out first layer, so kept entries are not just rescaled.
    assert np.abs(training[kept] - inference[kept] / (1.0 - rate)).max() > 1e-3


@pytest.mark.parametrize("input_feeding", [True, False])
def test_seeded_dropout_is_reproducible(input_feeding):
    decoders = [
        AttentionDecoder(units=8, num_layers=2, dropout=0.5, seed=7, input_feeding=input_feeding) for _ in range(2)
    ]
    for decoder in decoders:
        decoder(TARGET, MEMORY)
    decoders[1].set_weights(decoders[0].get_weights())
    outputs = [_sequence_outputs(decoder, True) for decoder in decoders]
    np.testing.assert_array_equal(outputs[0], outputs[1])


_LSTM = ["lstm_cell/kernel", "lstm_cell/recurrent_kernel", "lstm_cell/bias"]


@pytest.mark.parametrize(
    "config, paths",
    [
        (
            CONFIGS[2],
            [f"lstm_{i}/{w}" for i in range(2) for w in _LSTM]
            + ["attention/attention_v", "attention/query_dense/kernel", "attention/key_dense/kernel"]
            + ["attentional_dense/kernel"],
        ),
        (
            CONFIGS[5],
            [f"lstm_0/{w}" for w in _LSTM]
            + ["attention/attention_v", "attention/query_dense/kernel", "attention/key_dense/kernel"]
            + ["context_gate/kernel", "context_gate/bias", "attentional_dense/kernel"],
        ),
        (
            CONFIGS[8],
            [f"lstm_{i}/{w}" for i in range(2) for w in _LSTM]
            + ["attention/key_dense/kernel", "attentional_dense/kernel", "attentional_norm/gamma", "attentional_norm/beta"],
        ),
        (
            # Bahdanau et al.'s maxout deep output: one projection of [s_t; x_t; c_t], with its bias.
            {"units": 6, "cell_type": "gru", "attention": "bahdanau", "placement": "before", "deep_output": "maxout"},
            ["gru_0/gru_cell/kernel", "gru_0/gru_cell/recurrent_kernel", "gru_0/gru_cell/bias"]
            + ["attention/attention_v", "attention/query_dense/kernel", "attention/key_dense/kernel"]
            + ["deep_output/kernel", "deep_output/bias"],
        ),
        (
            # Xu et al.'s linear deep output: L_h reads the state, L_z the context.
            {"units": 6, "placement": "before", "deep_output": "linear"},
            [f"lstm_0/{w}" for w in _LSTM] + ["attention/key_dense/kernel", "deep_state/kernel", "deep_context/kernel"],
        ),
    ],
)
def test_weights_are_named_for_checkpoints(config, paths):
    decoder = AttentionDecoder(**config)
    decoder(TARGET, MEMORY)
    assert [w.path.split("/", 1)[1] for w in decoder.weights] == paths


@pytest.mark.parametrize("input_feeding", [True, False])
def test_dropout_in_a_three_layer_decoder_with_its_own_output_size(input_feeding):
    # One dropout mask per site: below layers 2 and 3 (units wide) and on h̃ (output_size wide).
    decoder = AttentionDecoder(units=8, num_layers=3, output_size=6, dropout=0.5, seed=4, input_feeding=input_feeding)
    outputs = _sequence_outputs(decoder, True)
    assert outputs.shape == (3, 4, 6) and np.isfinite(outputs).all()
    assert 0.3 < np.mean(outputs == 0.0) < 0.7


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("input_feeding", [True, False])
def test_dropout_keeps_the_compute_dtype_of_a_mixed_policy(policy, input_feeding):
    decoder = AttentionDecoder(units=8, num_layers=2, dropout=0.5, seed=1, input_feeding=input_feeding, dtype=policy)
    outputs = decoder(TARGET, MEMORY, training=True)
    assert keras.backend.standardize_dtype(outputs.dtype) == keras.DTypePolicy(policy).compute_dtype


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_a_target_mask_keeps_the_compute_dtype_of_a_mixed_policy(policy):
    decoder = AttentionDecoder(units=8, dtype=policy)
    inputs_mask = np.arange(4)[None, :] < np.array([4, 2, 1])[:, None]
    outputs = decoder(TARGET, MEMORY, inputs_mask=inputs_mask)
    assert keras.backend.standardize_dtype(outputs.dtype) == keras.DTypePolicy(policy).compute_dtype
    assert np.all(np.array(outputs, "float32")[~inputs_mask] == 0.0)


@pytest.mark.parametrize(
    "config",
    [
        {"units": 12, "num_layers": 2, "attention": "luong", "score": "dot"},  # input feeding
        {"units": 10, "placement": "before", "attention": "bahdanau", "gate": True, "deep_output": "linear"},
    ],
)
def test_a_scan_s_gradients_are_those_of_the_keras_cells(config, monkeypatch):
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the LSTM products read transposed kernels under TensorFlow only")
    import tensorflow as tf

    decoder = AttentionDecoder(**config)
    decoder(TARGET, MEMORY, memory_mask=MEMORY_MASK)
    target, memory = tf.constant(TARGET), tf.constant(MEMORY)

    def gradients():
        with tf.GradientTape() as tape:
            tape.watch([target, memory])
            outputs = decoder(target, memory, memory_mask=MEMORY_MASK)
            loss = tf.reduce_sum(outputs * outputs)
        return [g.numpy() for g in tape.gradient(loss, [target, memory, *decoder.trainable_variables])]

    assert decoder._transposed_kernels() is not None
    fast = gradients()
    monkeypatch.setattr(decoder, "_transposed_kernels", lambda: None)  # the Keras cells themselves
    for got, expected in zip(fast, gradients(), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_only_lstm_layers_under_tensorflow_read_their_kernels_transposed():
    lstm = AttentionDecoder(units=6, num_layers=2, attention="luong", score="general")
    lstm(TARGET, MEMORY)
    gru = AttentionDecoder(units=6, cell_type="gru", attention="luong", score="general")
    gru(TARGET, MEMORY)
    assert gru._transposed_kernels() is None
    kernels = lstm._transposed_kernels()
    if keras.backend.backend() != "tensorflow":
        assert kernels is None
        return
    assert len(kernels) == 2
    for layer, (kernel, kernel_t, recurrent, recurrent_t) in zip(lstm.rnn_layers, kernels, strict=True):
        np.testing.assert_array_equal(np.asarray(kernel), np.asarray(layer.cell.kernel))
        np.testing.assert_array_equal(np.asarray(kernel_t), np.asarray(layer.cell.kernel).T)
        np.testing.assert_array_equal(np.asarray(recurrent), np.asarray(layer.cell.recurrent_kernel))
        np.testing.assert_array_equal(np.asarray(recurrent_t), np.asarray(layer.cell.recurrent_kernel).T)


def test_a_scan_s_lstm_products_have_no_transposed_operand_forward_or_backward():
    # `_transposed_kernels`' contract: under TensorFlow the scan reads each LSTM kernel transposed
    # once, before the loop, so neither the step nor its gradient multiplies by a transposed operand
    # (oneDNN's slower product). The Keras cell's own gradient does: `upstream @ kernelᵀ` is a
    # MatMul with transpose_b, `xᵀ @ upstream` one with transpose_a. Without attention and with the
    # residual combine (a LayerNorm), every MatMul in the graph is an LSTM product.
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the LSTM products read transposed kernels under TensorFlow only")
    import tensorflow as tf

    decoder = AttentionDecoder(units=4, num_layers=2, attention="none", combine="residual")  # input feeding: a scan
    decoder(TARGET)

    @tf.function
    def gradients(target):
        with tf.GradientTape() as tape:
            tape.watch(target)
            loss = tf.reduce_sum(decoder(target) ** 2)
        return tape.gradient(loss, [target, *decoder.trainable_variables])

    graph = gradients.get_concrete_function(tf.TensorSpec((None, None, 5))).graph.as_graph_def()
    # The scan's step and its gradient are functions of the graph's library.
    nodes = [*graph.node, *(node for function in graph.library.function for node in function.node_def)]
    products = [node for node in nodes if node.op in ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")]
    # Forward: x @ W and h @ U per layer; backward: dx, dh, dW and dU per layer.
    assert len(products) >= 2 * 2 + 4 * 2
    flags = ("transpose_a", "transpose_b", "adj_x", "adj_y")
    transposed = [node.name for node in products if any(node.attr[flag].b for flag in flags)]
    assert transposed == []


@pytest.mark.parametrize("summary_input", [False, True])
def test_asking_a_symbolic_decoder_without_attention_for_its_weights_is_a_clear_error(summary_input):
    decoder = AttentionDecoder(units=8, attention="none", summary_input=summary_input)
    target = keras.Input((None, 5))
    memory = keras.Input((12,)) if summary_input else None
    with pytest.raises(
        ValueError,
        match="This decoder has no attention weights to return: it was built with attention='none'. "
        "Received: return_attention=True",
    ):
        decoder(target, memory, return_attention=True)


def test_linear_deep_output_without_attention_adds_the_projected_state_to_the_input():
    # Xu et al.'s t = x_t + L_h s_t + L_z c_t with no context: t = x_t + L_h s_t, and no L_z at all.
    decoder = AttentionDecoder(units=6, attention="none", deep_output="linear")
    outputs = np.array(decoder(TARGET))
    assert decoder.deep_context_dense is None
    assert [w.path.split("/", 1)[1] for w in decoder.weights] == [f"lstm_0/{w}" for w in _LSTM] + ["deep_state/kernel"]
    l_h = np.array(decoder.deep_state_dense.kernel)
    state = decoder.get_initial_state(3)
    for t in range(TARGET.shape[1]):
        output, state, weights = decoder.step(TARGET[:, t], state, decoder.prepare_memory(None))
        assert weights is None
        expected = TARGET[:, t] + np.array(state[0]) @ l_h  # state[0] is the new h_t
        np.testing.assert_allclose(np.array(output), expected, **tolerance(atol=1e-5))
        np.testing.assert_allclose(outputs[:, t], expected, **tolerance(atol=1e-5))


PLAIN_RNG = np.random.default_rng(5)
PLAIN_TARGET = PLAIN_RNG.normal(size=(3, 5, 6)).astype("float32")
SUMMARY = PLAIN_RNG.normal(size=(3, 10)).astype("float32")


def _initial_state(config):
    return random_initial_state(config, 3, PLAIN_RNG)



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
    decoder.build(PLAIN_TARGET.shape, None if summary is None else summary.shape)
    for weight in decoder.weights:  # zero biases would hide one read from the wrong place
        if "bias" in weight.path or "beta" in weight.path:
            weight.assign(PLAIN_RNG.normal(scale=0.5, size=weight.shape).astype("float32"))
    initial_state = _initial_state(config)
    outputs = np.array(decoder(PLAIN_TARGET, summary, initial_state=initial_state))
    expected = plain_decoder_reference(
        PLAIN_TARGET,
        decoder_cells(decoder),
        _output_fn(decoder),
        initial_state,
        summary,
        decoder.attentional_size if decoder.input_feeding else None,
    )
    np.testing.assert_allclose(outputs, expected, **tolerance(atol=1e-5))
    cache = decoder.prepare_memory(summary)
    state = decoder.get_initial_state(3, initial_state)
    for t in range(PLAIN_TARGET.shape[1]):
        output, state, weights = decoder.step(PLAIN_TARGET[:, t], state, cache)
        assert weights is None
        np.testing.assert_allclose(np.array(output), expected[:, t], **tolerance(atol=1e-5))


def test_the_summary_enters_every_step_and_the_output():
    decoder = AttentionDecoder(units=8, attention="none", summary_input=True, input_feeding=False)
    decoder.build(PLAIN_TARGET.shape, SUMMARY.shape)
    # The cell reads the embedding and the summary; the output reads the state and the summary.
    assert tuple(decoder.rnn_layers[0].cell.kernel.shape) == (6 + 10, 4 * 8)
    assert tuple(decoder.output_dense.kernel.shape) == (8 + 10, 8)
    outputs = np.array(decoder(PLAIN_TARGET, SUMMARY))
    assert np.abs(outputs - np.array(decoder(PLAIN_TARGET, SUMMARY * 2.0))).max() > 1e-3


def test_without_a_summary_no_memory_is_read_and_nothing_is_attended():
    decoder = AttentionDecoder(units=8, attention="none")
    outputs = decoder(PLAIN_TARGET)
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
def test_plain_decoder_invalid_arguments_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AttentionDecoder(units=8, **kwargs)


def test_asking_for_weights_or_forgetting_the_summary_are_clear_errors():
    with pytest.raises(ValueError, match="no attention weights to return: it was built with attention='none'"):
        AttentionDecoder(units=8, attention="none")(PLAIN_TARGET, return_attention=True)
    with pytest.raises(ValueError, match="summary_input=True, the summary. Received: memory=None"):
        AttentionDecoder(units=8, attention="none", summary_input=True)(PLAIN_TARGET)


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
def test_plain_decoder_layer_contract(config, memory, weights, params, tmp_path):
    inputs = {"inputs": PLAIN_TARGET} if memory is None else {"inputs": PLAIN_TARGET, "memory": memory}
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
    check_beam_one_is_greedy_and_wider_no_worse(decoder, decoder.get_initial_state(3), decoder.prepare_memory(SUMMARY), PLAIN_RNG)


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


PUBLISHED_RNG = np.random.default_rng(11)
PUBLISHED_TARGET = PUBLISHED_RNG.normal(size=(3, 5, 6)).astype("float32")
PUBLISHED_MEMORY = PUBLISHED_RNG.normal(size=(3, 7, 12)).astype("float32")
PUBLISHED_MEMORY_MASK = np.arange(7)[None, :] < np.array([7, 4, 2])[:, None]


def _published_initial_state(config):
    return random_initial_state(config, 3, PUBLISHED_RNG)



def _score_fn(decoder):
    attention = decoder.attention_layer
    if decoder.attention == "bahdanau":
        w_q, w_k, v = (np.array(w) for w in (attention.query_dense.kernel, attention.key_dense.kernel, attention.attention_v))
        return lambda query, memory: bahdanau_scores(query, memory, w_q, w_k, v)
    w = np.array(attention.key_dense.kernel)
    return lambda query, memory: luong_scores(query, memory, "general", w=w)


def _published_output_fn(decoder):
    units, embedding = decoder.units, PUBLISHED_TARGET.shape[-1]
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
            weight.assign(PUBLISHED_RNG.normal(scale=0.5, size=weight.shape).astype("float32"))


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
    decoder.build(PUBLISHED_TARGET.shape, PUBLISHED_MEMORY.shape)
    _randomise_biases(decoder)
    initial_state = _published_initial_state(config)
    outputs, weights = decoder(
        PUBLISHED_TARGET, PUBLISHED_MEMORY, initial_state=initial_state, memory_mask=PUBLISHED_MEMORY_MASK, return_attention=True
    )
    gate = None
    if decoder.gate:
        gate = (np.array(decoder.gate_dense.kernel), np.array(decoder.gate_dense.bias))
    expected, expected_weights = published_decoder_reference(
        PUBLISHED_TARGET, PUBLISHED_MEMORY, decoder_cells(decoder), _score_fn(decoder), _published_output_fn(decoder), initial_state, PUBLISHED_MEMORY_MASK, gate
    )
    np.testing.assert_allclose(np.array(weights), expected_weights, **tolerance(atol=1e-5))
    np.testing.assert_allclose(np.array(outputs), expected, **tolerance(atol=1e-5))
    assert outputs.shape == (3, 5, decoder.attentional_size)


def test_the_query_is_the_previous_state_not_the_new_one():
    # Step 0 attends with the initial state itself: its weights need no cell step.
    decoder = AttentionDecoder(**RNNSEARCH)
    initial_state = _published_initial_state(RNNSEARCH)
    _, weights = decoder(PUBLISHED_TARGET, PUBLISHED_MEMORY, initial_state=initial_state, memory_mask=PUBLISHED_MEMORY_MASK, return_attention=True)
    first = decoder.attention_layer(initial_state[0][0], PUBLISHED_MEMORY, value_mask=PUBLISHED_MEMORY_MASK)[1]
    np.testing.assert_allclose(np.array(weights)[:, 0], np.array(first), **tolerance(atol=1e-6))
    # Luong's placement with the same weights attends with s_0 only after a step, so it differs.
    after = AttentionDecoder(**{**RNNSEARCH, "placement": "after"})
    after.build(PUBLISHED_TARGET.shape, PUBLISHED_MEMORY.shape)
    _, after_weights = after(PUBLISHED_TARGET, PUBLISHED_MEMORY, initial_state=initial_state, memory_mask=PUBLISHED_MEMORY_MASK, return_attention=True)
    assert np.abs(np.array(after_weights)[:, 0] - np.array(first)).max() > 1e-3


def test_the_context_enters_the_cell():
    decoder = AttentionDecoder(**SHOW_ATTEND_TELL)
    decoder.build(PUBLISHED_TARGET.shape, PUBLISHED_MEMORY.shape)
    # The first LSTM reads the embedding and then the context: 6 + 12 inputs.
    assert tuple(decoder.rnn_layers[0].cell.kernel.shape) == (6 + 12, 4 * 8)
    outputs = np.array(decoder(PUBLISHED_TARGET, PUBLISHED_MEMORY, memory_mask=PUBLISHED_MEMORY_MASK))
    other = np.array(decoder(PUBLISHED_TARGET, PUBLISHED_MEMORY * 2.0, memory_mask=PUBLISHED_MEMORY_MASK))
    assert np.abs(outputs - other).max() > 1e-3


def test_maxout_keeps_the_larger_unit_of_each_pair():
    decoder = AttentionDecoder(**RNNSEARCH)
    decoder.build(PUBLISHED_TARGET.shape, PUBLISHED_MEMORY.shape)
    kernel = np.zeros(decoder.output_dense.kernel.shape, "float32")
    decoder.output_dense.kernel.assign(kernel)
    decoder.output_dense.bias.assign(np.array([1, -1, 3, 0, 2, -2, 5, 0, 4, 1], "float32"))
    outputs = np.array(decoder(PUBLISHED_TARGET, PUBLISHED_MEMORY))
    np.testing.assert_allclose(outputs, np.broadcast_to([1, 5, 3, 4, 2], outputs.shape))


def test_linear_deep_output_defaults_to_the_embedding_size():
    decoder = AttentionDecoder(units=8, placement="before", deep_output="linear")
    outputs = decoder(PUBLISHED_TARGET, PUBLISHED_MEMORY)
    assert decoder.attentional_size == 6 and outputs.shape == (3, 5, 6)
    decoder.deep_state_dense.kernel.assign(np.zeros((8, 6), "float32"))
    decoder.deep_context_dense.kernel.assign(np.zeros((12, 6), "float32"))
    np.testing.assert_allclose(np.array(decoder(PUBLISHED_TARGET, PUBLISHED_MEMORY)), PUBLISHED_TARGET, atol=1e-6)


@pytest.mark.parametrize(
    "config",
    [
        RNNSEARCH,
        SHOW_ATTEND_TELL,
        {"units": 8, "attention": "luong", "placement": "after", "deep_output": "maxout", "input_feeding": False},
        {"units": 8, "attention": "luong", "placement": "after", "deep_output": "linear"},
    ],
)
def test_published_decoders_teacher_forcing_equals_step_by_step(config):
    decoder = AttentionDecoder(**config)
    initial_state = _published_initial_state(config)
    outputs, weights = decoder(
        PUBLISHED_TARGET, PUBLISHED_MEMORY, initial_state=initial_state, memory_mask=PUBLISHED_MEMORY_MASK, return_attention=True
    )
    cache = decoder.prepare_memory(PUBLISHED_MEMORY, PUBLISHED_MEMORY_MASK)
    state = decoder.get_initial_state(3, initial_state)
    for t in range(PUBLISHED_TARGET.shape[1]):
        output, state, step_weights = decoder.step(PUBLISHED_TARGET[:, t], state, cache)
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
def test_published_decoders_invalid_arguments_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AttentionDecoder(units=8, **kwargs)


def test_linear_deep_output_of_another_size_is_a_clear_error():
    decoder = AttentionDecoder(units=8, deep_output="linear", output_size=4)
    with pytest.raises(ValueError, match=r"input embedding \(size 6\).*output_size must be 6. Received: output_size=4"):
        decoder.build(PUBLISHED_TARGET.shape, PUBLISHED_MEMORY.shape)


def _published_lstm_params(input_dim, units):
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
            _published_lstm_params(6 + 12, 8) + (8 * 8 + 12 * 8 + 8) + (8 + 1) + 8 * 6 + 12 * 6,
        ),
    ],
)
def test_published_decoders_layer_contract(config, num_weights, num_params, tmp_path):
    run_layer_test(
        AttentionDecoder,
        config,
        {"inputs": PUBLISHED_TARGET, "memory": PUBLISHED_MEMORY, "initial_state": _published_initial_state(config), "memory_mask": PUBLISHED_MEMORY_MASK},
        call_kwargs={"return_attention": True},
        tmp_path=tmp_path,
        expected_output_shapes=((3, 5, 5 if config is RNNSEARCH else 6), (3, 5, 7)),
        expected_num_trainable_weights=num_weights,
        expected_num_non_trainable_weights=0,
        expected_num_params=num_params,
    )


def test_dropout_falls_on_the_deep_output_only_when_training():
    decoder = AttentionDecoder(**{**RNNSEARCH, "dropout": 0.5, "seed": 3})
    inference = np.array(decoder(PUBLISHED_TARGET, PUBLISHED_MEMORY))
    np.testing.assert_allclose(np.array(decoder(PUBLISHED_TARGET, PUBLISHED_MEMORY, training=False)), inference)
    trained = np.array(decoder(PUBLISHED_TARGET, PUBLISHED_MEMORY, training=True))
    dropped = trained == 0.0
    assert 0.3 < dropped.mean() < 0.7
    # The kept units are scaled by 1 / (1 - rate); the state feeding the next step carries no dropout
    # of its own, so step 0 (whose state is the initial one) keeps the inference values exactly.
    np.testing.assert_allclose(trained[:, 0][~dropped[:, 0]], 2.0 * inference[:, 0][~dropped[:, 0]], rtol=1e-5)


def test_greedy_and_beam_search_decode_with_the_published_decoder():
    decoder = AttentionDecoder(**RNNSEARCH)
    decoder.build((None, None, 6), PUBLISHED_MEMORY.shape)
    state = decoder.get_initial_state(3, _published_initial_state(RNNSEARCH))
    check_beam_one_is_greedy_and_wider_no_worse(decoder, state, decoder.prepare_memory(PUBLISHED_MEMORY, PUBLISHED_MEMORY_MASK), PUBLISHED_RNG)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("config", [RNNSEARCH, SHOW_ATTEND_TELL])
def test_mixed_precision_keeps_the_compute_dtype_and_the_float32_values(policy, config):
    decoder = AttentionDecoder(**config, dtype=policy)
    reference = AttentionDecoder(**config)
    outputs, weights = decoder(PUBLISHED_TARGET, PUBLISHED_MEMORY, memory_mask=PUBLISHED_MEMORY_MASK, return_attention=True, training=True)
    compute = policy.split("_")[1]
    assert keras.backend.standardize_dtype(outputs.dtype) == compute
    assert keras.backend.standardize_dtype(weights.dtype) == compute
    reference.build(PUBLISHED_TARGET.shape, PUBLISHED_MEMORY.shape)
    reference.set_weights(decoder.get_weights())
    np.testing.assert_allclose(
        np.array(keras.ops.cast(decoder(PUBLISHED_TARGET, PUBLISHED_MEMORY), "float32")), np.array(reference(PUBLISHED_TARGET, PUBLISHED_MEMORY)), atol=0.1
    )
