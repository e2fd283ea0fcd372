"""The tiny Keras model and data the fit and checkpoint tests share (tests/training/test_fit.py and
test_checkpoints.py), so that no test module imports another."""

import keras
import numpy as np

from seqtasks.recipe.schema import TrainingConfig
from seqtasks.training.fit import make_optimizer


def small_model():
    """One dense unit over four inputs, compiled with Adam (learning rate 0.01) and MSE; seeded."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=make_optimizer(TrainingConfig(learning_rate=0.01)), loss="mse")
    return model


def small_data(batches):
    """`batches` batches of 8 examples: four normal inputs and their sum."""
    import tensorflow as tf

    x = np.random.default_rng(0).normal(size=(batches * 8, 4)).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, x.sum(1, keepdims=True))).batch(8)


def checkpointed(folder, weights_by_step, keep=3):
    """A compiled model's checkpoints in `folder` after the given steps, every weight set to the step's value."""
    from seqtasks.training.checkpoints import TrainingCheckpoints
    from seqtasks.training.position import training_position

    model = small_model()
    model.optimizer.build(model.trainable_variables)
    callback = TrainingCheckpoints(folder, None, keep, "val_loss", "min", training_position())
    callback.set_model(model)
    for steps, value in weights_by_step:
        model.set_weights([np.full_like(weight, value) for weight in model.get_weights()])
        callback.steps = steps
        callback.save()
    return callback
