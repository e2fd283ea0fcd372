import keras
from keras import ops

from seqtasks.layers._validation import check_positive_int, clone_initializer
from seqtasks.layers.bahdanau_attention import BahdanauAttention


@keras.saving.register_keras_serializable(package="seqtasks")
class AttentionPooling(keras.layers.Layer):
    """Pools a sequence of states into one vector with a learned query.

    A `BahdanauAttention` layer scores every state against a query vector
    learned with the rest of the model (the "context vector" of Yang et al.),
    and the output is the attention-weighted average of the states. Padded
    states get exactly zero weight.

    Args:
        units: int, the size of the learned query and of the attention's
            hidden layer.
        kernel_initializer: initializer of the query and of the attention's
            projections, each with its own copy. Defaults to
            `"glorot_uniform"`.
        **kwargs: other keyword arguments of `keras.layers.Layer`.

    Call arguments:
        inputs: `(batch, time, features)`, e.g. the outputs of a `StackedRNN`.
        mask: optional `(batch, time)` boolean, `False` at padding (taken from
            the Keras mask of `inputs`).

    Returns:
        A tuple `(pooled, weights)`: `pooled` is `(batch, features)`;
        `weights` is `(batch, time)` and sums to 1 over the real steps. Both
        are in the layer's compute dtype.

    Example:

    >>> pooling = AttentionPooling(units=8)
    >>> pooled, weights = pooling(np.ones((2, 5, 6), "float32"))
    >>> tuple(pooled.shape), tuple(weights.shape)
    ((2, 6), (2, 5))

    Reference:
        Yang et al., "Hierarchical Attention Networks for Document
        Classification", NAACL 2016; Bahdanau, Cho & Bengio, ICLR 2015.
    """

    def __init__(self, units, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        check_positive_int(units, "units")
        self.units = units
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        self.query = self.add_weight(
            name="query",
            shape=(1, self.units),
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.attention = BahdanauAttention(
            self.units,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="attention",
        )
        self.attention.build((None, self.units), inputs_shape)
        self.built = True

    def call(self, inputs, mask=None):
        query = ops.broadcast_to(ops.cast(self.query, inputs.dtype), (ops.shape(inputs)[0], self.units))
        return self.attention(query, inputs, value_mask=mask)

    def compute_output_spec(self, inputs, mask=None):
        # The attention sublayer casts its inputs to its compute dtype, which is ours.
        return (
            keras.KerasTensor((inputs.shape[0], inputs.shape[2]), dtype=self.compute_dtype),
            keras.KerasTensor((inputs.shape[0], inputs.shape[1]), dtype=self.compute_dtype),
        )

    def compute_mask(self, inputs, previous_mask=None):
        return None

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
