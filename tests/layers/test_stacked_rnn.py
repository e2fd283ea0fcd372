import keras
import numpy as np
import pytest

from seqtasks.layers import StackedRNN
from tests.support.attention_reference import lstm_step
from tests.support.layer_test_utils import run_layer_test
from tests.support.numerics import tolerance

pytestmark = pytest.mark.backends

RNG = np.random.default_rng(2)
INPUTS = RNG.normal(size=(3, 6, 5)).astype("float32")
LENGTHS = [6, 4, 2]
MASK = np.arange(6)[None, :] < np.array(LENGTHS)[:, None]
PADDED = np.where(MASK[..., None], INPUTS, 0.0).astype("float32")

CONFIGS = [
    {"units": 8, "cell_type": "lstm", "num_layers": 2},
    {"units": 8, "cell_type": "gru", "num_layers": 2, "residual": True},
    {"units": 8, "cell_type": "rnn"},
    {"units": 8, "cell_type": "lstm", "bidirectional": True, "num_layers": 2, "residual": True},
    {"units": 8, "cell_type": "gru", "bidirectional": True, "merge_mode": "sum", "num_layers": 3},
]


@pytest.mark.parametrize("config", CONFIGS)
def test_padded_batch_equals_sequences_one_by_one(config):
    layer = StackedRNN(**config)
    outputs, states = layer(PADDED, mask=MASK)
    for row, length in enumerate(LENGTHS):
        alone_outputs, alone_states = layer(INPUTS[row : row + 1, :length])
        np.testing.assert_allclose(
            np.array(outputs)[row, :length], np.array(alone_outputs)[0], **tolerance(atol=1e-5)
        )
        for layer_states, alone_layer_states in zip(states, alone_states):
            for state, alone_state in zip(layer_states, alone_layer_states):
                np.testing.assert_allclose(np.array(state)[row], np.array(alone_state)[0], **tolerance(atol=1e-5))
        assert np.all(np.array(outputs)[row, length:] == 0.0)


@pytest.mark.parametrize("cell_type", ["lstm", "gru", "rnn"])
def test_masked_final_state_equals_output_at_last_real_step(cell_type):
    outputs, states = StackedRNN(units=8, cell_type=cell_type, num_layers=2)(PADDED, mask=MASK)
    last = np.array(outputs)[np.arange(3), np.array(LENGTHS) - 1]
    np.testing.assert_allclose(np.array(states[-1][0]), last, atol=1e-6)


def test_states_structure_and_output_size():
    outputs, states = StackedRNN(units=8, num_layers=3, bidirectional=True)(INPUTS)
    assert outputs.shape == (3, 6, 16)
    assert len(states) == 3
    assert all(len(layer_states) == 4 for layer_states in states)
    assert all(state.shape == (3, 8) for layer_states in states for state in layer_states)


def test_residual_adds_each_upper_layers_input():
    layer = StackedRNN(units=5, num_layers=2, cell_type="gru", residual=True)
    outputs, _ = layer(INPUTS)
    first, *_ = layer.rnn_layers[0](INPUTS)
    second, *_ = layer.rnn_layers[1](first)
    # The first layer (5 -> 5 features here) is residual too, since sizes match.
    first = first + INPUTS
    second, *_ = layer.rnn_layers[1](first)
    np.testing.assert_allclose(np.array(outputs), np.array(second + first), **tolerance(atol=1e-5))


def test_dropout_between_layers_only_when_training():
    layer = StackedRNN(units=8, num_layers=2, dropout=0.5)
    inference = [np.array(layer(INPUTS, training=False)[0]) for _ in range(2)]
    np.testing.assert_array_equal(inference[0], inference[1])
    training = np.array(layer(INPUTS, training=True)[0])
    assert not np.allclose(training, inference[0])


@pytest.mark.parametrize("cell_type", ["lstm", "gru"])
def test_layers_stay_eligible_for_cudnn(cell_type):
    # Keras' own criteria, less its "is a GPU visible" check.
    import importlib

    tf_rnn = importlib.import_module("keras.src.backend.tensorflow.rnn")

    layer = StackedRNN(units=8, num_layers=2, cell_type=cell_type, bidirectional=True, dropout=0.2)
    layer(INPUTS)
    assert len(layer.rnn_layers) == len(layer.backward_layers) == 2
    for rnn in layer.rnn_layers + layer.backward_layers:
        cell = rnn.cell
        assert rnn.use_cudnn in ("auto", True)
        assert cell.recurrent_dropout == 0.0 and cell.dropout == 0.0
        arguments = dict(
            activation=cell.activation,
            recurrent_activation=cell.recurrent_activation,
            unroll=rnn.unroll,
            use_bias=cell.use_bias,
        )
        if cell_type == "lstm":
            assert tf_rnn._do_lstm_arguments_support_cudnn(**arguments)
        else:
            assert tf_rnn._do_gru_arguments_support_cudnn(reset_after=cell.reset_after, **arguments)


def test_mask_propagates_to_outputs_in_a_functional_model():
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 4, mask_zero=True)(tokens)
    outputs, _ = StackedRNN(units=4)(embedded)
    assert outputs._keras_mask is not None


