"""Checkpoints: those a fit writes and keeps, the state it records, and a run resumed from them.

The state a run resumes from: reading `state.json`, choosing the checkpoint; the room a checkpoint needs.

A training run killed with SIGKILL resumes from its last checkpoint when the same command is run again.
"""

import collections
import dataclasses
import errno
import json
import locale
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest

from seqtasks.errors import SeqtasksError
from seqtasks.recipe.schema import TrainingConfig
from seqtasks.training.checkpoints import TrainingCheckpoints, read_state, restore
from seqtasks.training.fit import fit
from seqtasks.training.position import training_position
from tests.conftest import REPO
from tests.support.fit_helpers import checkpointed as _checkpointed, small_data as _data, small_model as _model


@pytest.mark.slow
@pytest.mark.core
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


@pytest.mark.slow
@pytest.mark.core
def test_keeping_one_checkpoint_keeps_the_newest_only(tmp_path):
    config = dataclasses.replace(TrainingConfig(), epochs=2, checkpoint_every_steps=3, keep_checkpoints=1)
    fit(_model(), _data(5), _data(2), config, tmp_path)
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("step-*")) == ["step-00000010.weights.h5"]
    assert read_state(tmp_path / "checkpoints")["checkpoints"] == ["step-00000010.weights.h5"]


def test_no_training_time_before_training_begins(tmp_path):
    from seqtasks.training.checkpoints import TrainingCheckpoints
    from seqtasks.training.position import training_position

    callback = TrainingCheckpoints(tmp_path, None, 2, "val_loss", "min", training_position())
    assert callback.train_seconds == 0.0 and callback.first_step_seconds is None


@pytest.mark.slow
@pytest.mark.core
def test_every_state_written_is_strict_json_with_the_early_stopping_best_so_far(tmp_path, monkeypatch):
    import seqtasks.training.checkpoints

    written = []
    write = seqtasks.training.checkpoints.write_json_atomic

    def record(path, state):
        written.append(json.loads(json.dumps(state, allow_nan=False)))
        write(path, state)

    monkeypatch.setattr(seqtasks.training.checkpoints, "write_json_atomic", record)
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


@pytest.mark.slow
@pytest.mark.core
def test_a_finished_training_state_is_not_trained_again(tmp_path):
    config = dataclasses.replace(TrainingConfig(), epochs=2)
    first = fit(_model(), _data(5), _data(2), config, tmp_path)
    from seqtasks.training.checkpoints import restore

    model = _model()
    state = restore(model, tmp_path / "checkpoints")
    again = fit(model, _data(5), _data(2), config, tmp_path, state)
    assert again.history == first.history and again.batches_seen == 10
    assert again.train_seconds == state["train_seconds"]
    assert int(model.optimizer.iterations.numpy()) == state["optimizer_iterations"]


@pytest.mark.slow
@pytest.mark.core
def test_a_resumed_run_keeps_the_early_stopping_count_and_the_time_already_trained(tmp_path):
    config = dataclasses.replace(TrainingConfig(), epochs=3, early_stopping_patience=4)
    fit(_model(), _data(5), _data(2), config, tmp_path)
    state = read_state(tmp_path / "checkpoints")
    assert state["early_stopping"]["wait"] == 0 and state["train_seconds"] > 0
    # Pretend the run was stopped after its second epoch with a stalled monitor.
    state.update(epoch=2, done=False, early_stopping={"wait": 3, "best": -1.0})
    from seqtasks.training.checkpoints import restore

    (tmp_path / "checkpoints" / "state.json").write_text(json.dumps(state))
    model = _model()
    history = fit(model, _data(5), _data(2), config, tmp_path, restore(model, tmp_path / "checkpoints"))
    resumed = read_state(tmp_path / "checkpoints")
    assert resumed["early_stopping"]["wait"] == 4  # one more epoch without beating -1.0
    assert len(history.history["loss"]) == 4  # three epochs of the first fit's history, then the third again
    assert history.train_seconds > state["train_seconds"]


def _ordered_data(seed=3):
    import tensorflow as tf

    from seqtasks.data.batching import epoch_ordered

    x = np.random.default_rng(0).normal(size=(24, 4)).astype("float32")
    data = tf.data.Dataset.from_tensor_slices((x, x.sum(1, keepdims=True) - x[:, :1]))
    return epoch_ordered(data, 24, seed, lambda elements: elements.batch(4))  # 6 batches an epoch


def _dropout_model():
    """`_model` with dropout on its input: its masks come from a seed generator whose state a resume must restore."""
    import keras

    from seqtasks.training.fit import make_optimizer

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dropout(0.5), keras.layers.Dense(1)])
    model.compile(optimizer=make_optimizer(TrainingConfig(learning_rate=0.01)), loss="mse", metrics=["mae"])
    return model


