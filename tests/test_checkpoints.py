import dataclasses
import json

import numpy as np
import pytest
from test_training import _data, _model

from seqtasks.checkpoints import read_state
from seqtasks.recipe.schema import TrainingConfig
from seqtasks.run_folders import unfinished_run
from seqtasks.training import fit


def test_checkpoints_every_n_steps_keep_the_newest_and_record_the_state(tmp_path):
    config = dataclasses.replace(TrainingConfig(), epochs=2, checkpoint_every_steps=3, keep_checkpoints=2)
    fit(_model(), _data(5), _data(2), config, tmp_path)
    folder = tmp_path / "checkpoints"
    # Steps 3, 5 (epoch end), 6, 9, 10 (epoch end); the newest two are kept.
    assert sorted(p.name for p in folder.iterdir()) == [
        "best.weights.h5",
        "state.json",
        "step-00000009.weights.h5",
        "step-00000010.weights.h5",
    ]
    state = read_state(folder)
    assert state["done"] and (state["epoch"], state["batches_done"], state["steps"]) == (2, 0, 10)
    assert state["checkpoint"] == "step-00000010.weights.h5"
    assert len(state["history"]["loss"]) == 2 and state["best"] == min(state["history"]["val_loss"])
    assert state["early_stopping"] is None


def test_keeping_one_checkpoint_keeps_the_newest_only(tmp_path):
    config = dataclasses.replace(TrainingConfig(), epochs=2, checkpoint_every_steps=3, keep_checkpoints=1)
    fit(_model(), _data(5), _data(2), config, tmp_path)
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("step-*")) == ["step-00000010.weights.h5"]
    assert read_state(tmp_path / "checkpoints")["checkpoints"] == ["step-00000010.weights.h5"]


def test_no_training_time_before_training_begins(tmp_path):
    from seqtasks.checkpoints import TrainingCheckpoints
    from seqtasks.data.batching import training_position

    callback = TrainingCheckpoints(tmp_path, None, 2, "val_loss", "min", training_position())
    assert callback.train_seconds == 0.0 and callback.first_step_seconds is None


def test_every_state_written_is_strict_json_with_the_early_stopping_best_so_far(tmp_path, monkeypatch):
    import seqtasks.checkpoints

    written = []
    write = seqtasks.checkpoints.write_json_atomic

    def record(path, state):
        written.append(json.loads(json.dumps(state, allow_nan=False)))
        write(path, state)

    monkeypatch.setattr(seqtasks.checkpoints, "write_json_atomic", record)
    config = dataclasses.replace(TrainingConfig(), epochs=2, checkpoint_every_steps=2, early_stopping_patience=3)
    history = fit(_model(), _data(3), _data(2), config, tmp_path)
    # Steps 2, 3 (epoch end), 4, 6 (before and after the epoch's end), then the end of training.
    # Before the first epoch ends there is no best yet.
    first, second = history.history["val_loss"]
    assert second < first
    assert [(state["steps"], state["early_stopping"]["best"], state["done"]) for state in written] == [
        (2, None, False),
        (3, first, False),
        (4, first, False),
        (6, first, False),
        (6, second, False),
        (6, second, True),
    ]
    assert all(isinstance(state["early_stopping"]["best"], (float, type(None))) for state in written)


def test_a_finished_training_state_is_not_trained_again(tmp_path):
    config = dataclasses.replace(TrainingConfig(), epochs=2)
    first = fit(_model(), _data(5), _data(2), config, tmp_path)
    from seqtasks.checkpoints import restore

    model = _model()
    state = restore(model, tmp_path / "checkpoints")
    again = fit(model, _data(5), _data(2), config, tmp_path, state)
    assert again.history == first.history and again.batches_seen == 10
    assert again.train_seconds == state["train_seconds"]
    assert int(model.optimizer.iterations.numpy()) == state["optimizer_iterations"]


def test_a_resumed_run_keeps_the_early_stopping_count_and_the_time_already_trained(tmp_path):
    config = dataclasses.replace(TrainingConfig(), epochs=3, early_stopping_patience=4)
    fit(_model(), _data(5), _data(2), config, tmp_path)
    state = read_state(tmp_path / "checkpoints")
    assert state["early_stopping"]["wait"] == 0 and state["train_seconds"] > 0
    # Pretend the run was stopped after its second epoch with a stalled monitor.
    state.update(epoch=2, done=False, early_stopping={"wait": 3, "best": -1.0})
    from seqtasks.checkpoints import restore

    (tmp_path / "checkpoints" / "state.json").write_text(json.dumps(state))
    model = _model()
    history = fit(model, _data(5), _data(2), config, tmp_path, restore(model, tmp_path / "checkpoints"))
    resumed = read_state(tmp_path / "checkpoints")
    assert resumed["early_stopping"]["wait"] == 4  # one more epoch without beating -1.0
    assert len(history.history["loss"]) == 4  # three epochs of the first fit's history, then the third again
    assert history.train_seconds > state["train_seconds"]


