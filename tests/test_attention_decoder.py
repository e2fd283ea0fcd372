import keras
import numpy as np
import pytest
from layer_test_utils import run_layer_test

from seqtasks.layers import AttentionDecoder, StackedRNN

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


@pytest.mark.parametrize("config", [CONFIGS[0], CONFIGS[3], CONFIGS[6], CONFIGS[8]])
def test_layer_contract(config, tmp_path):
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
    )


def test_residual_combine_is_the_normalised_sum_of_state_and_projected_context():
    decoder = AttentionDecoder(units=10, input_feeding=False, cell_type="gru", combine="residual")
    outputs, weights = decoder(TARGET, MEMORY, memory_mask=MEMORY_MASK, return_attention=True)
    states, *_ = decoder.rnn_layers[0](TARGET)
    context = np.einsum("btm,bmd->btd", np.array(weights), MEMORY)
    summed = np.array(states) + context @ np.array(decoder.output_dense.kernel)
    mean, variance = summed.mean(-1, keepdims=True), summed.var(-1, keepdims=True)
    expected = (summed - mean) / np.sqrt(variance + decoder.output_norm.epsilon)  # LayerNorm starts at gamma 1, beta 0
    np.testing.assert_allclose(np.array(outputs), expected, atol=1e-4)