def _stop_at_step(monkeypatch, step, config, run_dir, make_model=_model):
    """Runs `fit` until a KeyboardInterrupt right after step `step` (its checkpoint, if any, written)."""
    from seqtasks.training.checkpoints import TrainingCheckpoints

    save_after_batch = TrainingCheckpoints.on_train_batch_end

    def stop(self, batch, logs=None):
        save_after_batch(self, batch, logs)
        if self.steps == step:
            raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(TrainingCheckpoints, "on_train_batch_end", stop)
        with pytest.raises(KeyboardInterrupt):
            fit(make_model(), _ordered_data(), _data(1), config, run_dir)


@pytest.mark.slow
@pytest.mark.core
def test_a_run_stopped_mid_epoch_resumes_from_its_checkpoint_and_ends_as_if_never_stopped(tmp_path, monkeypatch):
    from seqtasks.training.checkpoints import restore

    config = dataclasses.replace(TrainingConfig(), epochs=3, checkpoint_every_steps=4, keep_checkpoints=3)
    whole_model = _dropout_model()
    whole = fit(whole_model, _ordered_data(), _data(1), config, tmp_path / "whole")

    _stop_at_step(monkeypatch, 10, config, tmp_path / "stopped", make_model=_dropout_model)
    folder = tmp_path / "stopped" / "checkpoints"
    state = read_state(folder)
    # The last checkpoint is step 8: epoch 1 (counted from 0) with 2 of its 6 batches done.
    assert (state["checkpoint"], state["epoch"], state["batches_done"], state["steps"], state["done"]) == (
        "step-00000008.weights.h5", 1, 2, 8, False)
    assert state["checkpoints"] == ["step-00000004.weights.h5", "step-00000006.weights.h5", "step-00000008.weights.h5"]
    # Keras counts one more optimizer iteration at the end of each epoch of data of unknown length
    # (the call that finds the data ended), so step 8 is iteration 9.
    assert state["optimizer_iterations"] == 9 and len(state["history"]["loss"]) == 1

    model = _dropout_model()
    restored = restore(model, folder)
    assert int(model.optimizer.iterations.numpy()) == 9
    resumed = fit(model, _ordered_data(), _data(1), config, tmp_path / "stopped", restored)
    assert resumed.batches_seen == whole.batches_seen == 18
    # The resumed epoch's training loss averages all its batches: the running mean was checkpointed.
    assert sorted(resumed.history) == ["loss", "mae", "val_loss", "val_mae"]
    for key, values in whole.history.items():
        np.testing.assert_allclose(resumed.history[key], values, rtol=1e-6)
    for ours, theirs in zip(model.get_weights(), whole_model.get_weights()):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)
    final = read_state(folder)
    assert (final["epoch"], final["batches_done"], final["steps"], final["done"]) == (3, 0, 18, True)
    assert final["checkpoints"] == ["step-00000012.weights.h5", "step-00000016.weights.h5", "step-00000018.weights.h5"]
    assert sorted(p.name for p in folder.glob("step-*")) == final["checkpoints"]


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.parametrize("wait, epochs, steps", [(1, 3, 12), (0, 4, 18)])
def test_early_stopping_counts_across_the_end_of_a_resumed_epoch(tmp_path, monkeypatch, wait, epochs, steps):
    # Resumed in epoch 2 of `epochs` (6 batches each) with patience 2 and a best of -1 that no epoch beats:
    # waiting one epoch already, the end of epoch 2 stops the run; waiting none, the end of epoch 3 does.
    from seqtasks.training.checkpoints import restore

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

    from seqtasks.training.checkpoints import TrainingCheckpoints
    from seqtasks.training.position import training_position

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


@pytest.mark.slow
@pytest.mark.core
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


def test_the_last_batch_logs_are_checkpointed_and_an_epoch_resumed_after_its_last_batch_records_them(tmp_path):
    callback = _callback(tmp_path)
    callback.on_train_begin()
    callback.on_epoch_begin(0)
    callback.on_train_batch_end(0, {"loss": np.float32(2.5), "mae": np.float32("nan")})
    callback.save()
    state = read_state(tmp_path)
    assert (state["epoch"], state["batches_done"], state["epoch_logs"]) == (0, 1, {"loss": 2.5, "mae": None})
    # Resumed after that batch, the epoch's last: Keras runs no batch and logs no training loss; the checkpoint has it.
    for logs, validation in ((None, {}), ({"val_loss": 1.5}, {"val_loss": [1.5]})):
        resumed = _callback(tmp_path, state=state)
        resumed.on_epoch_begin(0)
        resumed.on_epoch_end(0, logs)
        assert sorted(resumed.history) == sorted(["loss", "mae", *validation])
        assert resumed.history["loss"] == [2.5] and np.isnan(resumed.history["mae"]).tolist() == [True]
        assert read_state(tmp_path)["history"] == {"loss": [2.5], "mae": [None], **validation}


