"""Keras optimizers that clip the gradients of a multi-replica step after summing them over the replicas.

Keras 3 clips each replica's share of the gradient before the all-reduce, so
on several replicas `clipnorm` bounds every share rather than the gradient,
and training differs from one device. These clip the summed gradient, as on
one device (and as `tf.keras` 2 did). `EpochSchedule` is the recipes'
learning-rate schedule by epoch.
"""

import math

import keras
from keras import ops

from seqtasks.training.distribute import replicas_in_step


class _ClipAfterAllReduce:
    # Variables held still for the first epochs (`freeze`): their paths, the epochs, and the steps of an epoch,
    # which `seqtasks.training.fit.fit` sets once the data is counted.
    frozen_paths = ()
    frozen_epochs = 0
    steps_per_epoch = None

    def freeze(self, variables, epochs):
        """Keeps `variables` as they are for the first `epochs` epochs of training, then trains them.

        Their gradients count as zero until then (so Adam's moments stay
        zero and the first real step is not skewed), and weight decay leaves
        them out throughout. The step count decides, so a resumed run goes on
        as the uninterrupted one would.
        """
        self.frozen_paths = tuple(variable.path for variable in variables)
        self.frozen_epochs = epochs
        self.exclude_from_weight_decay(var_list=list(variables))

    def apply(self, grads, trainable_variables=None):
        if self.frozen_paths:
            if not self.steps_per_epoch:
                raise ValueError("frozen variables need steps_per_epoch; it is not set")
            variables = self._trainable_variables if trainable_variables is None else list(trainable_variables)
            live = self.iterations >= self.frozen_epochs * self.steps_per_epoch
            grads = [
                _scaled(grad, live) if variable.path in self.frozen_paths else grad
                for grad, variable in zip(grads, variables)
            ]
        return super().apply(grads, trainable_variables)

    def _clip_gradients(self, grads):
        if replicas_in_step() > 1:
            return grads  # clipped in `_all_reduce_sum_gradients`, once summed
        return super()._clip_gradients(grads)

    # TensorFlow backend only: its optimizers sum the replicas' gradients here.
    def _all_reduce_sum_gradients(self, grads_and_vars):
        pairs = list(super()._all_reduce_sum_gradients(grads_and_vars))
        if replicas_in_step() == 1:
            return pairs
        present = [index for index, (grad, _) in enumerate(pairs) if grad is not None]
        clipped = super()._clip_gradients([pairs[index][0] for index in present])
        for index, grad in zip(present, clipped):
            pairs[index] = (grad, pairs[index][1])
        return pairs

    def finalize_variable_values(self, var_list):
        # `fit` calls this at its end to put the moving average in place; a run calls `fit` more than
        # once (a resumed epoch, then the rest), so `seqtasks.training.fit.fit` does it once, after choosing
        # the best epoch.
        pass

    def use_averaged_weights(self, var_list):
        """Sets `var_list` (the model's trainable variables) to their moving average, when `use_ema`."""
        super().finalize_variable_values(var_list)


def _scaled(grad, live):
    """`grad` where `live` is true, zeros where not; a sparse gradient (TensorFlow's embeddings) stays sparse."""
    if grad is None:
        return None
    if hasattr(grad, "indices") and hasattr(grad, "values"):
        return type(grad)(grad.values * ops.cast(live, grad.values.dtype), grad.indices, grad.dense_shape)
    return grad * ops.cast(live, grad.dtype)


@keras.saving.register_keras_serializable(package="seqtasks")
class Adam(_ClipAfterAllReduce, keras.optimizers.Adam):
    """`keras.optimizers.Adam`, clipping a multi-replica step's summed gradient."""


@keras.saving.register_keras_serializable(package="seqtasks")
class AdamW(_ClipAfterAllReduce, keras.optimizers.AdamW):
    """`keras.optimizers.AdamW`, clipping a multi-replica step's summed gradient."""


@keras.saving.register_keras_serializable(package="seqtasks")
class SGD(_ClipAfterAllReduce, keras.optimizers.SGD):
    """`keras.optimizers.SGD`, clipping a multi-replica step's summed gradient."""


@keras.saving.register_keras_serializable(package="seqtasks")
class RMSprop(_ClipAfterAllReduce, keras.optimizers.RMSprop):
    """`keras.optimizers.RMSprop`, clipping a multi-replica step's summed gradient."""


SCHEDULES = ("constant", "inverse_time", "cosine")


@keras.saving.register_keras_serializable(package="seqtasks")
class EpochSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """A learning rate by epoch, computed from the optimizer's step count (saved in checkpoints).

    With `e = step / steps_per_epoch`:
    `"inverse_time"`: `initial_learning_rate / (1 + decay * floor(e))`, a
    new rate at each epoch's start (Lample et al. 2016; Ma & Hovy 2016);
    `"cosine"`: `initial_learning_rate * (1 + cos(pi * min(e / epochs, 1))) / 2`;
    `"constant"`: `initial_learning_rate`.

    Args:
        initial_learning_rate: float, the rate of the first epoch.
        kind: one of `"constant"`, `"inverse_time"`, `"cosine"`.
        decay: float >= 0, the `"inverse_time"` decay per epoch.
        epochs: int, the epochs over which `"cosine"` goes down to 0.
        steps_per_epoch: int, the training steps in an epoch. It may be left
            `None` when the optimizer is made and set once the data is
            counted (`seqtasks.training.fit.fit` does), before the first step.

    Example:

    >>> schedule = EpochSchedule(0.01, "inverse_time", decay=0.5, steps_per_epoch=10)
    >>> [round(float(schedule(step)), 4) for step in (0, 9, 10, 25)]
    [0.01, 0.01, 0.0067, 0.005]
    """

    def __init__(self, initial_learning_rate, kind="constant", decay=0.0, epochs=1, steps_per_epoch=None):
        if kind not in SCHEDULES:
            raise ValueError(f"Expected one of {set(SCHEDULES)}. Received: kind={kind!r}")
        if decay < 0 or epochs < 1:
            raise ValueError(f"Expected decay >= 0 and epochs >= 1. Received: decay={decay}, epochs={epochs}")
        self.initial_learning_rate = initial_learning_rate
        self.kind = kind
        self.decay = decay
        self.epochs = epochs
        self.steps_per_epoch = steps_per_epoch

    def __call__(self, step):
        rate = ops.convert_to_tensor(self.initial_learning_rate, "float32")
        if self.kind == "constant":
            return rate
        if not self.steps_per_epoch:
            raise ValueError(f"EpochSchedule {self.kind!r} needs steps_per_epoch; it is {self.steps_per_epoch}")
        epoch = ops.cast(step, "float32") / float(self.steps_per_epoch)
        if self.kind == "inverse_time":
            return rate / (1.0 + self.decay * ops.floor(epoch))
        done = ops.minimum(epoch / float(self.epochs), 1.0)
        return rate * 0.5 * (1.0 + ops.cos(math.pi * done))

    def get_config(self):
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "kind": self.kind,
            "decay": self.decay,
            "epochs": self.epochs,
            "steps_per_epoch": self.steps_per_epoch,
        }