def _run_folder(base, name, recipe="task: toy\n", state=None, metrics=False):
    folder = base / "toy" / name
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "recipe.yaml").write_text(recipe)
    if state is not None:
        (folder / "checkpoints" / "state.json").write_text(json.dumps(state))
    if metrics:
        (folder / "metrics.json").write_text("{}")
    return folder


@pytest.mark.parametrize(
    "folders, expected",
    [
        ([("20261122-100000", {}), ("20261122-110000", {})], "20261122-110000"),
        ([("20261122-110000", {}), ("20261122-110000-2", {})], "20261122-110000-2"),
        ([("20261122-100000", {}), ("20261122-110000", {"metrics": True})], "20261122-100000"),
        ([("20261122-100000", {}), ("20261122-110000", {"recipe": "task: toy\nseed: 2\n"})], "20261122-100000"),
        ([("20261122-100000", {"state": None})], None),
        ([("20261122-100000", {"state": {"worker": "worker:1"}})], None),
    ],
)
def test_the_run_resumed_is_the_newest_unfinished_one_of_the_same_recipe(tmp_path, folders, expected):
    for name, options in folders:
        _run_folder(tmp_path, name, **{"state": {"worker": ""}, **options})
    found = unfinished_run(tmp_path, "toy", "task: toy\n")
    assert (found.name if found else None) == expected
    assert unfinished_run(tmp_path / "elsewhere", "toy", "task: toy\n") is None


def _ordered_data(seed=3):
    import tensorflow as tf

    from seqtasks.data.batching import epoch_ordered

    x = np.random.default_rng(0).normal(size=(24, 4)).astype("float32")
    data = tf.data.Dataset.from_tensor_slices((x, x.sum(1, keepdims=True) - x[:, :1]))
    return epoch_ordered(data, 24, seed, lambda elements: elements.batch(4))  # 6 batches an epoch


def _stop_at_step(monkeypatch, step, config, run_dir):
    """Runs `fit` until a KeyboardInterrupt right after step `step` (its checkpoint, if any, written)."""
    from seqtasks.checkpoints import TrainingCheckpoints

    save_after_batch = TrainingCheckpoints.on_train_batch_end

    def stop(self, batch, logs=None):
        save_after_batch(self, batch, logs)
        if self.steps == step:
            raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(TrainingCheckpoints, "on_train_batch_end", stop)
        with pytest.raises(KeyboardInterrupt):
            fit(_model(), _ordered_data(), _data(1), config, run_dir)


def test_a_run_stopped_mid_epoch_resumes_from_its_checkpoint_and_ends_as_if_never_stopped(tmp_path, monkeypatch):
    from seqtasks.checkpoints import restore

    config = dataclasses.replace(TrainingConfig(), epochs=3, checkpoint_every_steps=4, keep_checkpoints=3)
    whole_model = _model()
    whole = fit(whole_model, _ordered_data(), _data(1), config, tmp_path / "whole")

    _stop_at_step(monkeypatch, 10, config, tmp_path / "stopped")
    folder = tmp_path / "stopped" / "checkpoints"
    state = read_state(folder)
    # The last checkpoint is step 8: epoch 1 (counted from 0) with 2 of its 6 batches done.
    assert (state["checkpoint"], state["epoch"], state["batches_done"], state["steps"], state["done"]) == (
        "step-00000008.weights.h5", 1, 2, 8, False)
    assert state["checkpoints"] == ["step-00000004.weights.h5", "step-00000006.weights.h5", "step-00000008.weights.h5"]
    # Keras counts one more optimizer iteration at the end of each epoch of data of unknown length
    # (the call that finds the data ended), so step 8 is iteration 9.
    assert state["optimizer_iterations"] == 9 and len(state["history"]["loss"]) == 1

    model = _model()
    restored = restore(model, folder)
    assert int(model.optimizer.iterations.numpy()) == 9
    resumed = fit(model, _ordered_data(), _data(1), config, tmp_path / "stopped", restored)
    assert resumed.batches_seen == whole.batches_seen == 18
    # The resumed epoch's training loss averages only the batches trained after resuming (issue 17).
    np.testing.assert_allclose(np.delete(resumed.history["loss"], 1), np.delete(whole.history["loss"], 1), rtol=1e-6)
    np.testing.assert_allclose(resumed.history["val_loss"], whole.history["val_loss"], rtol=1e-6)
    for ours, theirs in zip(model.get_weights(), whole_model.get_weights()):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)
    final = read_state(folder)
    assert (final["epoch"], final["batches_done"], final["steps"], final["done"]) == (3, 0, 18, True)
    assert final["checkpoints"] == ["step-00000012.weights.h5", "step-00000016.weights.h5", "step-00000018.weights.h5"]
    assert sorted(p.name for p in folder.glob("step-*")) == final["checkpoints"]


