import dataclasses

import keras
import numpy as np
import pytest

from seqtasks.checkpoints import read_state, restore
from seqtasks.errors import SeqtasksError
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
    assert 0 < history.first_step_seconds < history.train_seconds


def test_the_best_epoch_is_kept_when_training_gets_worse(tmp_path):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(1.2), loss="mse")  # too large a step: it diverges
    history = fit(model, _data(5), _data(2), dataclasses.replace(TrainingConfig(), epochs=4), tmp_path)
    losses = history.history["val_loss"]
    assert np.argmin(losses) < len(losses) - 1
    np.testing.assert_allclose(model.evaluate(_data(2), verbose=0), min(losses), rtol=1e-5)


@pytest.mark.parametrize("monitor", ["val_loss", "val_mae"])
def test_early_stopping_waits_its_patience_then_stops(monitor, tmp_path, monkeypatch):
    from seqtasks.checkpoints import BEST_FILE, TrainingCheckpoints

    saved = []
    save_weights = TrainingCheckpoints._save_weights

    def record(self, name):
        saved.append(name)
        return save_weights(self, name)

    monkeypatch.setattr(TrainingCheckpoints, "_save_weights", record)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse", metrics=["mae"])  # nothing changes after epoch 1
    config = dataclasses.replace(TrainingConfig(), epochs=10, early_stopping_patience=2, monitor=monitor)
    history = fit(model, _data(2), _data(2), config, tmp_path)
    assert len(history.history["loss"]) == 3
    assert saved.count(BEST_FILE) == 1  # a tie is not an improvement


def test_training_prints_a_line_per_epoch_in_logs_and_a_bar_in_a_terminal(tmp_path, capsys, monkeypatch):
    import sys

    config = dataclasses.replace(TrainingConfig(), epochs=2)
    history = fit(_model(), _data(3), _data(2), config, tmp_path / "logged")
    logged = capsys.readouterr().out
    assert logged.count("3/3 - ") == 2 and "━" not in logged
    assert history.params["verbose"] == 0  # Keras' own progress output is off: the lines are ours
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    fit(_model(), _data(3), _data(2), config, tmp_path / "terminal")
    assert "━" in capsys.readouterr().out


def test_only_the_warning_of_data_of_unknown_length_is_silenced(tmp_path):
    import warnings

    import tensorflow as tf

    class Warns(keras.layers.Layer):
        def call(self, x):
            warnings.warn("a warning of the model's own")
            return x

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), Warns(), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    unknown_length = _data(3).filter(lambda x, y: True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit(model, unknown_length, _data(2), dataclasses.replace(TrainingConfig(), epochs=2), tmp_path)
    messages = [str(warning.message) for warning in caught]
    assert "a warning of the model's own" in messages
    assert not [message for message in messages if "ran out of data" in message]
    # Nor does Keras warn that a shuffle flag is ignored: the datasets shuffle themselves.
    assert not [message for message in messages if "shuffle" in message]
    assert tf.data.experimental.cardinality(unknown_length) == tf.data.experimental.UNKNOWN_CARDINALITY


@pytest.mark.parametrize("name", ["accuracy", "hits"])
def test_monitoring_an_accuracy_keeps_the_most_accurate_epoch(name, tmp_path):
    # "hits" has no "acc" in its name, so Keras could not guess that higher is better.
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
        metrics=[keras.metrics.SparseCategoricalAccuracy(name=name)],
    )
    config = dataclasses.replace(TrainingConfig(), epochs=8, monitor=f"val_{name}", early_stopping_patience=8)
    history = fit(model, train, validation, config, tmp_path)
    restored = model.evaluate(validation, verbose=0, return_dict=True)[name]
    values = history.history[f"val_{name}"]
    assert len(values) == 8 and len(set(values)) > 1 and values[0] != max(values)  # a wrong choice would show
    assert restored == max(values)
    # Early stopping counts from the most accurate epoch too.
    assert read_state(tmp_path / "checkpoints")["early_stopping"]["best"] == max(values)


def test_time_trained_before_resuming_counts_against_the_budget(tmp_path):
    config = dataclasses.replace(TrainingConfig(), epochs=1)
    fit(_model(), _data(5), _data(2), config, tmp_path)
    state = read_state(tmp_path / "checkpoints")
    # Ten minutes allowed, half a second more already trained: the resumed run stops after one batch.
    state.update(done=False, train_seconds=600.5)
    model = _model()
    restore(model, tmp_path / "checkpoints")
    history = fit(model, _data(5), _data(2), dataclasses.replace(config, epochs=3, max_minutes=10), tmp_path, state)
    assert history.batches_seen == 5 + 1


def test_a_loss_that_is_not_finite_ends_training_naming_its_step_and_the_learning_rate(tmp_path):
    import tensorflow as tf

    x = np.ones((8, 4), "float32")
    targets = np.full((8, 1), np.inf, "float32")
    config = dataclasses.replace(TrainingConfig(), epochs=1, learning_rate=0.5)
    with pytest.raises(SeqtasksError) as error:
        fit(_model(), tf.data.Dataset.from_tensor_slices((x, targets)).batch(8), _data(1), config, tmp_path)
    assert str(error.value) == (
        "training diverged: the loss is inf at step 1 (epoch 1); no model was saved or exported "
        "(try a lower training.learning_rate than 0.5)"
    )


@pytest.mark.parametrize("with_validation", [True, False])
def test_a_run_resumed_in_its_last_epoch_finishes_that_epoch_and_nothing_more(with_validation, tmp_path):
    import tensorflow as tf

    batches_read = []

    def batches():
        for batch in _data(3).as_numpy_iterator():
            batches_read.append(1)
            yield batch

    spec = (tf.TensorSpec((None, 4), tf.float32), tf.TensorSpec((None, 1), tf.float32))
    train = tf.data.Dataset.from_generator(batches, output_signature=spec)
    train = train.apply(tf.data.experimental.assert_cardinality(3))
    # Stopped after step 4, the first batch of the second and last epoch: the running loss totals are restored.
    state = {"epoch": 1, "batches_done": 1, "steps": 4, "done": False, "epoch_metrics": [7.0, 2.0]}
    config = dataclasses.replace(TrainingConfig(), epochs=2)
    history = fit(_model(), train, _data(2) if with_validation else None, config, tmp_path, state)
    assert history.batches_seen == 4 + 3 and len(history.history["loss"]) == 1
    assert read_state(tmp_path / "checkpoints")["done"]
    if with_validation:  # the running metrics are rebuilt from a validation batch: training reads its 3 batches only
        assert len(batches_read) == 3
    # One Keras fit for the rest of the epoch, none after it: one TensorBoard log.
    assert len(list((tmp_path / "logs" / "train").glob("events.out.tfevents.*"))) == 1


def test_a_loss_that_is_not_finite_after_a_live_line_ends_that_line_first(tmp_path, monkeypatch, capsys):
    import tensorflow as tf

    from seqtasks import training_progress

    monkeypatch.setattr(training_progress, "_is_terminal", lambda stream: True)
    x = np.ones((16, 4), "float32")
    targets = np.concatenate([np.zeros((8, 1)), np.full((8, 1), np.inf)]).astype("float32")
    config = dataclasses.replace(TrainingConfig(), epochs=1)
    with pytest.raises(SeqtasksError, match="at step 2 "):
        fit(_model(), tf.data.Dataset.from_tensor_slices((x, targets)).batch(8), _data(1), config, tmp_path)
    out = capsys.readouterr().out
    assert "\r1/2 " in out  # the live line of step 1
    assert out.endswith("\n")
