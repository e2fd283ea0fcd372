import keras
from keras import ops

from seqtasks.layers._attention_base import ScoreAttention
from seqtasks.layers._validation import check_positive_int, clone_initializer


@keras.saving.register_keras_serializable(package="seqtasks")
class BahdanauAttention(ScoreAttention):
    """Additive attention: `score(q, k) = vᵀ tanh(W_q q + W_k k)`.

    The query (a decoder state) and every key (an encoder state) are projected
    to `units` dimensions, added, passed through `tanh` and reduced with a
    learned vector `v`. With `normalize=True` the vector is weight-normalised,
    `v = g · v / ‖v‖` with a learned scalar `g`, and a bias `b` is added inside
    the `tanh` (Salimans & Kingma, 2016), which helps training at larger sizes.

    Args:
        units: int. Size of the projected query and keys.
        normalize: bool. Whether to weight-normalise `v` and add a bias.
        kernel_initializer: initializer of `W_q`, `W_k` and `v`, each with
            its own copy. Defaults to `"glorot_uniform"`.
        **kwargs: other keyword arguments of `keras.layers.Layer`, such as
            `name` and `dtype`.

    Call arguments:
        query: `(batch, dim_q)` for one decoder step or `(batch, Tq, dim_q)`
            for a whole sequence.
        value: `(batch, Tv, dim_v)`, the states to average (encoder outputs).
        key: optional `(batch, Tv, dim_k)`; defaults to `value`.
        query_mask: optional `(batch, Tq)` boolean; the context of a padded
            query step is zero.
        value_mask: optional `(batch, Tv)` boolean; `False` marks padding.
            Taken from the Keras mask of `value` when not given.
        training: unused, accepted for a uniform signature.

    Returns:
        A tuple `(context, weights)`: `context` is `(batch, dim_v)` or
        `(batch, Tq, dim_v)`; `weights` is `(batch, Tv)` or `(batch, Tq, Tv)`,
        sums to 1 over `Tv` and is exactly 0 at padded positions (all zeros
        where every position is padding). Scores and softmax run in float32;
        `context` and `weights` are returned in the dtype of `value` (the
        layer's compute dtype, e.g. float16 under `"mixed_float16"`).

    Example:

    >>> attention = BahdanauAttention(units=8)
    >>> query = np.zeros((2, 4), "float32")
    >>> memory = np.ones((2, 5, 6), "float32")
    >>> context, weights = attention(query, memory)
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 6), (2, 5))

    Reference:
        Bahdanau, Cho & Bengio, "Neural Machine Translation by Jointly Learning
        to Align and Translate", ICLR 2015. https://arxiv.org/abs/1409.0473
    """

    def __init__(
        self,
        units,
        normalize=False,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int(units, "units")
        self.units = units
        self.normalize = bool(normalize)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _build_score(self, query_dim, key_dim):
        self.query_dense = self._dense(self.units, query_dim, "query_dense")
        self.key_dense = self._dense(self.units, key_dim, "key_dense")
        self.attention_v = self.add_weight(
            name="attention_v",
            shape=(self.units,),
            initializer=clone_initializer(self.kernel_initializer),
        )
        if self.normalize:
            self.attention_g = self.add_weight(
                name="attention_g",
                shape=(),
                initializer=keras.initializers.Constant((1.0 / self.units) ** 0.5),
            )
            self.attention_b = self.add_weight(
                name="attention_b", shape=(self.units,), initializer="zeros"
            )

    def prepare_keys(self, key):
        processed = self.key_dense(key)
        if self.normalize:
            processed = processed + ops.cast(self.attention_b, processed.dtype)
        return processed

    def _score(self, query, processed_keys):
        processed_query = self.query_dense(query)
        v = self.attention_v
        if self.normalize:
            v = self.attention_g * v / ops.sqrt(ops.sum(ops.square(v)))
        # (batch, Tq, 1, units) + (batch, 1, Tv, units)
        hidden = ops.tanh(
            ops.expand_dims(processed_query, 2) + ops.expand_dims(processed_keys, 1)
        )
        return ops.sum(hidden * ops.cast(v, hidden.dtype), axis=-1)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "normalize": self.normalize,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config
