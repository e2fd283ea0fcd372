import dataclasses

import keras
from keras import ops

from seqtasks.layers import AttentionPooling, StackedRNN
from seqtasks.special_ids import PAD_ID


@keras.saving.register_keras_serializable(package="seqtasks")
class TextClassifier(keras.Model):
    """Token ids -> class logits, from an RNN's last real state or attention pooling.

    Embedding -> `StackedRNN` -> a text vector -> dropout -> dense logits.
    With `pooling="last"` the text vector is the top layer's final hidden
    state at each text's last real token (forward and backward states
    concatenated when bidirectional); with `"attention"` it is an
    `AttentionPooling` average of all top-layer outputs. Id 0 is padding and
    never reaches the result: a padded batch classifies exactly like its texts
    one by one.

    Args:
        vocab_size: int. num_classes: int.
        embedding_dim: int. embedding_dropout: float.
        encoder: dict of `StackedRNN` arguments.
        pooling: `"last"` or `"attention"`. attention_units: int.
        dropout: float, before the output layer.
        **kwargs: other keyword arguments of `keras.Model`.

    Call arguments:
        inputs: int `(batch, time)` token ids.

    Returns:
        Logits `(batch, num_classes)`.
    """

    def __init__(
        self,
        vocab_size,
        num_classes,
        embedding_dim=128,
        embedding_dropout=0.0,
        encoder=None,
        pooling="last",
        attention_units=64,
        dropout=0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if pooling not in ("last", "attention"):
            raise ValueError(f"Expected one of {{'last', 'attention'}}. Received: pooling={pooling!r}")
        self.vocab_size = vocab_size
        self.num_classes = num_classes
        self.embedding_dim = embedding_dim
        self.embedding_dropout = embedding_dropout
        self.encoder = dict(encoder or {"units": 64})
        self.pooling = pooling
        self.attention_units = attention_units
        self.dropout = dropout
        self.embedding = keras.layers.Embedding(vocab_size, embedding_dim, mask_zero=True, dtype=self.dtype_policy, name="embedding")
        self.embedding_dropout_layer = keras.layers.Dropout(embedding_dropout, dtype=self.dtype_policy, name="embedding_dropout")
        self.encoder_layer = StackedRNN(**self.encoder, dtype=self.dtype_policy, name="encoder")
        self.attention_pooling = AttentionPooling(attention_units, dtype=self.dtype_policy, name="attention_pooling") if pooling == "attention" else None
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")
        self.output_dense = keras.layers.Dense(num_classes, dtype="float32", name="logits")  # float32 under mixed precision

    @classmethod
    def from_recipe(cls, model_config, vocab_size, num_classes):
        return cls(
            vocab_size,
            num_classes,
            embedding_dim=model_config.embedding_dim,
            embedding_dropout=model_config.embedding_dropout,
            encoder=dataclasses.asdict(model_config.encoder),
            pooling=model_config.pooling,
            attention_units=model_config.attention_units,
            dropout=model_config.dropout,
        )

    @property
    def text_vector_size(self):
        if self.pooling == "attention":
            return self.encoder_layer.output_dim
        return self.encoder_layer.units * (2 if self.encoder_layer.bidirectional else 1)

    def build(self, input_shape=None):
        self.embedding.build((None, None))
        self.encoder_layer.build((None, None, self.embedding_dim))
        if self.attention_pooling is not None:
            self.attention_pooling.build((None, None, self.encoder_layer.output_dim))
        self.output_dense.build((None, self.text_vector_size))
        self.built = True

    def text_vectors(self, token_ids, training=None):
        """The pooled text vectors `(batch, text_vector_size)` and attention weights (or None)."""
        mask = ops.not_equal(token_ids, PAD_ID)
        x = self.embedding_dropout_layer(self.embedding(token_ids), training=training)
        outputs, states = self.encoder_layer(x, mask=mask, training=training)
        if self.attention_pooling is not None:
            return self.attention_pooling(outputs, mask=mask)
        top = states[-1]
        if not self.encoder_layer.bidirectional:
            return top[0], None
        # Final states are [h, c] (LSTM) or [h] per direction, forward first.
        return ops.concatenate([top[0], top[len(top) // 2]], axis=-1), None

    def call(self, inputs, training=None):
        vectors, _ = self.text_vectors(inputs, training=training)
        return self.output_dense(self.dropout_layer(vectors, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "num_classes": self.num_classes,
                "embedding_dim": self.embedding_dim,
                "embedding_dropout": self.embedding_dropout,
                "encoder": self.encoder,
                "pooling": self.pooling,
                "attention_units": self.attention_units,
                "dropout": self.dropout,
            }
        )
        return config
