import numbers

import keras
from keras import ops

from seqtasks.layers._attention_base import masked_softmax
from seqtasks.layers._validation import check_positive_int, clone_initializer


@keras.saving.register_keras_serializable(package="seqtasks")
class StructuredSelfAttention(keras.layers.Layer):
    """A sentence embedding of several attention hops over a sequence's states, with a penalty on their overlap.

    `A = softmax(W_s2 tanh(W_s1 Hᵀ))` gives `hops` distributions over the
    `T` states `H` (softmax over time, padding masked out); the embedding is
    `M = A H`, `hops` weighted averages, flattened to one vector. Each hop
    may look at a different part of the sentence; the penalty
    `penalty · ‖A Aᵀ − I‖_F²` (averaged over the batch, added to the
    layer's losses in training) pushes them apart.

    Args:
        hops: int, the number of attention distributions `r`.
        units: int, the hidden size `d_a` of `W_s1`.
        penalty: float >= 0, the coefficient of the penalty (0: none).
        kernel_initializer: initializer of `W_s1` and `W_s2`.
        **kwargs: other keyword arguments of `keras.layers.Layer`.

    Call arguments:
        inputs: `(batch, time, features)`, e.g. the outputs of a `StackedRNN`.
        mask: optional `(batch, time)` boolean, `False` at padding (taken from
            the Keras mask of `inputs`).
        training: whether the penalty is added to the layer's losses.

    Returns:
        A tuple `(embedding, weights)`: `embedding` `(batch, hops * features)`
        (hop by hop), `weights` `(batch, hops, time)`, each hop summing to 1
        over the real states.

    Example:

    >>> attention = StructuredSelfAttention(hops=3, units=8)
    >>> embedding, weights = attention(np.ones((2, 5, 6), "float32"))
    >>> tuple(embedding.shape), tuple(weights.shape)
    ((2, 18), (2, 3, 5))

    Reference:
        Lin et al., "A Structured Self-Attentive Sentence Embedding", ICLR
        2017. https://arxiv.org/abs/1703.03130
    """

    def __init__(self, hops=4, units=64, penalty=1.0, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        check_positive_int(hops, "hops")
        check_positive_int(units, "units")
        if isinstance(penalty, bool) or not isinstance(penalty, numbers.Real) or not penalty >= 0:
            raise ValueError(f"Expected a number >= 0. Received: penalty={penalty!r}")
        self.hops = hops
        self.units = units
        self.penalty = float(penalty)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        self.w_s1 = self.add_weight(
            name="w_s1", shape=(inputs_shape[-1], self.units), initializer=clone_initializer(self.kernel_initializer)
        )
        self.w_s2 = self.add_weight(
            name="w_s2", shape=(self.units, self.hops), initializer=clone_initializer(self.kernel_initializer)
        )
        self.built = True

    def call(self, inputs, mask=None, training=None):
        scores = ops.matmul(ops.tanh(ops.matmul(inputs, ops.cast(self.w_s1, inputs.dtype))),
                            ops.cast(self.w_s2, inputs.dtype))
        scores = ops.transpose(scores, (0, 2, 1))  # (batch, hops, time)
        keep = None if mask is None else ops.expand_dims(ops.cast(mask, "bool"), 1)
        weights = masked_softmax(scores, keep)  # float32
        if self.penalty and training:
            overlap = ops.matmul(weights, ops.transpose(weights, (0, 2, 1))) - ops.eye(self.hops, dtype="float32")
            self.add_loss(self.penalty * ops.mean(ops.sum(ops.square(overlap), axis=(1, 2))))
        weights = ops.cast(weights, inputs.dtype)
        embedding = ops.matmul(weights, inputs)
        return ops.reshape(embedding, (ops.shape(inputs)[0], self.hops * inputs.shape[-1])), weights

    def compute_output_spec(self, inputs, mask=None, training=None):
        return (
            keras.KerasTensor((inputs.shape[0], self.hops * inputs.shape[-1]), dtype=self.compute_dtype),
            keras.KerasTensor((inputs.shape[0], self.hops, inputs.shape[1]), dtype=self.compute_dtype),
        )

    def compute_mask(self, inputs, mask=None):
        return None

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hops": self.hops,
                "units": self.units,
                "penalty": self.penalty,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
