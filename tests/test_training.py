import dataclasses

import keras
import numpy as np

from seqtasks.recipe.schema import TrainingConfig
from seqtasks.training import fit, make_optimizer


def _model():
    keras.utils.set_random_seed(0)
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


def test_monitoring_an_accuracy_keeps_the_most_accurate_epoch(tmp_path):
    import tensorflow as tf

    rng = np.random.default_rng(1)
    x = rng.normal(size=(400, 4)).astype("float32")
    y = (x[:, 0] + x[:, 1] + rng.normal(size=400) > 0).astype("int32")
    train = tf.data.Dataset.from_tensor_slices((x[:200], y[:200])).batch(20)
    validation = tf.data.Dataset.from_tensor_slices((x[200:], y[200:])).batch(100)
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(
        optimizer=keras.optimizers.SGD(0.02),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
    config = dataclasses.replace(TrainingConfig(), epochs=8, monitor="val_accuracy")
    history = fit(model, train, validation, config, tmp_path)
    restored = model.evaluate(validation, verbose=0, return_dict=True)["accuracy"]
    assert len(set(history.history["val_accuracy"])) > 1  # a wrong choice would show
    assert restored == max(history.history["val_accuracy"])