@pytest.mark.parametrize(
    "batches_done, epoch, position, metrics, history",
    [
        (2, 1, (1, 2), [7.0, 2.0], {"loss": [3.5], "val_loss": [1.0]}),  # the epoch stopped part way goes on
        (2, 3, (3, 0), [0.0, 0.0], {"val_loss": [1.0]}),  # another epoch starts afresh
        (0, 1, (1, 0), [0.0, 0.0], {"val_loss": [1.0]}),  # a state at an epoch's boundary has nothing to go on from
    ],
)
def test_an_epoch_goes_on_from_the_checkpointed_running_metrics_only_where_it_stopped(
    tmp_path, batches_done, epoch, position, metrics, history
):
    from seqtasks.training.checkpoints import TrainingCheckpoints
    from seqtasks.training.position import TrainingPosition

    state = {"epoch": 1, "batches_done": batches_done, "steps": 8, "epoch_metrics": [7.0, 2.0], "epoch_logs": {"loss": 3.5}}
    model, where = _model(), TrainingPosition()
    callback = TrainingCheckpoints(tmp_path, None, 2, "val_loss", "min", where, state=state)
    callback.set_model(model)
    callback.on_epoch_begin(epoch)
    assert (int(where.epoch.numpy()), int(where.batches_done.numpy())) == position
    # The loss's running total and count, which Keras has just reset.
    assert [float(variable.numpy()) for variable in model.metrics_variables] == metrics
    callback.on_epoch_end(epoch, {"val_loss": 1.0})
    assert callback.history == history
    saved = read_state(tmp_path)
    assert (saved["epoch"], saved["batches_done"], saved["epoch_logs"]) == (epoch + 1, 0, {})


def test_the_state_records_the_kept_checkpoints_before_it_and_no_other(tmp_path):
    from seqtasks.training.checkpoints import TrainingCheckpoints
    from seqtasks.training.position import training_position

    _checkpointed(tmp_path, [(3, 1.0), (6, 2.0)])
    state = read_state(tmp_path)
    assert [record["steps"] for record in state["earlier"]] == [3]
    # A resumed run goes on with the records of the checkpoint it resumed from and those before it.
    callback = TrainingCheckpoints(tmp_path, None, 3, "val_loss", "min", training_position(), state=state)
    callback.set_model(_model())
    callback.steps = 9
    callback.save()
    saved = read_state(tmp_path)
    assert saved["earlier"] == [state["earlier"][0], {key: value for key, value in state.items() if key != "earlier"}]
    # A checkpoint rotated out, or written again at the same step, leaves no record behind.
    callback.steps = 12
    callback.save()
    callback.save()
    saved = read_state(tmp_path)
    assert saved["checkpoints"] == ["step-00000006.weights.h5", "step-00000009.weights.h5", "step-00000012.weights.h5"]
    assert [record["steps"] for record in saved["earlier"]] == [6, 9]


