import keras
from keras import ops

from seqtasks.models.ensemble import EnsembleDecoding, check_member_count
from seqtasks.models.image_captioner import ImageCaptioner
from seqtasks.text.special_ids import PAD_ID
from seqtasks.training.losses import ReplicaAware, replica_share


@keras.saving.register_keras_serializable(package="seqtasks")
class ImageCaptionerEnsemble(EnsembleDecoding, ReplicaAware, keras.Model):
    """`members` independently initialised `ImageCaptioner`s of the same settings, trained in one run.

    Every member reads the same batch with its own weights and dropout and is
    trained by its own loss term: the training loss is the sum of the
    members' losses (each the compiled per-token loss averaged over the real
    caption tokens, plus the member's attention penalty), so each member's
    gradients are those it would get trained alone. Decoding, attention maps
    and serving are an ensemble's (`EnsembleDecoding`): each step's
    log-probabilities are the mean of the members'. The compiled metrics
    read the mean of the members' log-probabilities, with padding left out.

    Args:
        members: int >= 2, the number of captioners.
        captioner: dict of `ImageCaptioner` arguments, the same for every
            member, except the decoder's `seed`: member `i` gets `seed + i`
            (`None` stays `None`), so that no two draw the same dropout. No
            `grid_head`: members cannot share a fine-tuned backbone stage.
        **kwargs: other keyword arguments of `keras.Model`.

    Call arguments:
        inputs: a tuple `(images, target_input_ids)`, as for an
            `ImageCaptioner`.
        training: bool.

    Returns:
        Every member's logits `(batch, members, T, vocab_size)`. Compile it
        with a per-token loss from logits (a `keras.losses.Loss`, such as
        `SmoothedSparseCrossentropy`); `compute_loss` applies it to each
        member.

    Example:

    >>> import numpy as np
    >>> from seqtasks.decoding import search
    >>> ensemble = ImageCaptionerEnsemble(2, {"vocab_size": 30, "embedding_dim": 8,
    ...                                       "decoder": {"units": 16, "attention": "bahdanau"}})
    >>> grid = np.random.rand(2, 49, 32).astype("float32")
    >>> tuple(ensemble((grid, np.array([[2, 5, 6], [2, 7, 0]]))).shape)
    (2, 2, 3, 30)
    >>> ids, lengths, scores = search(ensemble, grid, {"beam_width": 3, "max_length": 5})
    >>> tuple(ids.shape)
    (2, 5)

    Reference:
        Vinyals et al., "Show and Tell: Lessons learned from the 2015 MSCOCO
        Image Captioning Challenge", TPAMI 2017 (ensembles of captioners
        trained from different initialisations).
    """

    def __init__(self, members, captioner, **kwargs):
        super().__init__(**kwargs)
        check_member_count(members)
        if captioner.get("grid_head") is not None:
            raise ValueError("Expected a captioner without grid_head: members cannot share a fine-tuned backbone "
                             "stage. Received: grid_head")
        self.members = members
        self.captioner = dict(captioner)
        decoder = self.captioner.get("decoder")
        seed = None if decoder is None else decoder.get("seed")

        def member_decoder(index):
            if decoder is None:
                return None
            return {**decoder, "seed": None if seed is None else seed + index}

        self.member_models = [
            ImageCaptioner(
                **{**self.captioner, "decoder": member_decoder(index)}, dtype=self.dtype_policy, name=f"member_{index}"
            )
            for index in range(members)
        ]
        self.padding_mask = keras.layers.Masking(0.0, dtype="float32", name="padding_mask")

    def build(self, input_shape=None):
        for member in self.member_models:
            if not member.built:
                member.build(input_shape)
        self.built = True

    def use_replicas(self, replicas):
        super().use_replicas(replicas)
        for member in self.member_models:
            member.use_replicas(replicas)

    def set_training_progress(self, fraction):
        """Passes the fraction of training done to every member (`ImageCaptioner.set_training_progress`)."""
        for member in self.member_models:
            member.set_training_progress(fraction)

    def grid_size(self, input_shape):
        """The members' `(h, w)` grid of attention locations for inputs of `input_shape` (`ImageCaptioner.grid_size`)."""
        return self.member_models[0].grid_size(input_shape)

    def call(self, inputs, training=None):
        return ops.stack([member(inputs, training=training) for member in self.member_models], axis=1)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        loss_fn = getattr(self, "loss", None)
        if not isinstance(loss_fn, keras.losses.Loss):
            raise ValueError(
                "Expected the ensemble compiled with a per-token keras.losses.Loss from logits. "
                f"Received: loss={loss_fn!r}"
            )
        real = ops.cast(ops.not_equal(y, PAD_ID), "float32")
        tokens = ops.sum(real)
        weights = self._weights(real, sample_weight)
        loss = ops.sum(
            ops.stack(
                [
                    ops.sum(ops.cast(loss_fn.call(y, y_pred[:, index]), "float32") * weights)
                    for index in range(self.members)
                ]
            )
        ) / ops.maximum(tokens, 1.0)
        for penalty in self.losses:  # the members' attention penalties, while training
            loss = loss + ops.cast(penalty, "float32")
        return loss * replica_share(tokens, self.replicas)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        log_probs = ops.mean(ops.log_softmax(ops.cast(y_pred, "float32"), axis=-1), axis=1)
        # Compiled metrics skip padding through the Keras mask, as for one captioner's logits; log-probabilities
        # are never all 0, so zeros mark the padded steps for the mask.
        real = ops.expand_dims(ops.not_equal(y, PAD_ID), -1)
        log_probs = self.padding_mask(ops.where(real, log_probs, ops.zeros_like(log_probs)))
        return super().compute_metrics(x, y, log_probs, sample_weight)

    @staticmethod
    def _weights(real, sample_weight):
        if sample_weight is None:
            return real
        sample_weight = ops.cast(sample_weight, "float32")
        while len(sample_weight.shape) < len(real.shape):
            sample_weight = ops.expand_dims(sample_weight, -1)
        return real * sample_weight

    def get_config(self):
        config = super().get_config()
        config.update({"members": self.members, "captioner": self.captioner})
        return config