def _lstm_params(input_dim, units):
    # kernel (input_dim, 4u), recurrent kernel (u, 4u), bias (4u,)
    return input_dim * 4 * units + units * 4 * units + 4 * units


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.parametrize(
    "config, num_weights, num_params, output_shapes",
    [
        (
            CONFIGS[0],
            2 * 3,
            _lstm_params(5, 8) + _lstm_params(8, 8),
            ((3, 6, 8), [[(3, 8), (3, 8)], [(3, 8), (3, 8)]]),
        ),
        (
            # Two directions per layer; the second reads the concatenated 16 features.
            CONFIGS[3],
            2 * 2 * 3,
            2 * _lstm_params(5, 8) + 2 * _lstm_params(16, 8),
            ((3, 6, 16), [[(3, 8)] * 4, [(3, 8)] * 4]),
        ),
    ],
)
def test_layer_contract(config, num_weights, num_params, output_shapes, tmp_path):
    run_layer_test(
        StackedRNN,
        config,
        {"inputs": PADDED, "mask": MASK},
        tmp_path=tmp_path,
        expected_output_shapes=output_shapes,
        expected_num_trainable_weights=num_weights,
        expected_num_non_trainable_weights=0,
        expected_num_params=num_params,
    )


@pytest.mark.parametrize("config", CONFIGS)
def test_symbolic_outputs_have_the_documented_structure(config):
    outputs, states = StackedRNN(**config)(keras.Input((None, 5)))
    bidirectional = config.get("bidirectional", False)
    concat = bidirectional and config.get("merge_mode", "concat") == "concat"
    assert outputs.shape == (None, None, 16 if concat else 8)
    per_layer = (2 if config["cell_type"] == "lstm" else 1) * (2 if bidirectional else 1)
    assert isinstance(states, list) and all(isinstance(layer_states, list) for layer_states in states)
    assert [len(layer_states) for layer_states in states] == [per_layer] * config.get("num_layers", 1)
    assert all(state.shape == (None, 8) for layer_states in states for state in layer_states)


def test_layers_are_initialised_independently():
    # One shared unseeded initializer used to give every layer of one shape the same kernels.
    layer = StackedRNN(units=8, num_layers=3, kernel_initializer=keras.initializers.GlorotUniform())
    layer(np.zeros((2, 3, 8), "float32"))
    kernels = [np.array(rnn.cell.kernel) for rnn in layer.rnn_layers]
    recurrent = [np.array(rnn.cell.recurrent_kernel) for rnn in layer.rnn_layers]
    assert not np.allclose(kernels[1], kernels[2]) and not np.allclose(kernels[0], kernels[1])
    assert not np.allclose(recurrent[0], recurrent[1])


def test_initializers_reach_every_layer():
    layer = StackedRNN(units=4, num_layers=2, bidirectional=True, kernel_initializer="ones", recurrent_initializer="zeros")
    layer(INPUTS)
    assert len(layer.backward_layers) == 2
    for rnn in layer.rnn_layers + layer.backward_layers:
        assert np.all(np.array(rnn.cell.kernel) == 1.0) and np.all(np.array(rnn.cell.recurrent_kernel) == 0.0)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"units": 8, "cell_type": "lstmm"}, "Received: cell_type='lstmm'"),
        ({"units": 0}, "Expected a positive integer. Received: units=0"),
        ({"units": 8, "num_layers": 0}, "Received: num_layers=0"),
        ({"units": 8, "merge_mode": "max"}, "Received: merge_mode='max'"),
        ({"units": 8, "dropout": 1.0}, r"Expected a rate in \[0, 1\). Received: dropout=1.0"),
        ({"units": True}, "Expected a positive integer. Received: units=True"),
        ({"units": 8.0}, "Expected a positive integer. Received: units=8.0"),
        ({"units": 8, "num_layers": False}, "Received: num_layers=False"),
        ({"units": 8, "dropout": True}, r"Expected a rate in \[0, 1\). Received: dropout=True"),
        ({"units": 8, "dropout": -0.1}, r"Received: dropout=-0.1"),
        ({"units": 8, "dropout": "0.1"}, r"Received: dropout='0.1'"),
        ({"units": 8, "cell_type": True}, "Received: cell_type=True"),
    ],
)
def test_invalid_arguments_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        StackedRNN(**kwargs)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_residual_stack_under_a_mixed_policy_of_its_own(policy):
    # The dropout between layers once ran in float32 and broke the residual sum.
    layer = StackedRNN(units=5, num_layers=2, residual=True, dropout=0.1, dtype=policy)
    outputs, states = layer(INPUTS, mask=MASK, training=True)
    assert keras.backend.standardize_dtype(outputs.dtype) == layer.compute_dtype
    assert np.all(np.isfinite(np.array(keras.ops.cast(outputs, "float32"))))


