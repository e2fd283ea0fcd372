import dataclasses
import math

import keras
import numpy as np
from keras import ops

from seqtasks.layers import AttentionPooling, SelfAttentionBlock, StackedRNN, StructuredSelfAttention
from seqtasks.models.ensemble import check_member_count
from seqtasks.text.special_ids import PAD_ID

POOLINGS = ("last", "attention", "max", "structured")
SELF_ATTENTION = ("none", "luong", "bahdanau")


def classifier_arguments(model_config, vocab_size, num_classes):
    """`TextClassifier` arguments from a recipe's `TextClassifierModelConfig`."""
    return {
        "vocab_size": vocab_size,
        "num_classes": num_classes,
        "embedding_dim": model_config.embedding_dim,
        "embedding_dropout": model_config.embedding_dropout,
        "encoder": dataclasses.asdict(model_config.encoder),
        "pooling": model_config.pooling,
        "attention_units": model_config.attention_units,
        "dropout": model_config.dropout,
        "self_attention": model_config.self_attention,
        "hops": model_config.hops,
        "hop_penalty": model_config.hop_penalty,
    }


def _choices(values):
    return "{" + ", ".join(repr(value) for value in values) + "}"


def masked_max(outputs, mask):
    """The largest value of each feature of `outputs` `(batch, time, features)` over the steps where `mask` is True.

    Padding never wins, even where every real value is below the padded
    ones; a row without any real step pools to zeros.
    """
    lowest = np.finfo(keras.backend.standardize_dtype(outputs.dtype)).min
    largest = ops.max(ops.where(ops.expand_dims(mask, -1), outputs, ops.cast(lowest, outputs.dtype)), axis=1)
    return ops.where(ops.any(mask, axis=1, keepdims=True), largest, ops.zeros_like(largest))


