import dataclasses

import keras
from keras import ops

from seqtasks.layers import CRF, CharacterCNN, SelfAttentionBlock, StackedRNN
from seqtasks.layers.crf import check_constraints, constraint_scores, viterbi_decode
from seqtasks.models.entity_f1 import EntityF1
from seqtasks.training.losses import ReplicaAware, replica_share
from seqtasks.text.special_ids import PAD_ID, UNK_ID

# As many as `seqtasks.text.token_features` gives (TensorFlow code, kept out of the models).
CASING_CLASSES = 6


def tagger_arguments(
    model_config, word_vocab_size, char_vocab_size, num_tags, seed=None, constraints=None, first_singleton=None,
    tag_names=None,
):
    """`SequenceTagger`'s keyword arguments from a recipe's `model` section (see `SequenceTagger.from_recipe`)."""
    return dict(
        word_vocab_size=word_vocab_size,
        char_vocab_size=char_vocab_size,
        num_tags=num_tags,
        word_embedding_dim=model_config.word_embedding_dim,
        word_dropout=model_config.word_dropout,
        singleton_unk=model_config.singleton_unk,
        first_singleton=first_singleton,
        char_embedding_dim=model_config.char_embedding_dim,
        char_filters=model_config.char_filters,
        char_kernel_size=model_config.char_kernel_size,
        casing=model_config.casing,
        encoder=dataclasses.asdict(model_config.encoder),
        dropout=model_config.dropout,
        output_layer=model_config.output,
        self_attention=model_config.self_attention,
        self_attention_units=model_config.self_attention_units,
        seed=seed,
        tag_names=tag_names,
        **(constraints or {}),
    )


def segment_sums(log_probabilities, mask, tags, starts):
    """Per token, the sum of the chosen tags' log probabilities `(batch, time, num_tags)` since its segment's
    start: a segment's log probability when each token is tagged alone; 0 at padding."""
    tags = ops.where(mask, ops.cast(tags, "int32"), 0)
    chosen = ops.take_along_axis(log_probabilities, ops.expand_dims(tags, -1), axis=-1)[..., 0]
    steps = ops.transpose(ops.stack([chosen, ops.cast(starts, "float32")], axis=-1), (1, 0, 2))

    def segment(total, step):
        total = ops.where(step[:, 1] > 0.5, step[:, 0], total + step[:, 0])
        return total, total

    _, totals = ops.scan(segment, ops.zeros_like(steps[0, :, 0]), steps)
    return ops.where(mask, ops.transpose(totals, (1, 0)), 0.0)


