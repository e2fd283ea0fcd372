import dataclasses

import keras
import numpy as np

from seqtasks.recipe.schema import TrainingConfig
from seqtasks.training import fit, make_optimizer


def _model():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=make_optimizer(TrainingConfig(learning_rate=0.01)), loss="mse")
    return model


def _data(batches):
    import tensorflow as tf

    x = np.random.default_rng(0).normal(size=(batches * 8, 4)).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, x.sum(1, keepdims=True))).batch(8)


def test_time_budget_stops_training_mid_run(tmp_path):
    config = dataclasses.replace(TrainingConfig(), epochs=10_000, max_minutes=0.02)  # 1.2 s
    history = fit(_model(), _data(20), _data(2), config, tmp_path)
    assert 1 <= len(history.history["loss"]) < 10_000
    assert 0 < history.batches_seen < 20 * 10_000
    assert (tmp_path / "checkpoints" / "best.weights.h5").is_file()
    assert list((tmp_path / "logs" / "train").glob("events.out.tfevents.*"))


def test_without_a_budget_every_epoch_runs_and_batches_are_counted(tmp_path):
    config = dataclasses.replace(TrainingConfig(), epochs=3)
    history = fit(_model(), _data(5), _data(2), config, tmp_path)
    assert len(history.history["loss"]) == 3
    assert history.batches_seen == 15