@keras.saving.register_keras_serializable(package="seqtasks")
class TextClassifier(keras.Model):
    """Token ids -> class logits, from an RNN's last real state, attention pooling, max pooling or several hops.

    Embedding -> `StackedRNN` -> (a `SelfAttentionBlock`) -> a text vector ->
    dropout -> dense logits. With `pooling="last"` the text vector is the
    top layer's final hidden state at each text's last real token (forward
    and backward states concatenated when bidirectional); with `"attention"`
    it is an `AttentionPooling` average of all top-layer outputs; with
    `"max"` the largest value of each feature over the real steps; with
    `"structured"` the `hops` averages of a `StructuredSelfAttention` (Lin
    et al. 2017), side by side. With `self_attention` (`"luong"`,
    `"bahdanau"`) every output first attends over the text's other outputs.
    Id 0 is padding and never reaches the result: a padded batch classifies
    exactly like its texts one by one.

    Args:
        vocab_size: int. num_classes: int.
        embedding_dim: int. embedding_dropout: float.
        encoder: dict of `StackedRNN` arguments.
        pooling: `"last"`, `"attention"`, `"max"` or `"structured"`.
        attention_units: int, the pooling's (and the block's) hidden size.
        dropout: float, before the output layer.
        self_attention: `"none"`, `"luong"` (general score) or `"bahdanau"`.
        hops: int, the structured pooling's hops. hop_penalty: float, the
            weight of its penalty on overlapping hops.
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
        self_attention="none",
        hops=4,
        hop_penalty=1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if pooling not in POOLINGS:
            raise ValueError(f"Expected one of {_choices(POOLINGS)}. Received: pooling={pooling!r}")
        if self_attention not in SELF_ATTENTION:
            raise ValueError(f"Expected one of {_choices(SELF_ATTENTION)}. Received: self_attention={self_attention!r}")
        if self_attention != "none" and pooling == "last":
            raise ValueError("Expected pooling 'attention', 'max' or 'structured' with self_attention: 'last' reads "
                             "the encoder's final states, which the block does not change. Received: pooling='last'")
        self.vocab_size = vocab_size
        self.num_classes = num_classes
        self.embedding_dim = embedding_dim
        self.embedding_dropout = embedding_dropout
        self.encoder = dict(encoder or {"units": 64})
        self.pooling = pooling
        self.attention_units = attention_units
        self.dropout = dropout
        self.self_attention = self_attention
        self.hops = hops
        self.hop_penalty = hop_penalty
        self.embedding = keras.layers.Embedding(vocab_size, embedding_dim, mask_zero=True, dtype=self.dtype_policy, name="embedding")
        self.embedding_dropout_layer = keras.layers.Dropout(embedding_dropout, dtype=self.dtype_policy, name="embedding_dropout")
        self.encoder_layer = StackedRNN(**self.encoder, dtype=self.dtype_policy, name="encoder")
        self.self_attention_block = None
        if self_attention != "none":
            self.self_attention_block = SelfAttentionBlock(
                self_attention, units=attention_units, dtype=self.dtype_policy, name="self_attention"
            )
        self.attention_pooling = None
        if pooling == "attention":
            self.attention_pooling = AttentionPooling(attention_units, dtype=self.dtype_policy, name="attention_pooling")
        elif pooling == "structured":
            self.attention_pooling = StructuredSelfAttention(
                hops, attention_units, hop_penalty, dtype=self.dtype_policy, name="structured_attention"
            )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")
        self.output_dense = keras.layers.Dense(num_classes, dtype="float32", name="logits")  # float32 under mixed precision

    @classmethod
    def from_recipe(cls, model_config, vocab_size, num_classes):
        return cls(**classifier_arguments(model_config, vocab_size, num_classes))

    @property
    def text_vector_size(self):
        if self.pooling == "structured":
            return self.hops * self.encoder_layer.output_dim
        if self.pooling in ("attention", "max"):
            return self.encoder_layer.output_dim
        return self.encoder_layer.units * (2 if self.encoder_layer.bidirectional else 1)

    def build(self, input_shape=None):
        self.embedding.build((None, None))
        self.encoder_layer.build((None, None, self.embedding_dim))
        if self.self_attention_block is not None:
            self.self_attention_block.build((None, None, self.encoder_layer.output_dim))
        if self.attention_pooling is not None:
            self.attention_pooling.build((None, None, self.encoder_layer.output_dim))
        self.output_dense.build((None, self.text_vector_size))
        self.built = True

    def text_vectors(self, token_ids, training=None):
        """The pooled text vectors `(batch, text_vector_size)` and the pooling's weights over the tokens
        `(batch, time)` (the mean of a structured pooling's hops), or None."""
        mask = ops.not_equal(token_ids, PAD_ID)
        x = self.embedding_dropout_layer(self.embedding(token_ids), training=training)
        outputs, states = self.encoder_layer(x, mask=mask, training=training)
        if self.self_attention_block is not None:
            outputs, _ = self.self_attention_block(outputs, mask=mask, training=training)
        if self.pooling == "structured":
            vectors, weights = self.attention_pooling(outputs, mask=mask, training=training)
            return vectors, ops.mean(weights, axis=1)
        if self.attention_pooling is not None:
            return self.attention_pooling(outputs, mask=mask)
        if self.pooling == "max":
            return masked_max(outputs, mask), None
        top = states[-1]
        if not self.encoder_layer.bidirectional:
            return top[0], None
        # Final states are [h, c] (LSTM) or [h] per direction, forward first.
        return ops.concatenate([top[0], top[len(top) // 2]], axis=-1), None

    def attention_maps(self, token_ids):
        """Every attention weight over a batch's tokens (inference mode), by name, each `(batch, rows, time)`:
        `"self_attention"` (row i: token i over every token), `"pooling"` (attention pooling's one row) or
        `"hops"` (a structured pooling's row per hop); `{}` for last-state or max pooling alone."""
        mask = ops.not_equal(token_ids, PAD_ID)
        outputs, _ = self.encoder_layer(self.embedding(token_ids), mask=mask)
        maps = {}
        if self.self_attention_block is not None:
            outputs, maps["self_attention"] = self.self_attention_block(outputs, mask=mask)
        if self.pooling == "structured":
            maps["hops"] = self.attention_pooling(outputs, mask=mask)[1]
        elif self.attention_pooling is not None:
            maps["pooling"] = ops.expand_dims(self.attention_pooling(outputs, mask=mask)[1], 1)
        return maps

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
                "self_attention": self.self_attention,
                "hops": self.hops,
                "hop_penalty": self.hop_penalty,
            }
        )
        return config


def mean_probability_logits(member_logits):
    """Logits `(batch, classes)` whose softmax is the mean of the members' softmaxes, from `(batch, members, classes)`.

    `log(mean_m softmax(z_m))`, computed as a log-sum-exp of log-softmaxes in
    float32, so that no member's small probabilities underflow.
    """
    log_probabilities = ops.log_softmax(ops.cast(member_logits, "float32"), axis=-1)
    return ops.logsumexp(log_probabilities, axis=1) - math.log(member_logits.shape[1])


@keras.saving.register_keras_serializable(package="seqtasks")
class TextClassifierEnsemble(keras.Model):
    """`members` independently initialised `TextClassifier`s of the same settings, predicting their mean probabilities.

    Every member reads the same batch and has its own weights and dropout.
    Outside training the output is one set of logits whose softmax is the
    mean of the members' class probabilities, so the ensemble predicts,
    validates and serves like one `TextClassifier`. In training the output
    is every member's logits, for a loss that sums one term per member
    (`seqtasks.tasks.sentiment.training.MemberCrossentropy`): each
    member's gradients are those it would get trained alone.

    Args:
        members: int >= 2, the number of classifiers.
        classifier: dict of `TextClassifier` arguments, the same for every
            member.
        **kwargs: other keyword arguments of `keras.Model`.

    Call arguments:
        inputs: int `(batch, time)` token ids.
        training: bool; when True the members' own logits are returned.

    Returns:
        Logits `(batch, num_classes)` of the mean probabilities, or the
        members' logits `(batch, members, num_classes)` when training.

    Example:

    >>> ensemble = TextClassifierEnsemble(3, {"vocab_size": 50, "num_classes": 2, "encoder": {"units": 4}})
    >>> tuple(ensemble(np.array([[5, 6, 0]], "int32")).shape)
    (1, 2)

    Reference:
        Dietterich, "Ensemble Methods in Machine Learning", MCS 2000;
        Lakshminarayanan, Pritzel & Blundell, "Simple and Scalable Predictive
        Uncertainty Estimation using Deep Ensembles", NeurIPS 2017.
    """

    def __init__(self, members, classifier, **kwargs):
        super().__init__(**kwargs)
        check_member_count(members)
        self.members = members
        self.classifier = dict(classifier)
        self.num_classes = self.classifier["num_classes"]
        self.member_models = [
            TextClassifier(**self.classifier, dtype=self.dtype_policy, name=f"member_{index}")
            for index in range(members)
        ]

    @classmethod
    def from_recipe(cls, model_config, vocab_size, num_classes):
        return cls(model_config.ensemble, classifier_arguments(model_config, vocab_size, num_classes))

    def build(self, input_shape=None):
        for member in self.member_models:
            if not member.built:
                # No shape, as for a classifier alone: a SavedModel then traces no signature of its own for it.
                member.build()
        self.built = True

    def member_logits(self, inputs, training=None):
        """Every member's logits, `(batch, members, num_classes)`."""
        return ops.stack([member(inputs, training=training) for member in self.member_models], axis=1)

    def call(self, inputs, training=None):
        logits = self.member_logits(inputs, training=training)
        return logits if training else mean_probability_logits(logits)

    def get_config(self):
        config = super().get_config()
        config.update({"members": self.members, "classifier": self.classifier})
        return config