def _files(folder):
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_a_truncated_latest_checkpoint_is_reported_kept_and_the_one_before_it_resumed(tmp_path):
    from seqtasks.training.checkpoints import TrainingCheckpoints, restore
    from seqtasks.training.position import training_position

    _checkpointed(tmp_path, [(3, 1.0), (6, 2.0)])
    latest = tmp_path / "step-00000006.weights.h5"
    whole = latest.read_bytes()
    latest.write_bytes(whole[: len(whole) // 2])
    state_text = (tmp_path / "state.json").read_text()
    lines, model = [], _model()
    state = restore(model, tmp_path, log=lines.append)
    assert lines == [
        f"{latest}: damaged ({len(whole) // 2} bytes; {len(whole)} were written); kept as "
        "step-00000006.weights.h5.damaged; resuming from step-00000003.weights.h5 instead"
    ]
    assert (state["steps"], state["checkpoints"], state["earlier"]) == (3, ["step-00000003.weights.h5"], [])
    assert all((weight == 1.0).all() for weight in model.get_weights())
    # Nothing deleted: the damaged file is kept under another name, out of the rotation.
    assert _files(tmp_path) == {
        "state.json": state_text.encode(),
        "step-00000003.weights.h5": (tmp_path / "step-00000003.weights.h5").read_bytes(),
        "step-00000006.weights.h5.damaged": whole[: len(whole) // 2],
    }
    # Training goes on from step 3 with step 3's state.
    callback = TrainingCheckpoints(tmp_path, None, 3, "val_loss", "min", training_position(), state=state)
    callback.set_model(model)
    callback.steps = 4
    callback.save()
    saved = read_state(tmp_path)
    assert saved["checkpoints"] == ["step-00000003.weights.h5", "step-00000004.weights.h5"]
    assert [record["steps"] for record in saved["earlier"]] == [3]
    assert (tmp_path / "step-00000006.weights.h5.damaged").is_file()


def test_a_checkpoint_whose_bytes_changed_or_that_does_not_load_is_passed_over(tmp_path):
    from seqtasks.training.checkpoints import restore

    _checkpointed(tmp_path, [(3, 1.0), (6, 2.0), (9, 3.0)])
    middle, latest = tmp_path / "step-00000006.weights.h5", tmp_path / "step-00000009.weights.h5"
    data = bytearray(latest.read_bytes())
    data[-1] ^= 0xFF  # same size, other bytes
    latest.write_bytes(bytes(data))
    middle.unlink()
    lines, model = [], _model()
    assert restore(model, tmp_path, log=lines.append)["steps"] == 3
    assert lines == [
        f"{latest}: damaged (its SHA-256 differs from the one recorded when it was written); kept as "
        "step-00000009.weights.h5.damaged; resuming from step-00000003.weights.h5 instead",
        f"{middle}: missing; resuming from step-00000003.weights.h5 instead",
    ]
    # A state from before sizes and digests were recorded: the file does not load.
    state = read_state(tmp_path)
    (tmp_path / "step-00000003.weights.h5").write_bytes(b"not HDF5")
    (tmp_path / "state.json").write_text(json.dumps({"checkpoint": "step-00000003.weights.h5", "steps": 3}))
    with pytest.raises(SeqtasksError) as error:
        restore(_model(), tmp_path, log=pytest.fail)
    assert str(error.value).startswith(f"{tmp_path / 'step-00000003.weights.h5'}: cannot be loaded (")
    assert str(error.value).endswith(
        "), and no earlier checkpoint is kept; give the command again with --fresh to start a new run "
        "(this folder is left as it is)"
    )
    assert state["steps"] == 9


def test_when_no_kept_checkpoint_is_intact_resuming_is_refused_and_nothing_renamed(tmp_path):
    from seqtasks.training.checkpoints import restore

    _checkpointed(tmp_path, [(3, 1.0), (6, 2.0)])
    for path in tmp_path.glob("step-*"):
        path.write_bytes(path.read_bytes()[:100])
    before = _files(tmp_path)
    with pytest.raises(SeqtasksError) as error:
        restore(_model(), tmp_path, log=pytest.fail)
    assert str(error.value).startswith(f"{tmp_path / 'step-00000006.weights.h5'}: damaged (100 bytes; ")
    assert str(error.value).endswith(
        "were written); the earlier ones too; give the command again with --fresh to start a new run "
        "(this folder is left as it is)"
    )
    assert _files(tmp_path) == before


def test_a_full_disk_while_checkpointing_is_one_error_and_the_checkpoints_before_are_intact(tmp_path, monkeypatch):
    import errno
    import os

    callback = _checkpointed(tmp_path, [(3, 1.0)])
    before = _files(tmp_path)

    def full_disk(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)  # where a full disk shows at the latest
    callback.steps = 6
    with pytest.raises(SeqtasksError) as error:
        callback.save()
    assert str(error.value) == (
        f"{tmp_path / 'step-00000006.weights.h5'}: cannot write the checkpoint (No space left on device); "
        f"the checkpoints written before it in {tmp_path} are intact"
    )
    assert _files(tmp_path) == before  # no temporary file left, state.json untouched


def test_a_checkpoint_file_holds_what_save_weights_writes(tmp_path):
    from seqtasks.training.checkpoints import weights_file_bytes

    callback = _checkpointed(tmp_path, [(3, 1.5)])
    callback.model.save_weights(tmp_path / "keras.weights.h5")
    theirs = _datasets(tmp_path / "keras.weights.h5")
    # The kernel and bias; the optimizer's iterations, learning rate and both moments of each.
    assert len(theirs) == 8
    assert _datasets(weights_file_bytes(callback.model)) == theirs
    assert _datasets(tmp_path / "step-00000003.weights.h5") == theirs


def test_without_keras_private_state_writer_a_checkpoint_is_written_through_save_weights(tmp_path, monkeypatch):
    from seqtasks.training.checkpoints import weights_file_bytes

    callback = _checkpointed(tmp_path / "private", [(3, 1.5)])
    expected = weights_file_bytes(callback.model)
    _store_takes_paths_only(monkeypatch)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    public = weights_file_bytes(callback.model, scratch)
    assert list(scratch.iterdir()) == []  # the temporary folder is gone


    assert len(_datasets(public)) == 8 and _datasets(public) == _datasets(expected)


def _datasets(source):
    """Every dataset of an HDF5 weights file (its path or its bytes), by name."""
    import io

    import h5py

    found = {}
    with h5py.File(io.BytesIO(source) if isinstance(source, bytes) else source) as opened:
        opened.visititems(lambda name, item: found.update({name: item[()].tolist()} if hasattr(item, "shape") else {}))
    return found


def _store_takes_paths_only(monkeypatch):
    """Keras' HDF5 store as in a release whose store takes no file object, only a path."""
    import os

    from keras.src.saving import saving_lib

    class PathsOnly(saving_lib.H5IOStore):
        def __init__(self, target, *args, **kwargs):
            if not isinstance(target, (str, os.PathLike)):
                raise TypeError("H5IOStore() takes a path")
            super().__init__(target, *args, **kwargs)

    monkeypatch.setattr(saving_lib, "H5IOStore", PathsOnly)


def _keras_version():
    import keras

    return tuple(int(part) for part in keras.__version__.split(".")[:2])


@pytest.mark.skipif(not (3, 12) <= _keras_version() <= (3, 15), reason="the in-memory writer of Keras 3.12 to 3.15")
def test_a_checkpoint_file_is_made_in_memory_so_hdf5_never_writes_to_the_disk(tmp_path):
    callback = _checkpointed(tmp_path, [(3, 1.5)])
    before = callback.model.get_weights()
    expected = _datasets(tmp_path / "step-00000003.weights.h5")
    callback.model.save_weights = pytest.fail  # HDF5 writing a file: what a full disk must never reach
    callback.steps = 6
    callback.save()
    written = tmp_path / "step-00000006.weights.h5"
    assert _datasets(written) == expected
    assert all(np.array_equal(a, b) for a, b in zip(callback.model.get_weights(), before))


def test_without_keras_private_state_writer_the_file_is_made_in_a_hidden_folder_of_the_checkpoint_folder(
    tmp_path, monkeypatch
):
    import tempfile

    folder = tmp_path / "checkpoints"
    callback = _checkpointed(folder, [(3, 1.5)])

    _store_takes_paths_only(monkeypatch)
    # The system's temporary folder is unusable (another, full disk): the checkpoint folder's room was checked.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-temporary-folder"))
    working = tmp_path / "working"
    working.mkdir()
    monkeypatch.chdir(working)
    listed = []
    save_weights = callback.model.save_weights

    def listing_then_saving(path):
        listed.append(sorted(p.name for p in folder.iterdir()))
        return save_weights(path)

    callback.model.save_weights = listing_then_saving
    before = _files(folder)
    callback.steps = 6
    callback.save()
    assert len(listed) == 1
    made = [name for name in listed[0] if name not in before]
    assert len(made) == 1 and made[0].startswith(".")  # hidden while it is written, like the temporary files
    assert not (folder / made[0]).exists()  # gone again
    assert sorted(p.name for p in folder.iterdir()) == [
        "state.json",
        "step-00000003.weights.h5",
        "step-00000006.weights.h5",
    ]
    assert _datasets(folder / "step-00000006.weights.h5") == _datasets(folder / "step-00000003.weights.h5")
    assert list(working.iterdir()) == []  # nothing written where the command was given


def test_a_checkpoint_that_would_not_fit_on_the_disk_is_not_started(tmp_path, monkeypatch):
    import collections
    import shutil

    callback = _checkpointed(tmp_path, [(3, 1.0)])
    before = _files(tmp_path)
    size = (tmp_path / "step-00000003.weights.h5").stat().st_size
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 500_000, 500_000))
    callback.model.save_weights = pytest.fail
    callback.steps = 6
    with pytest.raises(SeqtasksError) as error:
        callback.save()
    assert str(error.value) == (
        f"{tmp_path / 'step-00000006.weights.h5'}: no space left on the device for the checkpoint (0.5 MB free, "
        f"about {(size + (1 << 20)) / 1e6:.1f} MB needed); the checkpoints written before it in {tmp_path} are intact"
    )
    assert _files(tmp_path) == before


def test_a_checkpoint_file_that_cannot_be_made_is_one_error_and_the_checkpoints_before_are_intact(
    tmp_path, monkeypatch
):
    import builtins
    import errno
    import os

    callback = _checkpointed(tmp_path, [(3, 1.0)])
    before = _files(tmp_path)
    temporary = tmp_path / ".step-00000006.weights.h5"
    real_open = builtins.open

    def no_room(file, *args, **kwargs):
        if str(file) == str(temporary):  # the disk is too full for even an empty file
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", no_room)
    callback.steps = 6
    with pytest.raises(SeqtasksError) as error:
        callback.save()
    assert str(error.value) == (
        f"{tmp_path / 'step-00000006.weights.h5'}: cannot write the checkpoint (No space left on device); "
        f"the checkpoints written before it in {tmp_path} are intact"
    )
    assert _files(tmp_path) == before


def _weightless_model():
    import keras

    return keras.Sequential([keras.Input((4,)), keras.layers.Activation("relu")])


@pytest.mark.parametrize(
    "make_model, state, needed",
    [
        # The kernel and bias (5 float32) and Adam's variables: its int64 iterations, its float32 learning rate,
        # and two moments of each weight: 20 + 8 + 4 + 40 bytes.
        (None, None, 72),
        # No variables, and a last checkpoint from before sizes were recorded: the spare room alone.
        (_weightless_model, {"checkpoint": "step-00000003.weights.h5", "checkpoints": ["step-00000003.weights.h5"]}, 0),
    ],
)
def test_a_checkpoint_needs_its_variables_bytes_and_one_mebibyte_free(tmp_path, monkeypatch, make_model, state, needed):
    import collections
    import shutil

    from seqtasks.training.checkpoints import TrainingCheckpoints
    from seqtasks.training.position import training_position

    if make_model is None:
        callback = _checkpointed(tmp_path, [])
    else:
        callback = TrainingCheckpoints(tmp_path, None, 2, "val_loss", "min", training_position(), state=state)
        callback.set_model(make_model())
    usage = collections.namedtuple("usage", "total used free")
    needed += 1 << 20
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - needed + 1, needed - 1))
    callback.steps = 6
    with pytest.raises(SeqtasksError, match=r"no space left on the device for the checkpoint \(1\.0 MB free, about "):
        callback.save()
    assert not list(tmp_path.glob("*step-00000006*"))
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - needed, needed))
    callback.save()
    assert read_state(tmp_path)["checkpoint"] == "step-00000006.weights.h5"


