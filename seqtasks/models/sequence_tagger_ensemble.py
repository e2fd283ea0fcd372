import keras
from keras import ops

from seqtasks.layers.crf import segment_log_probs as crf_segment_log_probs
from seqtasks.layers.crf import viterbi_decode
from seqtasks.models.ensemble import check_member_count
from seqtasks.models.entity_f1 import EntityF1
from seqtasks.models.sequence_tagger import SequenceTagger, segment_sums, tagger_arguments
from seqtasks.text.special_ids import PAD_ID
from seqtasks.training.losses import ReplicaAware


@keras.saving.register_keras_serializable(package="seqtasks")
class SequenceTaggerEnsemble(ReplicaAware, keras.Model):
    """`members` independently initialised `SequenceTagger`s of the same settings, decoding together.

    Every member reads the same batch with its own weights, dropout and word
    dropout, and is trained by its own loss term: the training loss is the
    sum of the members' losses, so each member's gradients are those it
    would get trained alone. Decoding uses the mean of the members' scores:
    with a CRF, the mean of their potentials and of their (constrained)
    transition, start and end scores, which is the CRF of the normalised
    geometric mean of the members' path distributions (a product of
    experts); with softmax output, the mean of their per-token
    log-probabilities. `decode`, `decode_potentials`, `segment_log_probs`
    and `attention_maps` then behave as a `SequenceTagger`'s, so the
    ensemble evaluates and serves like one tagger.

    Args:
        members: int >= 2, the number of taggers.
        tagger: dict of `SequenceTagger` arguments, the same for every
            member, except `seed`: member `i` gets `seed + i` (`None` stays
            `None`), so that no two draw the same dropout. With
            `tag_names`, training and validation log the entity F1 of the
            ensemble's decoded tags as `f1` and `val_f1`.
        **kwargs: other keyword arguments of `keras.Model`.

    Call arguments:
        inputs: dict of `"words"`, `"characters"` and `"casing"`, as for a
            `SequenceTagger`.
        training: bool.

    Returns:
        Every member's potentials `(batch, members, time, num_tags)`.
        `decode(inputs)` returns the int32 tags `(batch, time)` of the mean
        scores, 0 at padding; `decode_potentials(inputs)` the mean emission
        scores `(batch, time, num_tags)` and those tags. The model computes
        its own loss (`compute_loss`); compile it with no `loss`.

    Example:

    >>> ensemble = SequenceTaggerEnsemble(2, {"word_vocab_size": 20, "char_vocab_size": 10, "num_tags": 3,
    ...                                        "encoder": {"units": 4, "bidirectional": True}})
    >>> inputs = {"words": np.array([[5, 6, 0]]), "characters": np.ones((1, 3, 4), "int32"),
    ...           "casing": np.zeros((1, 3), "int32")}
    >>> tuple(ensemble(inputs).shape), tuple(ensemble.decode(inputs).shape)
    ((1, 2, 3, 3), (1, 3))

    Reference:
        Dietterich, "Ensemble Methods in Machine Learning", MCS 2000;
        Reimers & Gurevych, "Reporting Score Distributions Makes a
        Difference: Performance Study of LSTM-networks for Sequence Tagging",
        EMNLP 2017 (the spread of single BiLSTM-CRF taggers across seeds).
    """

    def __init__(self, members, tagger, **kwargs):
        super().__init__(**kwargs)
        check_member_count(members)
        self.members = members
        self.tagger = dict(tagger)
        seed = self.tagger.get("seed")
        # The ensemble counts the entities of its own decoding: its members count none.
        self.member_models = [
            SequenceTagger(
                **{**self.tagger, "seed": None if seed is None else seed + index, "tag_names": None},
                dtype=self.dtype_policy,
                name=f"member_{index}",
            )
            for index in range(members)
        ]
        self.output_layer = self.member_models[0].output_layer
        self.num_tags = self.member_models[0].num_tags
        tag_names = self.tagger.get("tag_names")
        self.entity_f1 = None if tag_names is None else EntityF1(tag_names, name="f1")

    @classmethod
    def from_recipe(
        cls, model_config, word_vocab_size, char_vocab_size, num_tags, seed=None, constraints=None, first_singleton=None,
        tag_names=None,
    ):
        """The ensemble of `model_config.ensemble` taggers a recipe's `model` section describes."""
        arguments = tagger_arguments(
            model_config, word_vocab_size, char_vocab_size, num_tags, seed, constraints, first_singleton, tag_names
        )
        return cls(model_config.ensemble, arguments)

    def build(self, input_shape=None):
        for member in self.member_models:
            if not member.built:
                member.build()
        self.built = True

    def use_replicas(self, replicas):
        super().use_replicas(replicas)
        for member in self.member_models:
            member.use_replicas(replicas)

    def call(self, inputs, training=None):
        return ops.stack([member(inputs, training=training) for member in self.member_models], axis=1)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        loss = sum(
            member.compute_loss(x, y, y_pred[:, index], sample_weight, training=training)
            for index, member in enumerate(self.member_models)
        )
        if self.entity_f1 is not None:  # in the loss's scope, as `SequenceTagger.compute_loss` counts them
            mask = self._mask(x)
            self.entity_f1.update_state(y, self._decode_members(y_pred, mask)[1], mask)
        return loss

    def decode(self, inputs):
        """The best tags `(batch, time)` int32 under the mean scores (inference mode), 0 at padding."""
        return self.decode_potentials(inputs)[1]

    def decode_potentials(self, inputs):
        """`(scores, tags)`: the mean emission scores `(batch, time, num_tags)` (inference mode) and the best
        tags under them, as `decode`; `segment_log_probs` takes the scores back as `potentials`."""
        return self._decode_members(self(inputs, training=False), self._mask(inputs))

    def _decode_members(self, potentials, mask):
        emissions = ops.mean(
            ops.stack(
                [member.emission_scores(potentials[:, index]) for index, member in enumerate(self.member_models)]
            ),
            axis=0,
        )
        return emissions, viterbi_decode(emissions, mask, *self.decoding_scores())[0]


    def decoding_scores(self):
        """The mean over the members of their `SequenceTagger.decoding_scores`."""
        scores = [member.decoding_scores() for member in self.member_models]
        return tuple(ops.mean(ops.stack(parts), axis=0) for parts in zip(*scores))

    def segment_log_probs(self, inputs, tags, starts, continuation, potentials=None):
        """The log probability of each segment of a tag path under the ensemble's distribution (see
        `SequenceTagger.segment_log_probs`); `potentials`: the scores `decode_potentials` gave."""
        if potentials is None:
            potentials = self.decode_potentials(inputs)[0]
        mask = self._mask(inputs)
        if self.output_layer == "crf":
            return crf_segment_log_probs(potentials, mask, *self.decoding_scores(), tags, starts, continuation)
        return segment_sums(ops.log_softmax(potentials, axis=-1), mask, tags, starts)

    def attention_maps(self, inputs):
        """The members' self-attention weights averaged, by name (`SequenceTagger.attention_maps`); `{}` without."""
        maps = [member.attention_maps(inputs) for member in self.member_models]
        return {name: ops.mean(ops.stack([member_maps[name] for member_maps in maps]), axis=0) for name in maps[0]}

    @staticmethod
    def _mask(inputs):
        return ops.not_equal(ops.cast(inputs["words"], "int32"), PAD_ID)

    def get_config(self):
        config = super().get_config()
        config.update({"members": self.members, "tagger": self.tagger})
        return config
