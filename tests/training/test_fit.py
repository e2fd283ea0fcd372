"""`fit`: the time budget, early stopping, the best epoch, schedules, moving averages, and the policies.

Mixed precision: 16-bit compute, float32 where the numbers need it, and an export that serves; early
stopping, mixed_bfloat16 and exports from a checkpoint under Keras' JAX backend too.
"""

import dataclasses
import json
import math

import keras
import numpy as np
import pytest

from seqtasks.errors import SeqtasksError
from seqtasks.recipe.schema import TrainingConfig
from seqtasks.training.checkpoints import read_state, restore
from seqtasks.training.fit import fit, make_optimizer, monitor_mode
from tests.conftest import run_recipe, seqtasks_command, serve_in_tensorflow_only
from tests.support.fit_helpers import small_data as _data, small_model as _model


@pytest.mark.slow
@pytest.mark.core
def test_time_budget_stops_training_mid_run(tmp_path):
    config = dataclasses.replace(TrainingConfig(), epochs=10_000, max_minutes=0.02)  # 1.2 s
    history = fit(_model(), _data(20), _data(2), config, tmp_path, validation_scores=lambda model: {"val_s": 1.0})
    assert 1 <= len(history.history["loss"]) < 10_000
    # The epoch stopped mid-way was validated and scored too.
    assert len(history.history["val_s"]) == len(history.history["val_loss"]) == len(history.history["loss"])
    assert 0 < history.batches_seen < 20 * 10_000
    assert (tmp_path / "checkpoints" / "best.weights.h5").is_file()
    assert list((tmp_path / "logs" / "train").glob("events.out.tfevents.*"))


@pytest.mark.slow
@pytest.mark.core
def test_without_a_budget_every_epoch_runs_and_batches_are_counted(tmp_path):
    config = dataclasses.replace(TrainingConfig(), epochs=3)
    history = fit(_model(), _data(5), _data(2), config, tmp_path)
    assert len(history.history["loss"]) == 3
    assert history.batches_seen == 15
    assert 0 < history.first_step_seconds < history.train_seconds


@pytest.mark.slow
@pytest.mark.core
def test_the_best_epoch_is_kept_when_training_gets_worse(tmp_path):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(1.2), loss="mse")  # too large a step: it diverges
    history = fit(model, _data(5), _data(2), dataclasses.replace(TrainingConfig(), epochs=4), tmp_path)
    losses = history.history["val_loss"]
    assert np.argmin(losses) < len(losses) - 1
    np.testing.assert_allclose(model.evaluate(_data(2), verbose=0), min(losses), rtol=1e-5)


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.parametrize("monitor", ["val_loss", "val_mae"])
def test_early_stopping_waits_its_patience_then_stops(monitor, tmp_path, monkeypatch):
    from seqtasks.training.checkpoints import BEST_FILE, TrainingCheckpoints

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


@pytest.mark.slow
@pytest.mark.core
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


@pytest.mark.slow
@pytest.mark.core
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


@pytest.mark.slow
@pytest.mark.core
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


@pytest.mark.slow
@pytest.mark.core
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


@pytest.mark.slow
@pytest.mark.core
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


@pytest.mark.slow
@pytest.mark.core
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


@pytest.mark.slow
@pytest.mark.core
def test_a_loss_that_is_not_finite_after_a_live_line_ends_that_line_first(tmp_path, monkeypatch, capsys):
    import tensorflow as tf

    from seqtasks.training import progress as training_progress

    monkeypatch.setattr(training_progress, "_is_terminal", lambda stream: True)
    x = np.ones((16, 4), "float32")
    targets = np.concatenate([np.zeros((8, 1)), np.full((8, 1), np.inf)]).astype("float32")
    config = dataclasses.replace(TrainingConfig(), epochs=1)
    with pytest.raises(SeqtasksError, match="at step 2 "):
        fit(_model(), tf.data.Dataset.from_tensor_slices((x, targets)).batch(8), _data(1), config, tmp_path)
    out = capsys.readouterr().out
    assert "\r1/2 " in out  # the live line of step 1
    assert out.endswith("\n")