@pytest.mark.parametrize("wait, epochs, steps", [(1, 3, 12), (0, 4, 18)])
def test_early_stopping_counts_across_the_end_of_a_resumed_epoch(tmp_path, monkeypatch, wait, epochs, steps):
    # Resumed in epoch 2 of `epochs` (6 batches each) with patience 2 and a best of -1 that no epoch beats:
    # waiting one epoch already, the end of epoch 2 stops the run; waiting none, the end of epoch 3 does.
    from seqtasks.checkpoints import restore

    config = dataclasses.replace(TrainingConfig(), epochs=epochs, checkpoint_every_steps=4, keep_checkpoints=3)
    _stop_at_step(monkeypatch, 9, config, tmp_path)
    folder = tmp_path / "checkpoints"
    state = read_state(folder)
    assert (state["epoch"], state["batches_done"], state["checkpoints"]) == (
        1, 2, ["step-00000004.weights.h5", "step-00000006.weights.h5", "step-00000008.weights.h5"])
    state.update(early_stopping={"wait": wait, "best": -1.0}, best=-1.0)
    (folder / "state.json").write_text(json.dumps(state))
    model = _model()
    resumed = fit(
        model, _ordered_data(), _data(1), dataclasses.replace(config, early_stopping_patience=2), tmp_path,
        restore(model, folder),
    )
    assert resumed.batches_seen == steps and len(resumed.history["loss"]) == steps // 6
    final = read_state(folder)
    assert final["done"] and final["best"] == -1.0  # no epoch beat the best from before the interruption
    # The newest three checkpoints, those from before the interruption included.
    newest = [f"step-{step:08d}.weights.h5" for step in sorted({4, 6, 8} | set(range(12, steps + 1, 4)) | {steps})]
    assert final["checkpoints"] == newest[-3:]
    assert sorted(p.name for p in folder.glob("step-*")) == newest[-3:]


def _callback(tmp_path, state=None):
    import keras

    from seqtasks.checkpoints import TrainingCheckpoints
    from seqtasks.data.batching import training_position

    callback = TrainingCheckpoints(tmp_path, None, 2, "val_loss", "min", training_position(), state=state)
    callback.set_model(keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)]))
    return callback


def test_the_state_rounds_times_and_names_the_worker(tmp_path, monkeypatch):
    import time

    callback = _callback(tmp_path, state={"train_seconds": 1.23456789})
    callback.started = 100.0
    monkeypatch.setattr(time, "monotonic", lambda: 101.23456789)
    callback.on_train_batch_end(0)
    assert callback.first_step_seconds == 1.23
    callback.started = None
    callback.save()
    state = read_state(tmp_path)
    assert state["train_seconds"] == 1.235 and state["worker"] == ""


def test_a_model_without_an_optimizer_records_no_iterations(tmp_path):
    callback = _callback(tmp_path)
    callback.save()
    assert read_state(tmp_path)["optimizer_iterations"] is None


def test_a_nan_validation_loss_is_no_best_in_the_strict_json_state(tmp_path):
    import tensorflow as tf

    x = np.ones((8, 4), "float32")
    nan_data = tf.data.Dataset.from_tensor_slices((x, np.full((8, 1), np.nan, "float32"))).batch(8)
    config = dataclasses.replace(TrainingConfig(), epochs=1, early_stopping_patience=3)
    fit(_model(), _data(2), nan_data, config, tmp_path)
    text = (tmp_path / "checkpoints" / "state.json").read_text()
    state = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in the state"))
    assert state["best"] is None and state["early_stopping"] == {"wait": 0, "best": None}


def test_a_nan_loss_in_the_history_is_null_in_the_state_and_nan_again_on_resume(tmp_path):
    callback = _callback(tmp_path, state={"history": {"loss": [2.0, float("nan")], "val_loss": [float("inf")]}})
    callback.save()
    state = read_state(tmp_path)
    assert state["history"] == {"loss": [2.0, None], "val_loss": [None]}
    resumed = _callback(tmp_path, state=state)
    assert resumed.history["loss"][0] == 2.0 and np.isnan(resumed.history["loss"][1])