@pytest.mark.slow
def test_a_diverged_run_stops_at_its_first_non_finite_loss_and_checkpoints_nothing_of_it(tmp_path):
    import tensorflow as tf

    x = np.ones((16, 4), "float32")
    y = np.ones((16, 1), "float32")
    y[9] = np.inf  # the second batch of 8
    config = dataclasses.replace(TrainingConfig(), epochs=2, checkpoint_every_steps=1)
    with pytest.raises(SeqtasksError) as error:
        fit(_model(), tf.data.Dataset.from_tensor_slices((x, y)).batch(8), _data(1), config, tmp_path)
    assert str(error.value) == (
        "training diverged: the loss is inf at step 2 (epoch 1); no model was saved or exported "
        "(try a lower training.learning_rate than 0.001)"
    )
    state = read_state(tmp_path / "checkpoints")
    assert (state["steps"], state["checkpoints"], state["done"]) == (1, ["step-00000001.weights.h5"], False)
    assert not (tmp_path / "checkpoints" / "best.weights.h5").exists()


@pytest.mark.slow
def test_a_run_stopped_after_the_last_step_of_an_epoch_resumes_with_its_training_loss(tmp_path, monkeypatch):
    # Step 6 ends the first epoch (6 batches); its step checkpoint is written before the epoch's end is.
    from seqtasks.training.checkpoints import restore

    config = dataclasses.replace(TrainingConfig(), epochs=2, checkpoint_every_steps=3)
    whole = fit(_model(), _ordered_data(), _data(1), config, tmp_path / "whole")
    _stop_at_step(monkeypatch, 6, config, tmp_path / "stopped")
    folder = tmp_path / "stopped" / "checkpoints"
    state = read_state(folder)
    assert (state["epoch"], state["batches_done"], state["history"]) == (0, 6, {})
    model = _model()
    resumed = fit(model, _ordered_data(), _data(1), config, tmp_path / "stopped", restore(model, folder))
    assert sorted(resumed.history) == ["loss", "val_loss"]
    assert len(resumed.history["loss"]) == len(resumed.history["val_loss"]) == 2
    for key in ("loss", "val_loss"):
        np.testing.assert_allclose(resumed.history[key], whole.history[key], rtol=1e-6)
    assert read_state(folder)["history"] == json.loads(json.dumps(resumed.history))