def test_a_constant_rate_keeps_a_float_and_a_schedule_needs_no_optimizer_variable():
    constant = make_optimizer(TrainingConfig(learning_rate=0.01))
    scheduled = make_optimizer(TrainingConfig(learning_rate=0.01, learning_rate_schedule="inverse_time"))
    assert not isinstance(constant.learning_rate, float) and float(constant.learning_rate) == pytest.approx(0.01)
    assert scheduled._learning_rate.kind == "inverse_time" and scheduled._learning_rate.decay == 0.05


@pytest.mark.parametrize("name, expected", [("adam", "Adam"), ("adamw", "AdamW"), ("sgd", "SGD"), ("rmsprop", "RMSprop")])
def test_the_recipe_names_the_optimizer_its_gradient_clipping_and_the_cosine_s_epochs(name, expected):
    config = TrainingConfig(optimizer=name, clipnorm=2.5, learning_rate=0.01, learning_rate_schedule="cosine", epochs=7)
    optimizer = make_optimizer(config)
    assert type(optimizer).__name__ == expected and optimizer.clipnorm == 2.5
    assert optimizer._learning_rate.kind == "cosine" and optimizer._learning_rate.epochs == 7
    assert make_optimizer(TrainingConfig(optimizer=name)).clipnorm == TrainingConfig().clipnorm


def test_a_loss_is_minimised_and_any_score_maximised_in_keras_own_words():
    # Exactly "min" or "max": Keras reads anything else as "auto", which minimises val_f1.
    assert [monitor_mode(m) for m in ("val_loss", "loss", "val_f1", "val_accuracy", "val_token_accuracy")] == [
        "min", "min", "max", "max", "max"]


def _scheduled_model(**training):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    config = TrainingConfig(learning_rate=0.01, learning_rate_schedule="inverse_time", learning_rate_decay=1.0)
    model.compile(optimizer=make_optimizer(dataclasses.replace(config, **training)), loss="mse")
    return model