@keras.saving.register_keras_serializable(package="seqtasks")
class SequenceTagger(ReplicaAware, keras.Model):
    """Per-token tags from word, character and casing features, a bidirectional RNN and a CRF.

    Each word is its embedding, a `CharacterCNN` vector of its spelling and a
    one-hot casing class, concatenated -> dropout -> `StackedRNN` returning
    every state -> (a `SelfAttentionBlock`: every state attends over the
    sentence's states) -> dropout -> dense tag scores ("potentials"). With
    `output_layer="crf"` a `CRF` layer scores whole tag paths: training maximises
    the gold path's log-likelihood and `decode` runs Viterbi; with
    `"softmax"` each token is classified alone.

    `allowed_transitions` and `allowed_starts` (e.g. from
    `seqtasks.layers.crf.iob2_constraints(tags)`) restrict what `decode`
    returns to the paths a tag scheme allows, in both modes: the CRF's
    Viterbi search skips forbidden transitions, and the softmax mode decodes
    the allowed path of the highest product of per-token probabilities
    (Viterbi over the log-softmax) instead of each token's own best tag.
    Training is unchanged.

    Args:
        word_vocab_size, char_vocab_size, num_tags: int (id 0 is padding).
        word_embedding_dim: int. word_dropout: float, the chance a training
            word reads as `[UNK]` (id 1).
        singleton_unk: float, the chance a training word seen once in the
            training data reads as `[UNK]`, drawn at each reading (Lample et
            al. 2016); those words are the ids from `first_singleton` on.
        first_singleton: int or None (no word counts as seen once): the
            first word id of the words seen once.
        char_embedding_dim, char_filters, char_kernel_size: the
            `CharacterCNN` (`char_filters=0`: no character features).
        casing: bool, whether to add the casing feature.
        encoder: dict of `StackedRNN` arguments.
        dropout: float. output_layer: `"crf"` or `"softmax"`.
        self_attention: `"none"`, `"luong"` (general score) or `"bahdanau"`.
        self_attention_units: int, the Bahdanau score's hidden size.
        allowed_transitions, allowed_starts: optional booleans as `CRF`
            takes them (`[from][to]`, and per tag); `None` allows all.
        tag_names: optional IOB2 name of each tag id; with them, training
            and validation log the decoded tags' entity F1 (`EntityF1`) as
            `f1` and `val_f1`, which `training.monitor` can follow (the
            loss computation decodes each batch to count them).
        **kwargs: other keyword arguments of `keras.Model`.

    Call arguments:
        inputs: dict with int `"words"` `(batch, time)`, `"characters"`
            `(batch, time, chars)` and `"casing"` `(batch, time)`, 0 at padding.

    Returns:
        Potentials `(batch, time, num_tags)`. `decode(inputs)` returns the
        int32 tags `(batch, time)`, 0 at padding;
        `segment_log_probs(inputs, tags, starts, continuation)` the log
        probability of each segment (entity span) of a tag path. The model
        computes its own loss (`compute_loss`): the CRF's negative
        log-likelihood, or the softmax cross-entropy over real tokens;
        compile it with no `loss`, and under a distribution strategy give it
        the strategy's replicas, `use_replicas(seqtasks.training.distribute.STEP_REPLICAS)`
        (`ReplicaAware`).
    """

    def __init__(
        self,
        word_vocab_size,
        char_vocab_size,
        num_tags,
        word_embedding_dim=100,
        word_dropout=0.0,
        singleton_unk=0.0,
        first_singleton=None,
        char_embedding_dim=30,
        char_filters=50,
        char_kernel_size=3,
        casing=True,
        encoder=None,
        dropout=0.5,
        output_layer="crf",
        seed=None,
        allowed_transitions=None,
        allowed_starts=None,
        self_attention="none",
        self_attention_units=64,
        tag_names=None,
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
        self.singleton_unk = singleton_unk
        self.first_singleton = first_singleton
        self.char_embedding_dim = char_embedding_dim
        self.char_filters = char_filters
        self.char_kernel_size = char_kernel_size
        self.casing = casing
        self.encoder = dict(encoder or {"units": 100, "bidirectional": True})
        self.dropout = dropout
        self.output_layer = output_layer
        self.seed = seed
        self.self_attention = self_attention
        self.self_attention_units = self_attention_units
        self.tag_names = None if tag_names is None else list(tag_names)
        if self.tag_names is not None and len(self.tag_names) != num_tags:
            raise ValueError(f"Expected {num_tags} tag names, one per tag. Received: tag_names={self.tag_names!r}")
        self.entity_f1 = None if self.tag_names is None else EntityF1(self.tag_names, name="f1")
        self.allowed_transitions, self.allowed_starts = check_constraints(num_tags, allowed_transitions, allowed_starts)
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.word_embedding = keras.layers.Embedding(word_vocab_size, word_embedding_dim, dtype=self.dtype_policy, name="word_embedding")
        self.character_cnn = (
            CharacterCNN(char_vocab_size, char_embedding_dim, char_filters, char_kernel_size, dtype=self.dtype_policy, name="character_cnn")
            if char_filters
            else None
        )
        self.input_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="input_dropout")
        self.encoder_layer = StackedRNN(**self.encoder, dtype=self.dtype_policy, name="encoder")
        self.self_attention_block = None
        if self_attention != "none":
            self.self_attention_block = SelfAttentionBlock(
                self_attention, units=self_attention_units, dtype=self.dtype_policy, name="self_attention"
            )
        self.output_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="output_dropout")
        self.potentials = keras.layers.Dense(num_tags, dtype="float32", name="potentials")  # float32 under mixed precision
        self.crf = None
        if output_layer == "crf":
            self.crf = CRF(
                num_tags,
                allowed_transitions=self.allowed_transitions,
                allowed_starts=self.allowed_starts,
                dtype=self.dtype_policy,
                name="crf",
            )

    @classmethod
    def from_recipe(
        cls, model_config, word_vocab_size, char_vocab_size, num_tags, seed=None, constraints=None, first_singleton=None,
        tag_names=None,
    ):
        """The tagger a recipe's `model` section describes; `constraints`: a dict like `iob2_constraints` gives."""
        return cls(
            **tagger_arguments(
                model_config, word_vocab_size, char_vocab_size, num_tags, seed, constraints, first_singleton,
                tag_names,
            )
        )

    @property
    def feature_size(self):
        return self.word_embedding_dim + self.char_filters + (CASING_CLASSES if self.casing else 0)

    def build(self, input_shape=None):
        self.word_embedding.build((None, None))
        if self.character_cnn is not None:
            self.character_cnn.build((None, None, None))
        self.encoder_layer.build((None, None, self.feature_size))
        if self.self_attention_block is not None:
            self.self_attention_block.build((None, None, self.encoder_layer.output_dim))
        self.potentials.build((None, None, self.encoder_layer.output_dim))
        if self.crf is not None:
            self.crf.build((None, None, self.num_tags))
        self.built = True

    def words_read(self, words, training=None):
        """The word ids the embedding reads: in training, some are `[UNK]` (`word_dropout`, `singleton_unk`)."""
        words = ops.cast(words, "int32")
        if training and self.word_dropout > 0:
            dropped = keras.random.uniform(ops.shape(words), seed=self.seed_generator) < self.word_dropout
            words = ops.where(ops.logical_and(dropped, ops.not_equal(words, PAD_ID)), UNK_ID, words)
        if training and self.singleton_unk > 0 and self.first_singleton is not None:
            # Padding (0) and [UNK] (1) are never at or past first_singleton.
            dropped = keras.random.uniform(ops.shape(words), seed=self.seed_generator) < self.singleton_unk
            words = ops.where(ops.logical_and(dropped, words >= self.first_singleton), UNK_ID, words)
        return words

    def call(self, inputs, training=None):
        outputs, _ = self._states(inputs, training)
        return self.potentials(self.output_dropout(outputs, training=training))

    def attention_maps(self, inputs):
        """The self-attention weights over a batch's tokens (inference mode), by name: `{"self_attention":
        (batch, time, time)}` (row i: token i over every token of its sentence), or `{}` without the block."""
        _, weights = self._states(inputs, False)
        return {} if weights is None else {"self_attention": weights}

    def _states(self, inputs, training):
        words = ops.cast(inputs["words"], "int32")
        mask = ops.not_equal(words, PAD_ID)
        features = [self.word_embedding(self.words_read(words, training))]
        if self.character_cnn is not None:
            features.append(self.character_cnn(inputs["characters"], training=training))
        if self.casing:
            features.append(ops.one_hot(ops.cast(inputs["casing"], "int32"), CASING_CLASSES, dtype=features[0].dtype))
        x = self.input_dropout(ops.concatenate(features, axis=-1), training=training)
        outputs, _ = self.encoder_layer(x, mask=mask, training=training)
        if self.self_attention_block is None:
            return outputs, None
        return self.self_attention_block(outputs, mask=mask, training=training)

    def decode(self, inputs):
        """The best tags `(batch, time)` int32 (inference mode), 0 at padding."""
        return self.decode_potentials(inputs)[1]

    def decode_potentials(self, inputs):
        """`(potentials, tags)`: the potentials of a call (inference mode) and the best tags, as `decode`,
        so that `segment_log_probs` can reuse the potentials."""
        potentials = self(inputs, training=False)
        return potentials, self._best_tags(potentials, ops.not_equal(ops.cast(inputs["words"], "int32"), PAD_ID))

    def _best_tags(self, potentials, mask):
        if self.crf is None and self.allowed_transitions is None and self.allowed_starts is None:
            tags = ops.cast(ops.argmax(potentials, axis=-1), "int32")
            return ops.where(mask, tags, ops.zeros_like(tags))
        return viterbi_decode(self.emission_scores(potentials), mask, *self.decoding_scores())[0]

    def emission_scores(self, potentials):
        """The float32 per-token scores that decoding adds up along a path: the potentials with a CRF, their
        log-softmax without."""
        potentials = ops.cast(potentials, "float32")
        return potentials if self.crf is not None else ops.log_softmax(potentials, axis=-1)

    def decoding_scores(self):
        """`(transitions (num_tags, num_tags), start_scores, end_scores)`, float32: what decoding adds to a
        path's `emission_scores`. The CRF's learned scores, or 0 without one; `FORBIDDEN` where the
        constraints forbid a move."""
        if self.crf is not None:
            return self.crf.constrained_scores()
        n = self.num_tags
        return (
            constraint_scores(self.allowed_transitions, (n, n)),
            constraint_scores(self.allowed_starts, (n,)),
            ops.zeros((n,), "float32"),
        )

    def segment_log_probs(self, inputs, tags, starts, continuation, potentials=None):
        """The log probability of each segment of a tag path (inference mode): an entity span's confidence.

        Args:
            inputs: the model's inputs, as for a call.
            tags: `(batch, time)` int tag path, e.g. what `decode` returns.
            starts: `(batch, time)` bool, `True` where a segment begins (the
                first token always begins one).
            continuation: `(num_tags,)` int, the tag that continues a segment
                ending in each tag (IOB2: `I-X` for `B-X` and `I-X`), -1 for
                none; only the CRF uses it.
            potentials: optional, the potentials `decode_potentials` gave for
                `inputs`, so the encoder does not run again.

        Returns:
            `(batch, time)` float32, 0 at padding. At each token `t`, with `s`
            the start of its segment: with a CRF, the log probability that
            tokens `s..t` have `tags[s..t]` and the next tag does not continue
            them (`CRF.segment_log_probs`, under the decoding constraints);
            with softmax output, the sum of the tokens' log probabilities of
            `tags[s..t]`, each token being tagged alone. Read at a segment's
            last token, it is the log probability that the segment is right.
        """
        if potentials is None:
            potentials = self(inputs, training=False)
        mask = ops.not_equal(ops.cast(inputs["words"], "int32"), PAD_ID)
        if self.crf is not None:
            return self.crf.segment_log_probs(potentials, tags, starts, continuation, mask=mask)
        return segment_sums(ops.log_softmax(ops.cast(potentials, "float32"), axis=-1), mask, tags, starts)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        mask = ops.not_equal(ops.cast(x["words"], "int32"), PAD_ID)
        # On several replicas (those `use_replicas` gave) each mean is weighted by the replica's share of
        # the sentences or tokens, and divided by the replica count as Keras losses are, since the
        # replicas' gradients are summed: the step then averages over the whole global batch.
        if self.crf is not None:
            log_likelihood = self.crf.log_likelihood(y_pred, y, mask)
            # A replica can get no sentence of an odd global batch: its share is 0, not a mean of nothing.
            count = ops.cast(ops.shape(log_likelihood)[0], "float32")
            loss = -ops.sum(log_likelihood) / ops.maximum(count, 1.0) * replica_share(count, self.replicas)
        else:
            weights = ops.cast(mask, "float32")
            per_token = keras.losses.sparse_categorical_crossentropy(y, ops.cast(y_pred, "float32"), from_logits=True)
            count = ops.sum(weights)
            loss = ops.sum(per_token * weights) / ops.maximum(count, 1.0) * replica_share(count, self.replicas)
        losses = self.losses
        if losses:
            loss = loss + ops.sum(losses)
        if self.entity_f1 is not None:
            # Here rather than in `compute_metrics`: under JAX only the loss's scope can read the CRF's weights.
            self.entity_f1.update_state(y, self._best_tags(y_pred, mask), mask)
        return loss / self.replicas.count()

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "word_vocab_size": self.word_vocab_size,
                "char_vocab_size": self.char_vocab_size,
                "num_tags": self.num_tags,
                "word_embedding_dim": self.word_embedding_dim,
                "word_dropout": self.word_dropout,
                "singleton_unk": self.singleton_unk,
                "first_singleton": self.first_singleton,
                "char_embedding_dim": self.char_embedding_dim,
                "char_filters": self.char_filters,
                "char_kernel_size": self.char_kernel_size,
                "casing": self.casing,
                "encoder": self.encoder,
                "dropout": self.dropout,
                "output_layer": self.output_layer,
                "seed": self.seed,
                "allowed_transitions": self.allowed_transitions,
                "allowed_starts": self.allowed_starts,
                "self_attention": self.self_attention,
                "self_attention_units": self.self_attention_units,
                "tag_names": self.tag_names,
            }
        )
        return config