_FRESH = (
    "the run cannot resume from it: give the command again with --fresh to start a new run "
    "(this folder is left as it is)"
)


def _damaged(path, problem):
    return f"{path}: damaged training state ({problem}); {_FRESH}"


@pytest.mark.parametrize(
    "text, problem",
    [
        ("[1, 2]", "not a state"),
        ('"step-00000003.weights.h5"', "not a state"),
        ('{"steps": 3}', "not a state"),
        ('{"checkpoint": 3, "steps": 3}', "not a state"),
        ("", "Expecting value: line 1 column 1"),
        ('{\n  "checkpoint": "step-00000003.weights.h5",\n  "steps"', "Expecting ':' delimiter: line 3 column 10"),
    ],
)
def test_a_state_that_is_no_training_state_is_refused_naming_what_is_wrong(tmp_path, text, problem):
    (tmp_path / "state.json").write_text(text)
    with pytest.raises(SeqtasksError) as error:
        read_state(tmp_path)
    assert str(error.value) == _damaged(tmp_path / "state.json", problem)
    assert (tmp_path / "state.json").read_text() == text  # left as it is


def test_a_state_with_bytes_that_are_not_utf8_is_refused_naming_the_byte(tmp_path):
    (tmp_path / "state.json").write_bytes(b'{"checkpoint": "\xff"}')
    with pytest.raises(SeqtasksError) as error:
        read_state(tmp_path)
    assert str(error.value) == _damaged(
        tmp_path / "state.json", "'utf-8' codec can't decode byte 0xff in position 16: invalid start byte"
    )


