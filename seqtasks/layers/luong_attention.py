import keras
from keras import ops

from seqtasks.layers._attention_base import ScoreAttention
from seqtasks.layers._validation import (
    check_choice,
    check_optional_positive_int,
    clone_initializer,
)

SCORES = ("dot", "general", "concat")


@keras.saving.register_keras_serializable(package="seqtasks")
class LuongAttention(ScoreAttention):
    """Multiplicative (Luong) attention with the `dot`, `general` or `concat` score.

    For a query `s` (a decoder state) and a key `h` (an encoder state):

    - `dot`: `score = sᵀ h` (query and key sizes must match);
    - `general`: `score = sᵀ W h`, with `W` a learned `(dim_k, dim_q)` matrix;
    - `concat`: `score = vᵀ tanh(W [s; h])`, computed as `W_q s + W_k h`
      so the key half is projected once per source sequence.

    With `scale=True` every score is multiplied by a learned scalar `g`, which
    lets the model sharpen or flatten the weights. For `dot` and `general` it
    starts at `1 / sqrt(dim_q)`, the scaled dot-product of Vaswani et al.
    (2017): unscaled products of large states saturate the softmax (weights of
    exactly 0 and 1) and starve the attention of gradient. For `concat` it
    starts at 1.

    Args:
        score: one of `"dot"`, `"general"`, `"concat"`.
        units: int, the hidden size of the `concat` score; required for
            `concat` and not used by the others.
        scale: bool. Whether to learn a scale of the scores.
        kernel_initializer: initializer of the projections and of `v`, each
            with its own copy. Defaults to `"glorot_uniform"`.
        **kwargs: other keyword arguments of `keras.layers.Layer`.

    Call arguments:
        query: `(batch, dim_q)` for one decoder step or `(batch, Tq, dim_q)`.
        value: `(batch, Tv, dim_v)`, the states to average.
        key: optional `(batch, Tv, dim_k)`; defaults to `value`.
        query_mask: optional `(batch, Tq)` boolean; the context of a padded
            query step is zero.
        value_mask: optional `(batch, Tv)` boolean; `False` marks padding.
            Taken from the Keras mask of `value` when not given.
        training: unused, accepted for a uniform signature.

    Returns:
        A tuple `(context, weights)`: `context` is `(batch, dim_v)` or
        `(batch, Tq, dim_v)`; `weights` is `(batch, Tv)` or `(batch, Tq, Tv)`,
        sums to 1 over `Tv` and is exactly 0 at padded positions. Scores and
        softmax run in float32; `context` and `weights` are returned in the
        dtype of `value` (the layer's compute dtype).

    Example:

    >>> attention = LuongAttention(score="general")
    >>> query = np.zeros((2, 3, 4), "float32")
    >>> memory = np.ones((2, 5, 6), "float32")
    >>> context, weights = attention(query, memory)
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 3, 6), (2, 3, 5))

    Reference:
        Luong, Pham & Manning, "Effective Approaches to Attention-based Neural
        Machine Translation", EMNLP 2015. https://arxiv.org/abs/1508.04025
    """

    def __init__(
        self,
        score="dot",
        units=None,
        scale=False,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_choice(score, SCORES, "score")
        if score == "concat" and units is None:
            raise ValueError(
                "Expected a positive integer `units` for score='concat'. "
                f"Received: units={units}"
            )
        check_optional_positive_int(units, "units")
        self.score = score
        self.units = units
        self.scale = bool(scale)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _build_score(self, query_dim, key_dim):
        if self.score == "dot" and query_dim != key_dim:
            raise ValueError(
                "score='dot' needs queries and keys of the same size. "
                f"Received: query dim={query_dim}, key dim={key_dim}; "
                "use score='general' to learn a projection between them."
            )
        if self.score == "general":
            self.key_dense = self._dense(query_dim, key_dim, "key_dense")
        elif self.score == "concat":
            self.query_dense = self._dense(self.units, query_dim, "query_dense")
            self.key_dense = self._dense(self.units, key_dim, "key_dense")
            self.attention_v = self.add_weight(
                name="attention_v",
                shape=(self.units,),
                initializer=clone_initializer(self.kernel_initializer),
            )
        if self.scale:
            initial = 1.0 if self.score == "concat" else 1.0 / query_dim**0.5
            self.attention_g = self.add_weight(
                name="attention_g",
                shape=(),
                initializer=keras.initializers.Constant(initial),
            )

    def prepare_keys(self, key):
        if self.score == "dot":
            return key
        return self.key_dense(key)

    def _score(self, query, processed_keys):
        if self.score == "concat":
            hidden = ops.tanh(
                ops.expand_dims(self.query_dense(query), 2)
                + ops.expand_dims(processed_keys, 1)
            )
            scores = ops.sum(hidden * ops.cast(self.attention_v, hidden.dtype), -1)
        else:
            scores = ops.matmul(query, ops.transpose(processed_keys, (0, 2, 1)))
        if self.scale:
            scores = scores * ops.cast(self.attention_g, scores.dtype)
        return scores

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "score": self.score,
                "units": self.units,
                "scale": self.scale,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config
