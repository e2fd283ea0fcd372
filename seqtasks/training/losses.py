import keras
from keras import ops

from seqtasks.text.special_ids import PAD_ID


@keras.saving.register_keras_serializable(package="seqtasks")
class SmoothedSparseCrossentropy(keras.losses.Loss):
    """Cross-entropy from logits against integer labels, with label smoothing.

    `loss = (1 - ε) · (-log p_y) + ε · mean_v(-log p_v)`: the target
    distribution puts `1 - ε` on the label and spreads `ε` uniformly over the
    vocabulary. Computed in float32. Padded steps are skipped through the Keras
    mask that `Seq2Seq` logits carry.

    Args:
        label_smoothing: float in [0, 1).
        **kwargs: other keyword arguments of `keras.losses.Loss`.
    """

    def __init__(self, label_smoothing=0.0, name="smoothed_sparse_crossentropy", **kwargs):
        super().__init__(name=name, **kwargs)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"Expected label_smoothing in [0, 1). Received: label_smoothing={label_smoothing}")
        self.label_smoothing = label_smoothing

    def call(self, y_true, y_pred):
        logits = ops.cast(y_pred, "float32")
        # The fused kernel's gradient is `softmax - one_hot`; picking `-log p_y` out of the log-probabilities
        # instead scatters its gradient back (an UnsortedSegmentSum under TensorFlow, a tenth of a translation step).
        nll = ops.sparse_categorical_crossentropy(ops.cast(y_true, "int32"), logits, from_logits=True)
        if self.label_smoothing == 0.0:
            return nll
        uniform = ops.logsumexp(logits, axis=-1) - ops.mean(logits, axis=-1)  # mean_v(-log p_v)
        return (1.0 - self.label_smoothing) * nll + self.label_smoothing * uniform

    def get_config(self):
        config = super().get_config()
        config["label_smoothing"] = self.label_smoothing
        return config


class OneReplica:
    """The replicas of a training step as a model's loss sees them, for a step on one device.

    A loss that weighs itself across replicas (`replica_share`) asks two
    things of the step being traced: `count()`, how many replicas run it,
    and `mean(value)`, a value averaged over them. On one device they are 1
    and the value itself. A model trained under a distribution strategy is
    given the runtime's answers instead (`seqtasks.training.distribute.STEP_REPLICAS`,
    passed to `use_replicas` by whoever compiles it), so the models never
    import the runtime.
    """

    def count(self):
        return 1

    def mean(self, value):
        return value


ONE_REPLICA = OneReplica()


def replica_share(count, replicas):
    """`count` over its mean across the replicas of the training step; 1 outside a multi-replica step.

    Keras averages the replicas' losses, each a mean over the replica's own
    real tokens. A replica whose loss is multiplied by its share of the tokens
    weighs in by that share, so the step's loss and gradients are the mean
    over every real token of the global batch, as on one device.

    Args:
        count: the replica's own count (of real tokens, or sentences).
        replicas: the step's replicas, like `OneReplica` (a model's `replicas`, set by `use_replicas`).
    """
    if replicas.count() == 1:
        return 1.0
    count = ops.cast(count, "float32")
    return count / ops.maximum(replicas.mean(count), 1.0)


class ReplicaAware:
    """Model mixin: `use_replicas(replicas)` says what the model's loss may ask of the step's replicas.

    `replicas` is an object like `OneReplica` (the default: one device); a
    run under a distribution strategy passes
    `seqtasks.training.distribute.STEP_REPLICAS` where it compiles the model,
    before training. It is no part of the model's or the compile
    configuration, and `compile` stays Keras' own, so a saved model loads
    (and compiles) as before, for one device. List it before `keras.Model`
    among the bases.
    """

    replicas = ONE_REPLICA

    def use_replicas(self, replicas):
        """Has the loss weigh this replica's share of a step by `replicas` (`count()`, `mean(value)`); before `fit`."""
        self.replicas = replicas


class TokenMeanLoss(ReplicaAware):
    """Model mixin: the compiled loss, as a mean over every real target token of the global batch.

    The compiled loss is a mean over the replica's own real tokens (labels
    other than `PAD_ID`); `replica_share` weighs it by the replica's share of
    them, with the replicas `use_replicas` gave (`ReplicaAware`). List it
    before `keras.Model` among the bases.
    """

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        loss = super().compute_loss(x, y, y_pred, sample_weight, training=training)
        return loss * replica_share(ops.sum(ops.cast(ops.not_equal(y, PAD_ID), "float32")), self.replicas)
