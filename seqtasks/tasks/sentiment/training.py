"""Training the text classifier: an ensemble's loss and accuracy, and compiling."""

import keras
from keras import ops

from seqtasks.training.losses import SmoothedSparseCrossentropy


@keras.saving.register_keras_serializable(package="seqtasks")
class MemberCrossentropy(SmoothedSparseCrossentropy):
    """`SmoothedSparseCrossentropy` of an ensemble: in training, the sum over its members of each one's loss.

    Logits `(batch, members, classes)` (a `TextClassifierEnsemble` in
    training) give the sum of the members' cross-entropies, so each member's
    gradients are those of a model trained alone; logits `(batch, classes)`
    (the ensemble's mean probabilities, in validation) give their
    cross-entropy.
    """

    def call(self, y_true, y_pred):
        if len(y_pred.shape) == 2:
            return super().call(y_true, y_pred)
        labels = ops.broadcast_to(ops.expand_dims(ops.cast(y_true, "int32"), 1), ops.shape(y_pred)[:2])
        return ops.sum(super().call(labels, y_pred), axis=1)


@keras.saving.register_keras_serializable(package="seqtasks")
class EnsembleAccuracy(keras.metrics.SparseCategoricalAccuracy):
    """Accuracy of the mean probabilities, from an ensemble's member logits `(batch, members, classes)` or logits."""

    def update_state(self, y_true, y_pred, sample_weight=None):
        from seqtasks.models.text_classifier import mean_probability_logits

        if len(y_pred.shape) == 3:
            y_pred = mean_probability_logits(y_pred)
        return super().update_state(y_true, y_pred, sample_weight=sample_weight)


def compile_classifier(model, training):
    from seqtasks.models.text_classifier import TextClassifierEnsemble
    from seqtasks.training.fit import make_optimizer

    if isinstance(model, TextClassifierEnsemble):
        loss, accuracy = MemberCrossentropy(training.label_smoothing), EnsembleAccuracy(name="accuracy")
    else:
        loss = SmoothedSparseCrossentropy(training.label_smoothing)
        accuracy = keras.metrics.SparseCategoricalAccuracy(name="accuracy")
    model.compile(optimizer=make_optimizer(training), loss=loss, metrics=[accuracy])
