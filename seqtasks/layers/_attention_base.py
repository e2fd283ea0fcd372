"""Shared mechanics of the score-based attention layers (not a public layer)."""

import keras
from keras import ops

from seqtasks.layers._validation import clone_initializer


def masked_softmax(scores, mask):
    """Softmax over the last axis in float32 where masked positions get exactly 0.

    Rows whose positions are all masked return all zeros rather than a uniform
    distribution over padding.
    """
    scores = ops.cast(scores, "float32")
    if mask is None:
        return ops.softmax(scores, axis=-1)
    mask = ops.cast(mask, "bool")
    scores = ops.where(mask, scores, ops.full_like(scores, -1e9))
    weights = ops.softmax(scores, axis=-1)
    return ops.where(mask, weights, ops.zeros_like(weights))


class ScoreAttention(keras.layers.Layer):
    """Base of attention layers defined by a score function.

    Subclasses implement `_build_score(query_dim, key_dim)`, `prepare_keys(key)`
    (the part of the score that depends on the keys only, computed once per
    source sequence) and `_score(query, processed_keys)` returning
    `(batch, Tq, Tv)` scores for a `(batch, Tq, dim)` query.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        if len(value_shape) != 3 or len(key_shape) != 3:
            raise ValueError(
                "Expected `value` and `key` of shape (batch, Tv, dim). "
                f"Received: value.shape={value_shape}, key.shape={key_shape}"
            )
        if len(query_shape) not in (2, 3):
            raise ValueError(
                "Expected `query` of shape (batch, dim) or (batch, Tq, dim). "
                f"Received: query.shape={query_shape}"
            )
        self._build_score(query_shape[-1], key_shape[-1])
        self.built = True

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        training=None,
    ):
        key = value if key is None else key
        context, weights = self.attend(
            query, self.prepare_keys(key), value, value_mask=value_mask
        )
        if query_mask is not None:
            keep = ops.expand_dims(ops.cast(query_mask, context.dtype), -1)
            context = context * keep
        return context, weights

    def attend(self, query, processed_keys, value, value_mask=None):
        """Attends with keys already passed through `prepare_keys`.

        Decoders call this once per step so the key projection is computed
        only once per source sequence.
        """
        single_step = len(query.shape) == 2
        if single_step:
            query = ops.expand_dims(query, 1)
        scores = self._score(query, processed_keys)
        mask = None
        if value_mask is not None:
            mask = ops.expand_dims(ops.cast(value_mask, "bool"), 1)
        weights = ops.cast(masked_softmax(scores, mask), value.dtype)
        context = ops.matmul(weights, value)
        if single_step:
            return ops.squeeze(context, 1), ops.squeeze(weights, 1)
        return context, weights

    def compute_output_spec(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        training=None,
    ):
        # Like `attend`: the context and the weights take the value's dtype.
        batch_size = query.shape[0]
        query_steps = () if len(query.shape) == 2 else (query.shape[1],)
        context = keras.KerasTensor(
            (batch_size, *query_steps, value.shape[-1]), dtype=value.dtype
        )
        weights = keras.KerasTensor(
            (batch_size, *query_steps, value.shape[1]), dtype=value.dtype
        )
        return context, weights

    def compute_mask(self, inputs, previous_mask=None):
        # `previous_mask` is the Keras mask of the query: the context keeps it.
        if previous_mask is None:
            return None
        return previous_mask, None

    def _dense(self, units, input_dim, name):
        """A bias-free projection built for `input_dim` features."""
        layer = keras.layers.Dense(
            units,
            use_bias=False,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name=name,
        )
        layer.build((None, input_dim))
        return layer

    def prepare_keys(self, key):
        raise NotImplementedError

    def _build_score(self, query_dim, key_dim):
        raise NotImplementedError

    def _score(self, query, processed_keys):
        raise NotImplementedError
