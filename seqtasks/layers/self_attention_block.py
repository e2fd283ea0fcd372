import keras
from keras import ops

from seqtasks.layers._validation import check_choice, check_positive_int, check_rate, clone_initializer
from seqtasks.layers.bahdanau_attention import BahdanauAttention
from seqtasks.layers.luong_attention import LuongAttention

KINDS = ("luong", "bahdanau")


@keras.saving.register_keras_serializable(package="seqtasks")
class SelfAttentionBlock(keras.layers.Layer):
    """Every state of a sequence attends over all the states of its own sequence; residual, then layer norm.

    `y_t = LayerNorm(x_t + dropout(c_t))` with `c_t` the attention context
    of state `x_t` as the query over all states `x_1..x_T` as keys and values
    (padding masked out of the keys; a padded query gets `c_t = 0`). The
    score is an attention layer of this package: Luong's (`score`: `dot`,
    `general`, `concat`) or Bahdanau's additive one. It is the attention of
    an encoder-decoder with keys and values from the same sequence: a state
    reads what else in the sentence bears on it, e.g. a later "not" for a
    sentiment word, or another mention of a name for its tag.

    Args:
        attention: `"luong"` or `"bahdanau"`.
        score: the Luong score, `"dot"`, `"general"` or `"concat"`.
        units: the Bahdanau (and Luong `concat`) hidden size.
        dropout: float in [0, 1), on the context before the residual sum.
        kernel_initializer: initializer of the attention's projections.
        **kwargs: other keyword arguments of `keras.layers.Layer`.

    Call arguments:
        inputs: `(batch, time, features)`, e.g. the outputs of a `StackedRNN`.
        mask: optional `(batch, time)` boolean, `False` at padding (taken from
            the Keras mask of `inputs`).
        training: whether dropout applies.

    Returns:
        A tuple `(outputs, weights)`: `outputs` `(batch, time, features)`,
        carrying the input mask; `weights` `(batch, time, time)`, row `t`
        the weights state `t` gave every state (each row sums to 1 over the
        real states; padded rows and columns are 0).

    Example:

    >>> block = SelfAttentionBlock("luong", score="general")
    >>> outputs, weights = block(np.ones((2, 5, 6), "float32"))
    >>> tuple(outputs.shape), tuple(weights.shape)
    ((2, 5, 6), (2, 5, 5))

    Reference:
        Cheng, Dong & Lapata, "Long Short-Term Memory-Networks for Machine
        Reading", EMNLP 2016; Vaswani et al., "Attention Is All You Need",
        NeurIPS 2017 (the residual sum and layer normalisation).
    """

    def __init__(self, attention="luong", score="general", units=64, dropout=0.0,
                 kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        check_choice(attention, KINDS, "attention")
        check_positive_int(units, "units")
        check_rate(dropout, "dropout")
        self.attention = attention
        self.score = score
        self.units = units
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True
        initializer = clone_initializer(self.kernel_initializer)
        if attention == "luong":
            self.attention_layer = LuongAttention(
                score, units=units if score == "concat" else None, kernel_initializer=initializer,
                dtype=self.dtype_policy, name="attention",
            )
        else:
            self.attention_layer = BahdanauAttention(
                units, kernel_initializer=initializer, dtype=self.dtype_policy, name="attention"
            )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")
        self.norm = keras.layers.LayerNormalization(dtype=self.dtype_policy, name="norm")

    def build(self, inputs_shape):
        self.attention_layer.build(inputs_shape, inputs_shape)
        self.norm.build(inputs_shape)
        self.built = True

    def call(self, inputs, mask=None, training=None):
        context, weights = self.attention_layer(inputs, inputs, query_mask=mask, value_mask=mask)
        if mask is not None:
            weights = weights * ops.expand_dims(ops.cast(mask, weights.dtype), -1)
        outputs = self.norm(inputs + self.dropout_layer(context, training=training))
        return outputs, weights

    def compute_output_spec(self, inputs, mask=None, training=None):
        return (
            keras.KerasTensor(inputs.shape, dtype=self.compute_dtype),
            keras.KerasTensor((inputs.shape[0], inputs.shape[1], inputs.shape[1]), dtype=self.compute_dtype),
        )

    def compute_mask(self, inputs, mask=None):
        return mask, None

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "attention": self.attention,
                "score": self.score,
                "units": self.units,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
