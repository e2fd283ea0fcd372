import keras
from keras import ops

from seqtasks.layers._validation import check_positive_int, check_rate


@keras.saving.register_keras_serializable(package="seqtasks")
class CharacterCNN(keras.layers.Layer):
    """One vector per word from its characters: embeddings, a convolution, max pooling.

    Words unseen in training still get a representation of their spelling
    (capitals, suffixes, digits), which is what lets a tagger recognise new
    names. Character id 0 is padding and is left out of the pooling.

    Args:
        vocab_size: int, the number of character ids (0 is padding).
        embedding_dim: int, the size of each character embedding.
        filters: int, the number of convolution filters: the output size.
        kernel_size: int, how many characters each filter reads.
        dropout: float, dropout on the character embeddings.
        **kwargs: other keyword arguments of `keras.layers.Layer`.

    Call arguments:
        inputs: int `(batch, words, characters)`, 0 after each word's end
            and for padded words.
        training: bool, whether dropout is active.

    Returns:
        `(batch, words, filters)` in the layer's compute dtype: zeros for
        words with no characters.

    Example:

    >>> cnn = CharacterCNN(vocab_size=50, embedding_dim=8, filters=16)
    >>> tuple(cnn(np.ones((2, 7, 12), "int32")).shape)
    (2, 7, 16)

    Reference:
        Ma & Hovy, "End-to-end Sequence Labeling via Bi-directional
        LSTM-CNNs-CRF", ACL 2016. https://arxiv.org/abs/1603.01354
    """

    def __init__(self, vocab_size, embedding_dim=30, filters=30, kernel_size=3, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        check_positive_int(vocab_size, "vocab_size")
        check_positive_int(embedding_dim, "embedding_dim")
        check_positive_int(filters, "filters")
        check_positive_int(kernel_size, "kernel_size")
        check_rate(dropout, "dropout")
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.filters = filters
        self.kernel_size = kernel_size
        self.dropout = float(dropout)

    def build(self, inputs_shape):
        self.embedding = keras.layers.Embedding(
            self.vocab_size, self.embedding_dim, dtype=self.dtype_policy, name="embedding"
        )
        self.embedding.build(inputs_shape)
        self.embedding_dropout = keras.layers.Dropout(
            self.dropout, dtype=self.dtype_policy, name="embedding_dropout"
        )
        self.convolution = keras.layers.Conv1D(
            self.filters,
            self.kernel_size,
            padding="same",
            activation="tanh",
            dtype=self.dtype_policy,
            name="convolution",
        )
        self.convolution.build((None, None, self.embedding_dim))
        self.built = True

    def call(self, inputs, training=None):
        shape = ops.shape(inputs)
        characters = ops.reshape(inputs, (-1, shape[-1]))
        real = ops.expand_dims(ops.not_equal(characters, 0), -1)
        x = self.embedding_dropout(self.embedding(characters), training=training)
        # Zeros at padding, like the convolution's own zero padding, so trailing
        # padding characters do not change a word's vector.
        x = self.convolution(x * ops.cast(real, x.dtype))
        # tanh lies in (-1, 1): -2 at padding never wins the max, and empty words give 0.
        pooled = ops.max(ops.where(real, x, ops.full_like(x, -2.0)), axis=1)
        pooled = ops.where(ops.any(real, axis=1), pooled, ops.zeros_like(pooled))
        return ops.reshape(pooled, (shape[0], shape[1], self.filters))

    def compute_output_spec(self, inputs, training=None):
        return keras.KerasTensor((inputs.shape[0], inputs.shape[1], self.filters), dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "embedding_dim": self.embedding_dim,
                "filters": self.filters,
                "kernel_size": self.kernel_size,
                "dropout": self.dropout,
            }
        )
        return config
