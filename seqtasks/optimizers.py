"""Keras optimizers that clip the gradients of a multi-replica step after summing them over the replicas.

Keras 3 clips each replica's share of the gradient before the all-reduce, so
on several replicas `clipnorm` bounds every share rather than the gradient,
and training differs from one device. These clip the summed gradient, as on
one device (and as `tf.keras` 2 did).
"""

import keras

from seqtasks.distribute import replicas_in_step


class _ClipAfterAllReduce:
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