@pytest.mark.slow
@pytest.mark.core
def test_fit_counts_the_epoch_for_the_schedule_and_a_resumed_run_goes_on_at_its_rate(tmp_path, monkeypatch):
    from seqtasks.training.checkpoints import TrainingCheckpoints

    config = dataclasses.replace(TrainingConfig(), epochs=3, checkpoint_every_steps=7)
    model = _scheduled_model()
    fit(model, _data(5), _data(2), config, tmp_path / "whole")
    assert model.optimizer._learning_rate.steps_per_epoch == 5
    assert int(model.optimizer.iterations) == 15
    # After 15 steps: epoch 3 (index 2) ran at 0.01 / 3, and the next would run at 0.01 / 4.
    np.testing.assert_allclose(float(model.optimizer.learning_rate), 0.01 / 4, rtol=1e-6)

    save = TrainingCheckpoints.save

    def save_then_stop(self, done=False):
        save(self, done)
        if self.steps == 7:
            raise KeyboardInterrupt  # killed after the checkpoint of step 7, in the second epoch

    monkeypatch.setattr(TrainingCheckpoints, "save", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        fit(_scheduled_model(), _data(5), _data(2), config, tmp_path / "resumed")
    monkeypatch.setattr(TrainingCheckpoints, "save", save)
    resumed = _scheduled_model()
    state = restore(resumed, tmp_path / "resumed" / "checkpoints")
    assert int(resumed.optimizer.iterations) == 7
    resumed.optimizer._learning_rate.steps_per_epoch = 5
    np.testing.assert_allclose(float(resumed.optimizer.learning_rate), 0.01 / 2, rtol=1e-6)  # epoch 2's rate
    fit(resumed, _data(5), _data(2), config, tmp_path / "resumed", state)
    steps = int(resumed.optimizer.iterations)  # a plain dataset is read whole again in the resumed epoch
    assert steps > 7
    np.testing.assert_allclose(float(resumed.optimizer.learning_rate), 0.01 / (1 + steps // 5), rtol=1e-6)


class _StepWeights(keras.callbacks.Callback):
    """The model's weights after every training step (the raw ones, which the average is made of)."""

    def __init__(self):
        super().__init__()
        self.steps = []

    def on_train_batch_end(self, batch, logs=None):
        self.steps.append([np.array(w) for w in self.model.get_weights()])


@pytest.mark.slow
@pytest.mark.core
def test_ema_validates_keeps_and_restores_the_moving_average_of_the_step_weights(tmp_path, monkeypatch):
    import seqtasks.training.fit as training

    recorder = _StepWeights()
    real_fit = keras.Model.fit
    monkeypatch.setattr(keras.Model, "fit", lambda self, *a, **k: real_fit(self, *a, **{
        **k, "callbacks": [*k["callbacks"], recorder]}))
    config = dataclasses.replace(TrainingConfig(), epochs=3, ema_momentum=0.8)
    model = _model_with(config)
    history = fit(model, _data(5), _data(2), config, tmp_path)
    assert len(recorder.steps) == 15
    # Keras' average starts at the first step's weights, then average = m * average + (1 - m) * weights.
    averages = [recorder.steps[0]]
    for weights in recorder.steps[1:]:
        averages.append([0.8 * a + 0.2 * w for a, w in zip(averages[-1], weights)])
    best = int(np.argmin(history.history["val_loss"]))
    expected = averages[5 * best + 4]
    for got, want in zip(model.get_weights(), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(expected[0], recorder.steps[5 * best + 4][0])  # the average is not the raw weights
    # The validation loss of each epoch was that of its averaged weights.
    for epoch, loss in enumerate(history.history["val_loss"]):
        probe = _model_with(config)
        probe.set_weights(averages[5 * epoch + 4])
        np.testing.assert_allclose(probe.evaluate(_data(2), verbose=0), loss, rtol=1e-5)
    # A checkpoint holds the raw weights and the average: loading one and asking for the average gives it back.
    reloaded = _model_with(config)
    reloaded.optimizer.build(reloaded.trainable_variables)
    reloaded.load_weights(str(tmp_path / "checkpoints" / "best.weights.h5"))
    for got, raw in zip(reloaded.get_weights(), recorder.steps[5 * best + 4]):
        np.testing.assert_allclose(got, raw, rtol=1e-6)
    training.use_averaged_weights(reloaded)
    for got, want in zip(reloaded.get_weights(), model.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.slow
@pytest.mark.core
def test_keras_fit_leaves_the_raw_weights_in_place_so_a_second_fit_trains_on_from_them():
    config = dataclasses.replace(TrainingConfig(), ema_momentum=0.9)
    model = _model_with(config)
    recorder = _StepWeights()
    model.fit(_data(3), epochs=1, verbose=0, callbacks=[recorder])
    for got, raw in zip(model.get_weights(), recorder.steps[-1]):
        np.testing.assert_array_equal(got, raw)


@pytest.mark.parametrize("optimizer", ["adam", "adamw", "sgd"])
def test_weight_decay_shrinks_each_weight_by_the_learning_rate_times_the_decay_per_step(optimizer):
    config = dataclasses.replace(TrainingConfig(), optimizer=optimizer, weight_decay=0.5, clipnorm=None)
    model = _model_with(config)
    model.optimizer.build(model.trainable_variables)
    before = [np.array(w) for w in model.trainable_variables]
    zeros = [keras.ops.zeros_like(w) for w in model.trainable_variables]
    model.optimizer.apply(zeros, model.trainable_variables)
    # A zero gradient moves nothing but the decay: w <- w - learning_rate * weight_decay * w (0.05 * 0.5).
    for got, was in zip(model.trainable_variables, before):
        np.testing.assert_allclose(np.array(got), was * (1 - 0.05 * 0.5), rtol=1e-6)
    assert dataclasses.replace(TrainingConfig(), optimizer=optimizer).weight_decay is None
    assert _model_with(dataclasses.replace(config, weight_decay=None)).optimizer.weight_decay == (
        0.004 if optimizer == "adamw" else None
    )


def _model_with(config):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=make_optimizer(dataclasses.replace(config, learning_rate=0.05)), loss="mse")
    return model


@pytest.mark.slow
@pytest.mark.core
def test_the_xla_compilations_counted_while_training_are_returned_with_the_history(tmp_path, monkeypatch):
    import contextlib

    import seqtasks.training.compiled as compiled
    from seqtasks.training.fit import fit_metrics

    @contextlib.contextmanager
    def counting(found=None, names=("train_step", "test_step")):
        # What JAX's compile events add to `found` (see compiled.xla_compilations); TensorFlow reports none.
        found = {} if found is None else found
        yield found
        entry = found.setdefault("train_step", {"compilations": 0, "seconds": 0.0})
        entry["compilations"] += 1
        entry["seconds"] += 0.25

    monkeypatch.setattr(compiled, "xla_compilations", counting)
    model = _model()
    history = fit(model, _data(2), _data(2), dataclasses.replace(TrainingConfig(), epochs=2), tmp_path)
    assert history.xla_compilations == {"train_step": {"compilations": 1, "seconds": 0.25}}
    assert fit_metrics("toy", history, history.train_seconds, model)["xla_compilations"] == history.xla_compilations


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.parametrize(
    "epochs, state, expected",
    [
        (1, None, [0.0]),
        (2, None, [0.0, 1.0]),
        (5, None, [0.0, 0.25, 0.5, 0.75, 1.0]),
        # Resumed at the start of its fourth epoch: the schedule goes on where it was.
        (5, {"epoch": 3, "batches_done": 0, "steps": 6, "done": False, "epoch_metrics": None}, [0.75, 1.0]),
    ],
)
def test_a_model_that_asks_is_told_the_fraction_of_its_epochs_done_as_each_begins(epochs, state, expected, tmp_path):
    model = _model()
    seen = []
    model.set_training_progress = seen.append
    fit(model, _data(2), _data(1), dataclasses.replace(TrainingConfig(), epochs=epochs), tmp_path, state)
    assert seen == pytest.approx(expected)


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.parametrize("ema_momentum", [None, 0.8])
def test_scores_of_the_validated_weights_join_each_epoch_s_logs_pick_the_best_epoch_and_stop_early(ema_momentum, tmp_path):
    values = iter([0.2, 0.9, 0.4, 0.95, 0.1])
    scored = []

    def score(model):
        scored.append([np.array(w) for w in model.get_weights()])
        return {"val_score": next(values), "val_other": -1.0}

    config = dataclasses.replace(
        TrainingConfig(), epochs=5, monitor="val_score", ema_momentum=ema_momentum, early_stopping_patience=1
    )
    model = _model_with(config)
    history = fit(model, _data(5), _data(2), config, tmp_path, validation_scores=score)
    # Early stopping reads the scores too: the third epoch is not better, so training stops there.
    assert history.history["val_score"] == [0.2, 0.9, 0.4] and history.history["val_other"] == [-1.0] * 3
    # The second epoch scored best: the model holds the weights scored then (their average, with EMA).
    for got, want in zip(model.get_weights(), scored[1]):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert not np.allclose(scored[1][0], scored[2][0])


@pytest.mark.slow
@pytest.mark.core
def test_without_validation_data_nothing_is_scored(tmp_path):
    def score(model):
        raise AssertionError("scored without validation data")

    history = fit(_model(), _data(2), None, dataclasses.replace(TrainingConfig(), epochs=2, monitor="loss"), tmp_path,
                  validation_scores=score)
    assert len(history.history["loss"]) == 2


@pytest.mark.slow
@pytest.mark.parametrize("precision, compute", [("mixed_bfloat16", "bfloat16"), ("mixed_float16", "float16")])
def test_toy_trains_and_exports_under_a_mixed_policy(precision, compute, tmp_path):
    run_dir, _ = run_recipe(
        "toy",
        tmp_path / "runs",
        f"training.precision={precision}",
        "training.epochs=2",
        "data.train_size=600",
        "data.validation_size=50",
        f"export.directory={tmp_path / 'saved_models'}",
    )
    assert keras.config.dtype_policy().name == "float32"  # the global policy is back
    losses = json.loads((run_dir / "metrics.json").read_text())["history"]["loss"]
    assert np.all(np.isfinite(losses)) and losses[1] < losses[0]
    model = keras.models.load_model(run_dir / "model" / "model.keras", safe_mode=True)
    assert model.decoder_layer.compute_dtype == compute and model.decoder_layer.variable_dtype == "float32"
    assert model.output_dense.compute_dtype == "float32"
    logits = model((np.array([[4, 5, 6]]), np.array([[1, 4]])))
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    if precision == "mixed_float16":
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    out = serve_in_tensorflow_only(tmp_path / "saved_models" / "toy" / "1", {"digits": ["1 2 3", ""]})
    assert out["digits"]["output"]["shape"] == [2] and out["digits"]["score"]["dtype"] == "float32"
    # A checkpoint (weights and the optimizer's state, loss scale included) exports like the final model.
    result = seqtasks_command("export", run_dir, "--checkpoint", "best", "--force")  # the final model holds these weights
    assert result.stdout.strip().splitlines()[-1] == f"SavedModel: {tmp_path / 'saved_models' / 'toy' / '2'}"
    again = serve_in_tensorflow_only(tmp_path / "saved_models" / "toy" / "2", {"digits": ["1 2 3", ""]})
    assert again["digits"]["output"]["value"] == out["digits"]["output"]["value"]


_STOPS_AND_EXPORTS = """
import json, sys
from click.testing import CliRunner
from seqtasks.cli import main
root = sys.argv[1]
common = ["data.train_size=300", "data.validation_size=40", "training.batch_size=32", "model.decoding.beam_width=1",
          "export.directory=" + root + "/exports"]


def run(*args):
    out = CliRunner().invoke(main, [str(arg) for arg in args])
    return {"exit": out.exit_code, "output": out.output[-3000:], "error": repr(out.exception)[-1000:]}


def flags(overrides):
    return [flag for override in common + overrides for flag in ("--set", override)]


# Steps too small to move float32 weights: val_loss never improves, so patience 1 stops the run after epoch 2.
stalled = run("run", "toy", "--output-dir", root + "/stalled", *flags(
    ["training.epochs=6", "training.optimizer=sgd", "training.learning_rate=1e-12", "training.early_stopping_patience=1",
     "export.enabled=false"]))
mixed = run("run", "toy", "--output-dir", root + "/mixed", *flags(["training.epochs=2", "training.precision=mixed_bfloat16"]))
import glob
(mixed_dir,) = glob.glob(root + "/mixed/*/*")
again = run("export", mixed_dir, "--checkpoint", "best", "--force")
print(json.dumps({"stalled": stalled, "mixed": mixed, "again": again}))
"""


@pytest.mark.slow
def test_early_stopping_mixed_bfloat16_and_checkpoint_exports_under_jax(tmp_path, jax_env):
    from tests.conftest import run_python

    result = run_python(_STOPS_AND_EXPORTS.replace("sys.argv[1]", repr(str(tmp_path))), env=jax_env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert all(outcome[key]["exit"] == 0 for key in outcome), outcome

    (stalled,) = (tmp_path / "stalled").glob("*/*/metrics.json")
    metrics = json.loads(stalled.read_text())
    history = metrics["history"]
    assert len(history["val_loss"]) == 2 and history["val_loss"][1] == history["val_loss"][0]
    # 300 and 40 examples, batches of 32: a full and a last, partial batch shape, compiled once for both epochs.
    assert {name: entry["compilations"] for name, entry in metrics["xla_compilations"].items()} == {
        "train_step": 2,
        "test_step": 2,
    }
    assert "XLA compiled train_step for 2 batch shape(s)" in outcome["stalled"]["output"]

    (mixed,) = (tmp_path / "mixed").glob("*/*/metrics.json")
    losses = json.loads(mixed.read_text())["history"]["loss"]
    assert all(math.isfinite(v) for v in losses) and losses[1] < losses[0]
    first, second = tmp_path / "exports" / "toy" / "1", tmp_path / "exports" / "toy" / "2"
    assert outcome["again"]["output"].strip().splitlines()[-1] == f"SavedModel: {second}"
    digits = ["1 2 3", "4 4 0 9", ""]
    served = serve_in_tensorflow_only(first, {"digits": digits})["digits"]
    # The run keeps its best weights, so the best checkpoint's export writes what the run's own export wrote.
    assert serve_in_tensorflow_only(second, {"digits": digits})["digits"]["output"]["value"] == served["output"]["value"]
    assert served["score"]["dtype"] == "float32"
