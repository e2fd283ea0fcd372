import keras
import numpy as np
import pytest
from layer_test_utils import run_layer_test

from seqtasks.layers import AttentionDecoder, StackedRNN

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
    np.testing.assert_allclose(np.array(outputs), step_outputs, atol=1e-5)
    np.testing.assert_allclose(np.array(weights), step_weights, atol=1e-5)
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
    np.testing.assert_allclose(with_state, stepped, atol=1e-5)


def test_outputs_at_padded_target_steps_are_zero_and_mask_propagates():
    target_ids = np.array([[1, 4, 5, 0], [1, 3, 0, 0], [1, 2, 3, 4]])
    embedded = keras.layers.Embedding(10, 5, mask_zero=True)(target_ids)
    outputs = AttentionDecoder(units=8)(embedded, MEMORY)
    assert np.all(np.array(outputs)[0, 3] == 0.0)
    assert np.all(np.array(outputs)[1, 2:] == 0.0)
    np.testing.assert_array_equal(np.array(outputs._keras_mask), target_ids != 0)


@pytest.mark.parametrize("input_feeding", [True, False])
def test_dropout_only_when_training(input_feeding):
    decoder = AttentionDecoder(units=8, num_layers=2, dropout=0.5, input_feeding=input_feeding)
    first = np.array(decoder(TARGET, MEMORY, training=False))
    np.testing.assert_array_equal(first, np.array(decoder(TARGET, MEMORY, training=False)))
    assert not np.allclose(first, np.array(decoder(TARGET, MEMORY, training=True)))


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
    with pytest.raises(ValueError, match="AttentionDecoder is not built"):
        AttentionDecoder(units=8).get_initial_state(2)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"units": 8, "cell_type": "rnn"}, "Received: cell_type='rnn'"),
        ({"units": 8, "attention": "dot"}, "Received: attention='dot'"),
        ({"units": 8, "score": "dott"}, "Received: score='dott'"),
        ({"units": 8, "output_size": -1}, "Received: output_size=-1"),
        ({"units": 8, "combine": "add"}, "Received: combine='add'"),
        ({"units": 8, "combine": "residual", "output_size": 6}, "output_size must be units \\(8\\). Received: output_size=6"),
        ({"units": True}, "Expected a positive integer. Received: units=True"),
        ({"units": 8, "attention_units": True}, "Received: attention_units=True"),
        ({"units": 8, "output_size": 6.0}, "Received: output_size=6.0"),
        ({"units": 8, "num_layers": 0}, "Received: num_layers=0"),
        ({"units": 8, "dropout": True}, r"Expected a rate in \[0, 1\). Received: dropout=True"),
        ({"units": 8, "dropout": 1}, r"Expected a rate in \[0, 1\). Received: dropout=1"),
        (
            {"units": 8, "attention": "dot"},
            r"Expected one of \{'bahdanau', 'luong'\}. Received: attention='dot'",
        ),
    ],
)
def test_invalid_arguments_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AttentionDecoder(**kwargs)


def test_gate_scales_the_context_by_a_sigmoid_of_the_query():
    decoder = AttentionDecoder(units=6, attention="bahdanau", gate=True, input_feeding=False)
    decoder(TARGET, MEMORY)
    gate = decoder.gate_dense
    gate.kernel.assign(np.zeros((6, 1), "float32"))
    gate.bias.assign(np.array([-1e4], "float32"))  # β = 0: the output sees no context
    cache = decoder.prepare_memory(MEMORY)
    state = decoder.get_initial_state(3)
    output, _, _ = decoder.step(TARGET[:, 0], state, cache)
    other_memory = decoder.prepare_memory(MEMORY * 3.0)
    other, _, _ = decoder.step(TARGET[:, 0], state, other_memory)
    np.testing.assert_allclose(np.array(output), np.array(other), atol=1e-6)
    gate.bias.assign(np.array([1e4], "float32"))  # β = 1: the ungated context
    plain = AttentionDecoder(units=6, attention="bahdanau", input_feeding=False)
    plain(TARGET, MEMORY)
    for name in ("attention_layer", "output_dense"):
        for source, target in zip(getattr(decoder, name).weights, getattr(plain, name).weights):
            target.assign(source)
    plain.rnn_layers[0].set_weights(decoder.rnn_layers[0].get_weights())
    expected, _, _ = plain.step(TARGET[:, 0], plain.get_initial_state(3), plain.prepare_memory(MEMORY))
    output, _, _ = decoder.step(TARGET[:, 0], state, cache)
    np.testing.assert_allclose(np.array(output), np.array(expected), atol=1e-6)


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
    np.testing.assert_allclose(np.array(outputs), expected, atol=1e-4)