def test_a_state_that_cannot_be_read_is_refused_with_the_systems_reason(tmp_path, monkeypatch):
    path = tmp_path / "state.json"
    path.write_text('{"checkpoint": "step-00000003.weights.h5"}')
    read_text = Path.read_text

    def failing(self, *args, **kwargs):
        if self == path:
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(self))
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", failing)
    with pytest.raises(SeqtasksError) as error:
        read_state(tmp_path)
    assert str(error.value) == _damaged(path, "Input/output error")


def test_a_state_is_read_as_utf8_whatever_the_locales_encoding(tmp_path):
    # json.dumps writes ASCII, but a state edited by hand may hold any character.
    state = {"checkpoint": "step-00000003.weights.h5", "note": "résumé"}
    (tmp_path / "state.json").write_bytes(json.dumps(state, ensure_ascii=False).encode("utf-8"))
    previous = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # its encoding, ASCII, is what Python reads text in when told none
    try:
        found = read_state(tmp_path)
    finally:
        locale.setlocale(locale.LC_CTYPE, previous)
    assert found == state


def _one_checkpoint(folder):
    """A state naming one checkpoint file whose size and digest were not recorded."""
    (folder / "step-00000003.weights.h5").write_bytes(b"weights")
    (folder / "state.json").write_text(json.dumps({"checkpoint": "step-00000003.weights.h5", "steps": 3}))
    return folder / "step-00000003.weights.h5"


@pytest.mark.parametrize(
    "failure, reason",
    [
        (
            ValueError("Layer 'dense' expected 2 variables, but received 0\nwhile loading the weights"),
            "Layer 'dense' expected 2 variables, but received 0",
        ),
        (RuntimeError(), "RuntimeError"),
        (OSError(), "OSError"),
    ],
    ids=["two-lines", "no-message", "no-message-oserror"],
)
def test_a_checkpoint_that_does_not_load_is_reported_with_the_first_line_of_the_error_or_its_type(
    tmp_path, monkeypatch, failure, reason
):
    path = _one_checkpoint(tmp_path)
    model = _model()

    def load_weights(filepath):
        assert filepath == str(path)
        raise failure

    monkeypatch.setattr(model, "load_weights", load_weights)
    with pytest.raises(SeqtasksError) as error:
        restore(model, tmp_path, log=pytest.fail)
    assert str(error.value) == (
        f"{path}: cannot be loaded ({reason}), and no earlier checkpoint is kept; give the command again with "
        "--fresh to start a new run (this folder is left as it is)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json", "step-00000003.weights.h5"]


def test_a_model_compiled_without_an_optimizer_gets_the_checkpoints_weights(tmp_path):
    _checkpointed(tmp_path, [(3, 1.5)])
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=None, loss="mse")
    assert model.optimizer is None
    state = restore(model, tmp_path, log=pytest.fail)
    assert state["steps"] == 3 and state["earlier"] == []
    assert [weight.tolist() for weight in model.get_weights()] == [[[1.5]] * 4, [1.5]]


def test_records_that_are_not_checkpoints_are_passed_over_and_the_state_lists_its_earlier_ones_last(tmp_path):
    _checkpointed(tmp_path, [(3, 1.0), (6, 2.0)])
    written = json.loads((tmp_path / "state.json").read_text())
    first = written["earlier"][0]
    assert list(written).index("earlier") < len(written) - 1  # state.json's keys are sorted
    written["earlier"] = [{"steps": 1, "epoch": 0}, 7, first]
    (tmp_path / "state.json").write_text(json.dumps(written))
    model = _model()
    state = restore(model, tmp_path, log=pytest.fail)
    expected = {key: value for key, value in written.items() if key != "earlier"}
    assert state == {**expected, "earlier": [first]}
    assert list(state) == [*expected, "earlier"]
    assert all((weight == 2.0).all() for weight in model.get_weights())


class _Vocabulary(keras.layers.Layer):
    """A layer keeping its words in a string variable: a dtype NumPy has no item size for."""

    def build(self, input_shape):
        self.words = self.add_weight(
            shape=(250_000,), dtype="string", initializer=lambda shape, dtype: np.full(shape, "w"), trainable=False
        )

    def call(self, inputs):
        return inputs


