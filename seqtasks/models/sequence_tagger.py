import dataclasses

import keras
from keras import ops

from seqtasks.distribute import replicas_in_step
from seqtasks.layers import CRF, CharacterCNN, StackedRNN
from seqtasks.losses import replica_share
from seqtasks.special_ids import PAD_ID, UNK_ID

# As many as `seqtasks.text.token_features` gives (TensorFlow code, kept out of the models).
CASING_CLASSES = 6


@keras.saving.register_keras_serializable(package="seqtasks")
class SequenceTagger(keras.Model):
    """Per-token tags from word, character and casing features, a bidirectional RNN and a CRF.

    Each word is its embedding, a `CharacterCNN` vector of its spelling and a
    one-hot casing class, concatenated -> dropout -> `StackedRNN` returning
    every state -> dropout -> dense tag scores ("potentials"). With
    `output_layer="crf"` a `CRF` layer scores whole tag paths: training maximises
    the gold path's log-likelihood and `decode` runs Viterbi; with
    `"softmax"` each token is classified alone.

    Args:
        word_vocab_size, char_vocab_size, num_tags: int (id 0 is padding).
        word_embedding_dim: int. word_dropout: float, the chance a training
            word reads as `[UNK]` (id 1).
        char_embedding_dim, char_filters, char_kernel_size: the
            `CharacterCNN` (`char_filters=0`: no character features).
        casing: bool, whether to add the casing feature.
        encoder: dict of `StackedRNN` arguments.
        dropout: float. output_layer: `"crf"` or `"softmax"`.
        **kwargs: other keyword arguments of `keras.Model`.

    Call arguments:
        inputs: dict with int `"words"` `(batch, time)`, `"characters"`
            `(batch, time, chars)` and `"casing"` `(batch, time)`, 0 at padding.

    Returns:
        Potentials `(batch, time, num_tags)`. `decode(inputs)` returns the
        int32 tags `(batch, time)`, 0 at padding. The model computes its own
        loss (`compute_loss`): the CRF's negative log-likelihood, or the
        softmax cross-entropy over real tokens; compile it with no `loss`.
    """

    def __init__(
        self,
        word_vocab_size,
        char_vocab_size,
        num_tags,
        word_embedding_dim=100,
        word_dropout=0.0,
        char_embedding_dim=30,
        char_filters=50,
        char_kernel_size=3,
        casing=True,
        encoder=None,
        dropout=0.5,
        output_layer="crf",
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if output_layer not in ("crf", "softmax"):
            raise ValueError(f"Expected one of {{'crf', 'softmax'}}. Received: output_layer={output_layer!r}")
        self.word_vocab_size = word_vocab_size
        self.char_vocab_size = char_vocab_size
        self.num_tags = num_tags
        self.word_embedding_dim = word_embedding_dim
        self.word_dropout = word_dropout
        self.char_embedding_dim = char_embedding_dim
        self.char_filters = char_filters
        self.char_kernel_size = char_kernel_size
        self.casing = casing
        self.encoder = dict(encoder or {"units": 100, "bidirectional": True})
        self.dropout = dropout
        self.output_layer = output_layer
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.word_embedding = keras.layers.Embedding(word_vocab_size, word_embedding_dim, dtype=self.dtype_policy, name="word_embedding")
        self.character_cnn = (
            CharacterCNN(char_vocab_size, char_embedding_dim, char_filters, char_kernel_size, dtype=self.dtype_policy, name="character_cnn")
            if char_filters
            else None
        )
        self.input_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="input_dropout")
        self.encoder_layer = StackedRNN(**self.encoder, dtype=self.dtype_policy, name="encoder")
        self.output_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="output_dropout")
        self.potentials = keras.layers.Dense(num_tags, dtype="float32", name="potentials")  # float32 under mixed precision
        self.crf = CRF(num_tags, dtype=self.dtype_policy, name="crf") if output_layer == "crf" else None

    @classmethod
    def from_recipe(cls, model_config, word_vocab_size, char_vocab_size, num_tags, seed=None):
        return cls(
            word_vocab_size,
            char_vocab_size,
            num_tags,
            word_embedding_dim=model_config.word_embedding_dim,
            word_dropout=model_config.word_dropout,
            char_embedding_dim=model_config.char_embedding_dim,
            char_filters=model_config.char_filters,
            char_kernel_size=model_config.char_kernel_size,
            casing=model_config.casing,
            encoder=dataclasses.asdict(model_config.encoder),
            dropout=model_config.dropout,
            output_layer=model_config.output,
            seed=seed,
        )

    @property
    def feature_size(self):
        return self.word_embedding_dim + self.char_filters + (CASING_CLASSES if self.casing else 0)

    def build(self, input_shape=None):
        self.word_embedding.build((None, None))
        if self.character_cnn is not None:
            self.character_cnn.build((None, None, None))
        self.encoder_layer.build((None, None, self.feature_size))
        self.potentials.build((None, None, self.encoder_layer.output_dim))
        if self.crf is not None:
            self.crf.build((None, None, self.num_tags))
        self.built = True

    def call(self, inputs, training=None):
        words = ops.cast(inputs["words"], "int32")
        mask = ops.not_equal(words, PAD_ID)
        if training and self.word_dropout > 0:
            dropped = keras.random.uniform(ops.shape(words), seed=self.seed_generator) < self.word_dropout
            words = ops.where(ops.logical_and(dropped, mask), UNK_ID, words)
        features = [self.word_embedding(words)]
        if self.character_cnn is not None:
            features.append(self.character_cnn(inputs["characters"], training=training))
        if self.casing:
            features.append(ops.one_hot(ops.cast(inputs["casing"], "int32"), CASING_CLASSES, dtype=features[0].dtype))
        x = self.input_dropout(ops.concatenate(features, axis=-1), training=training)
        outputs, _ = self.encoder_layer(x, mask=mask, training=training)
        return self.potentials(self.output_dropout(outputs, training=training))

    def decode(self, inputs):
        """The best tags `(batch, time)` int32 (inference mode), 0 at padding."""
        potentials = self(inputs, training=False)
        mask = ops.not_equal(ops.cast(inputs["words"], "int32"), PAD_ID)
        if self.crf is not None:
            return self.crf(potentials, mask=mask)[0]
        tags = ops.cast(ops.argmax(potentials, axis=-1), "int32")
        return ops.where(mask, tags, ops.zeros_like(tags))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        mask = ops.not_equal(ops.cast(x["words"], "int32"), PAD_ID)
        # On several replicas each mean is weighted by the replica's share of the sentences or
        # tokens, and divided by the replica count as Keras losses are, since the replicas'
        # gradients are summed: the step then averages over the whole global batch.
        if self.crf is not None:
            log_likelihood = self.crf.log_likelihood(y_pred, y, mask)
            # A replica can get no sentence of an odd global batch: its share is 0, not a mean of nothing.
            count = ops.cast(ops.shape(log_likelihood)[0], "float32")
            loss = -ops.sum(log_likelihood) / ops.maximum(count, 1.0) * replica_share(count)
        else:
            weights = ops.cast(mask, "float32")
            per_token = keras.losses.sparse_categorical_crossentropy(y, ops.cast(y_pred, "float32"), from_logits=True)
            count = ops.sum(weights)
            loss = ops.sum(per_token * weights) / ops.maximum(count, 1.0) * replica_share(count)
        losses = self.losses
        if losses:
            loss = loss + ops.sum(losses)
        return loss / replicas_in_step()

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "word_vocab_size": self.word_vocab_size,
                "char_vocab_size": self.char_vocab_size,
                "num_tags": self.num_tags,
                "word_embedding_dim": self.word_embedding_dim,
                "word_dropout": self.word_dropout,
                "char_embedding_dim": self.char_embedding_dim,
                "char_filters": self.char_filters,
                "char_kernel_size": self.char_kernel_size,
                "casing": self.casing,
                "encoder": self.encoder,
                "dropout": self.dropout,
                "output_layer": self.output_layer,
                "seed": self.seed,
            }
        )
        return config
