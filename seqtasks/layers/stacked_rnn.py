import keras
from keras import ops

from seqtasks.layers._validation import (
    check_choice,
    check_positive_int,
    check_rate,
    clone_initializer,
)

CELL_TYPES = ("lstm", "gru", "rnn")
MERGE_MODES = ("concat", "sum", "ave", "mul")
_RNN_CLASSES = {
    "lstm": keras.layers.LSTM,
    "gru": keras.layers.GRU,
    "rnn": keras.layers.SimpleRNN,
}


@keras.saving.register_keras_serializable(package="seqtasks")
class StackedRNN(keras.layers.Layer):
    """A vertical stack of LSTM, GRU or simple RNN layers.

    Each layer reads the full output sequence of the layer below. Options:
    bidirectional layers (forward and backward outputs merged with
    `merge_mode`), residual connections (a layer's input is added to its output
    wherever their sizes match: every layer from the second on, as in GNMT, and
    the first too when the input size equals the output size) and dropout on
    the outputs of every layer but the top one.

    Every layer uses Keras' fused recurrent implementation with the default
    activations and no recurrent dropout, so on a GPU LSTM and GRU layers take
    the cuDNN kernels (with right-padded masks).

    Args:
        units: int, the state size of every layer.
        num_layers: int, how many layers to stack. Defaults to 1.
        cell_type: one of `"lstm"`, `"gru"`, `"rnn"`. Defaults to `"lstm"`.
        bidirectional: bool, whether each layer reads both directions.
        merge_mode: how forward and backward outputs are combined, one of
            `"concat"` (output size `2 * units`), `"sum"`, `"ave"`, `"mul"`.
        residual: bool, whether to add residual connections between layers.
        dropout: float, dropout rate between layers (not on the top output).
        kernel_initializer: initializer of the input kernels of the recurrent
            layers. Defaults to `"glorot_uniform"`.
        recurrent_initializer: initializer of their recurrent kernels.
            Defaults to `"orthogonal"`. Every recurrent layer gets its own
            copy of each initializer, so unseeded ones start the layers from
            different values.
        **kwargs: other keyword arguments of `keras.layers.Layer`.

    Call arguments:
        inputs: `(batch, time, features)`.
        mask: optional `(batch, time)` boolean, `False` at padding (taken from
            the Keras mask of `inputs`, e.g. `Embedding(mask_zero=True)`).
            Padding must be at the end of each sequence.
        training: bool, whether dropout is active.

    Returns:
        A tuple `(outputs, states)`. `outputs` is `(batch, time, output_dim)`,
        the top layer's outputs, carrying the input mask; `output_dim` is
        `units`, or `2 * units` for a bidirectional `"concat"` stack. `states`
        is a list with one entry per layer (bottom first); each entry is a list
        of `(batch, units)` tensors: `[h, c]` for LSTM, `[h]` for GRU and RNN,
        the forward states followed by the backward ones when bidirectional.
        With a mask, the final states are those at each sequence's last real
        step. Outputs and states are in the layer's compute dtype.

    Example:

    >>> tokens = keras.Input((None,), dtype="int32")
    >>> x = keras.layers.Embedding(100, 16, mask_zero=True)(tokens)
    >>> outputs, states = StackedRNN(units=32, num_layers=2, cell_type="gru")(x)
    >>> tuple(outputs.shape), len(states), len(states[0])
    ((None, None, 32), 2, 1)

    Reference:
        Sutskever, Vinyals & Le, "Sequence to Sequence Learning with Neural
        Networks", NeurIPS 2014; Wu et al., "Google's Neural Machine
        Translation System", 2016 (residual stacking).
    """

    def __init__(
        self,
        units,
        num_layers=1,
        cell_type="lstm",
        bidirectional=False,
        merge_mode="concat",
        residual=False,
        dropout=0.0,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int(units, "units")
        check_positive_int(num_layers, "num_layers")
        check_choice(cell_type, CELL_TYPES, "cell_type")
        check_choice(merge_mode, MERGE_MODES, "merge_mode")
        check_rate(dropout, "dropout")
        self.units = units
        self.num_layers = num_layers
        self.cell_type = cell_type
        self.bidirectional = bool(bidirectional)
        self.merge_mode = merge_mode
        self.residual = bool(residual)
        self.dropout = float(dropout)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.supports_masking = True

    @property
    def output_dim(self):
        if self.bidirectional and self.merge_mode == "concat":
            return 2 * self.units
        return self.units

    @property
    def states_per_layer(self):
        per_direction = 2 if self.cell_type == "lstm" else 1
        return per_direction * (2 if self.bidirectional else 1)

    def build(self, inputs_shape):
        # Both directions are built here rather than with keras.layers.Bidirectional: that
        # wrapper rebuilds its layers through serialization, and inside load_model's object
        # sharing scope a new layer at a freed layer's address is taken for that old layer.
        self.rnn_layers = []
        self.backward_layers = []
        self.dropout_layers = []
        input_dim = inputs_shape[-1]
        for index in range(self.num_layers):
            layer_shape = (inputs_shape[0], inputs_shape[1], input_dim)
            if self.bidirectional:
                self.rnn_layers.append(self._make_rnn(f"forward_{self.cell_type}_{index}", layer_shape))
                self.backward_layers.append(
                    self._make_rnn(
                        f"backward_{self.cell_type}_{index}", layer_shape, go_backwards=True
                    )
                )
            else:
                self.rnn_layers.append(self._make_rnn(f"{self.cell_type}_{index}", layer_shape))
            if index < self.num_layers - 1:
                self.dropout_layers.append(
                    keras.layers.Dropout(
                        self.dropout, dtype=self.dtype_policy, name=f"dropout_{index}"
                    )
                )
            input_dim = self.output_dim
        self.built = True

    def _make_rnn(self, name, inputs_shape, go_backwards=False):
        layer = _RNN_CLASSES[self.cell_type](
            self.units,
            return_sequences=True,
            return_state=True,
            go_backwards=go_backwards,
            zero_output_for_mask=True,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            recurrent_initializer=clone_initializer(self.recurrent_initializer),
            dtype=self.dtype_policy,
            name=name,
        )
        layer.build(inputs_shape)
        return layer

    def _run_layer(self, index, inputs, mask, training):
        outputs, *states = self.rnn_layers[index](inputs, mask=mask, training=training)
        if not self.bidirectional:
            return outputs, states
        backward, *backward_states = self.backward_layers[index](
            inputs, mask=mask, training=training
        )
        # The backward layer emits its outputs last step first.
        backward = ops.flip(backward, axis=1)
        if self.merge_mode == "concat":
            outputs = ops.concatenate([outputs, backward], axis=-1)
        elif self.merge_mode == "sum":
            outputs = outputs + backward
        elif self.merge_mode == "ave":
            outputs = (outputs + backward) / 2
        else:
            outputs = outputs * backward
        return outputs, states + backward_states

    def call(self, inputs, mask=None, training=None):
        states = []
        x = inputs
        for index in range(self.num_layers):
            outputs, layer_states = self._run_layer(index, x, mask, training)
            if self.residual and x.shape[-1] == outputs.shape[-1]:
                outputs = outputs + x
            states.append(layer_states)
            if index < self.num_layers - 1:
                outputs = self.dropout_layers[index](outputs, training=training)
            x = outputs
        if mask is not None:
            # Padded steps output zeros, whatever the residual path added.
            x = x * ops.expand_dims(ops.cast(mask, x.dtype), -1)
        return x, states

    def compute_output_spec(self, inputs, mask=None, training=None):
        batch_size, time_steps = inputs.shape[0], inputs.shape[1]
        outputs = keras.KerasTensor(
            (batch_size, time_steps, self.output_dim), dtype=self.compute_dtype
        )
        states = [
            [
                keras.KerasTensor((batch_size, self.units), dtype=self.compute_dtype)
                for _ in range(self.states_per_layer)
            ]
            for _ in range(self.num_layers)
        ]
        return outputs, states

    def compute_mask(self, inputs, previous_mask=None):
        if previous_mask is None:
            return None
        return previous_mask, [
            [None] * self.states_per_layer for _ in range(self.num_layers)
        ]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "num_layers": self.num_layers,
                "cell_type": self.cell_type,
                "bidirectional": self.bidirectional,
                "merge_mode": self.merge_mode,
                "residual": self.residual,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "recurrent_initializer": keras.initializers.serialize(
                    self.recurrent_initializer
                ),
            }
        )
        return config