@pytest.mark.parametrize(
    "dtype, needed",
    [
        # 999 * 250 + 250 = 250,000 variables, plus 1 MiB to spare.
        ("float32", "2.0 MB"),  # 4 bytes each
        ("float16", "1.5 MB"),  # 2 bytes each
        ("float64", "3.0 MB"),  # 8 bytes each
        ("string", "2.0 MB"),  # counted as 4 bytes each
    ],
)
def test_the_room_a_first_checkpoint_needs_is_its_variables_item_sizes(tmp_path, monkeypatch, dtype, needed):
    usage = collections.namedtuple("usage", "total used free")
    # 1,050,001 bytes: 1.1 MB, a byte past where one decimal rounds up.
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 1_050_001, 1_050_001))
    callback = TrainingCheckpoints(tmp_path, None, 2, "val_loss", "min", training_position())
    layer = _Vocabulary() if dtype == "string" else keras.layers.Dense(250, dtype=dtype)
    callback.set_model(keras.Sequential([keras.Input((999,)), layer]))
    callback.steps = 3
    with pytest.raises(SeqtasksError) as error:
        callback.save()
    assert str(error.value) == (
        f"{tmp_path / 'step-00000003.weights.h5'}: no space left on the device for the checkpoint (1.1 MB free, "
        f"about {needed} needed); the checkpoints written before it in {tmp_path} are intact"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_kept_steps_are_the_step_checkpoints_numbers_in_order(tmp_path):
    from seqtasks.training.checkpoints import kept_steps, step_file

    assert kept_steps(tmp_path / "absent") == []
    for steps in (120, 7, 1000000000):
        (tmp_path / step_file(steps)).write_bytes(b"")
    (tmp_path / "step-5.weights.h5").write_bytes(b"")  # a name written by hand: one digit
    for other in ("step-0000001x.weights.h5", "step-x0000001.weights.h5", "step-00000003.weights.h5.tmp",
                  "best.weights.h5", "step-.weights.h5"):
        (tmp_path / other).write_bytes(b"")
    assert kept_steps(tmp_path) == [5, 7, 120, 1000000000]


_EVERY = 25
_OVERRIDES = [
    "training.epochs=2",
    "data.train_size=1200",  # 150 steps an epoch
    "data.validation_size=100",
    "training.batch_size=8",
    f"training.checkpoint_every_steps={_EVERY}",
    "export.enabled=false",
    # A small model: what is under test is where training resumes, not what it learns.
    "model.embedding_dim=8",
    "model.encoder.units=8",
    "model.decoder.units=16",
]


def _command(output_dir):
    command = [sys.executable, "-m", "seqtasks", "run", "toy", "--output-dir", str(output_dir)]
    for override in _OVERRIDES:
        command += ["--set", override]
    return command


def _start(output_dir):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.Popen(
        _command(output_dir), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO
    )


def _state(output_dir):
    paths = list(output_dir.glob("toy/*/checkpoints/state.json"))
    return json.loads(paths[0].read_text()) if paths else None


@pytest.mark.slow
def test_a_run_killed_mid_epoch_resumes_from_its_last_checkpoint_and_ends_as_if_never_stopped(tmp_path):
    reference = _start(tmp_path / "reference")
    killed = _start(tmp_path / "killed")
    try:
        deadline = time.monotonic() + 300
        seen = None
        # Wait for a checkpoint in the second epoch, then kill without warning.
        while time.monotonic() < deadline and killed.poll() is None:
            seen = _state(tmp_path / "killed")  # renamed into place whole: never half written
            if seen and seen["epoch"] == 1 and seen["batches_done"] >= 2 * _EVERY:
                os.kill(killed.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
        output = killed.communicate(timeout=60)[0]
        assert killed.returncode == -signal.SIGKILL, output[-3000:]
        reference_output = reference.communicate(timeout=300)[0]
        assert reference.returncode == 0, reference_output[-3000:]
    finally:
        for process in (reference, killed):
            process.kill()
    assert not list((tmp_path / "killed").glob("toy/*/metrics.json"))
    at_kill = _state(tmp_path / "killed")
    assert at_kill["steps"] >= seen["steps"] and at_kill["steps"] % _EVERY == 0 and not at_kill["done"]

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    resumed = subprocess.run(_command(tmp_path / "killed"), capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    (run_dir,) = (tmp_path / "killed").glob("toy/*")  # the same folder, no new one
    assert f"Resuming the unfinished run in {run_dir}" in resumed.stdout
    assert f"Resuming from step {at_kill['steps']} (epoch 2, batch {at_kill['batches_done']})" in resumed.stdout

    final, expected = _state(tmp_path / "killed"), _state(tmp_path / "reference")
    assert final["done"] and final["steps"] == expected["steps"] == 300
    assert final["optimizer_iterations"] == expected["optimizer_iterations"]
    # Same weights, optimizer state and data order as the run that was never stopped.
    np.testing.assert_allclose(final["history"]["val_loss"], expected["history"]["val_loss"], rtol=1e-5)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    reference_metrics = json.loads(next((tmp_path / "reference").glob("toy/*/metrics.json")).read_text())
    assert metrics["validation"] == reference_metrics["validation"]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == [
        "best.weights.h5",
        "state.json",
        "step-00000275.weights.h5",
        "step-00000300.weights.h5",
    ]