@pytest.mark.parametrize("cell_type", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("masked", [False, True])
def test_bidirectional_final_states_are_forward_then_backward(cell_type, masked):
    # With concatenated outputs, [:units] is the forward direction and [units:]
    # the backward one: the forward final h is the forward output at the last
    # real step, the backward final h is the backward output at step 0.
    layer = StackedRNN(units=4, num_layers=2, cell_type=cell_type, bidirectional=True)
    if masked:
        outputs, states = layer(PADDED, mask=MASK)
        lengths = np.array(LENGTHS)
    else:
        outputs, states = layer(INPUTS)
        lengths = np.full(3, 6)
    outputs = np.array(outputs)
    top = [np.array(state) for state in states[-1]]
    per_direction = len(top) // 2
    assert per_direction == (2 if cell_type == "lstm" else 1)
    forward_h, backward_h = top[0], top[per_direction]
    np.testing.assert_allclose(forward_h, outputs[np.arange(3), lengths - 1, :4], atol=1e-6)
    np.testing.assert_allclose(backward_h, outputs[:, 0, 4:], atol=1e-6)
    # The two directions really differ, so a swapped order could not pass.
    assert np.abs(forward_h - backward_h).max() > 1e-3


def _numpy_lstm(sequence, cell):
    """Runs a Keras LSTM cell's weights over `(time, features)` in NumPy; returns outputs, h, c."""
    kernel, recurrent_kernel, bias = (np.array(w) for w in (cell.kernel, cell.recurrent_kernel, cell.bias))
    h = c = np.zeros(cell.units)
    outputs = []
    for x in sequence:
        h, c = lstm_step(x, h, c, kernel, recurrent_kernel, bias)
        outputs.append(h)
    return np.stack(outputs), h, c


def test_bidirectional_lstm_states_match_a_numpy_reference():
    # Each layer's states must be [h_fw, c_fw, h_bw, c_bw], the backward
    # direction having read the real steps from last to first; the second
    # layer reads [forward; backward] outputs of the first.
    layer = StackedRNN(units=4, num_layers=2, bidirectional=True)
    outputs, states = layer(PADDED, mask=MASK)
    for row, length in enumerate(LENGTHS):
        x = INPUTS[row, :length]
        for index, (forward_rnn, backward_rnn) in enumerate(zip(layer.rnn_layers, layer.backward_layers)):
            forward, forward_h, forward_c = _numpy_lstm(x, forward_rnn.cell)
            backward, backward_h, backward_c = _numpy_lstm(x[::-1], backward_rnn.cell)
            for state, expected in zip(states[index], [forward_h, forward_c, backward_h, backward_c]):
                np.testing.assert_allclose(np.array(state)[row], expected, **tolerance(atol=1e-5))
            x = np.concatenate([forward, backward[::-1]], -1)
        np.testing.assert_allclose(np.array(outputs)[row, :length], x, **tolerance(atol=1e-5))


def test_building_serializes_no_layer(monkeypatch):
    # keras.layers.Bidirectional rebuilds its layers by serializing them; inside load_model's
    # object-sharing scope a new layer at a freed one's address then came back as that old
    # layer (one CI run failed with "both go_backwards False"). The stack serializes nothing.
    from keras.src.saving import serialization_lib

    recorded = []
    monkeypatch.setattr(
        serialization_lib,
        "record_object_after_serialization",
        lambda obj, config: recorded.append(type(obj).__name__),
    )
    with serialization_lib.ObjectSharingScope():
        layer = StackedRNN(units=4, num_layers=3, bidirectional=True)
        layer.build((None, None, 5))
    assert recorded == []
    directions = [rnn.go_backwards for rnn in layer.rnn_layers + layer.backward_layers]
    assert directions == [False] * 3 + [True] * 3


@pytest.mark.parametrize("bidirectional", [False, True])
def test_weights_are_named_for_checkpoints(bidirectional):
    layer = StackedRNN(units=4, num_layers=2, cell_type="gru", bidirectional=bidirectional)
    layer(INPUTS)
    cell = ["gru_cell/kernel", "gru_cell/recurrent_kernel", "gru_cell/bias"]
    directions = ["forward_", "backward_"] if bidirectional else [""]
    expected = [f"{direction}gru_{index}/{w}" for index in range(2) for direction in directions for w in cell]
    assert [w.path.split("/", 1)[1] for w in layer.weights] == expected


@pytest.mark.parametrize(
    "merge_mode, merge",
    [
        ("concat", lambda f, b: np.concatenate([f, b], -1)),
        ("sum", lambda f, b: f + b),
        ("ave", lambda f, b: (f + b) / 2),
        ("mul", lambda f, b: f * b),
    ],
)
def test_merge_modes_match_a_numpy_reference(merge_mode, merge):
    layer = StackedRNN(units=4, bidirectional=True, merge_mode=merge_mode)
    outputs = np.array(layer(INPUTS)[0])
    for row in range(len(INPUTS)):
        forward, _, _ = _numpy_lstm(INPUTS[row], layer.rnn_layers[0].cell)
        backward, _, _ = _numpy_lstm(INPUTS[row][::-1], layer.backward_layers[0].cell)
        np.testing.assert_allclose(outputs[row], merge(forward, backward[::-1]), **tolerance(atol=1e-5))
