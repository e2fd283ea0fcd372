"""Progress a person can read: each epoch's steps known from the start, an ETA per epoch and for the run."""

import io
from types import SimpleNamespace

import pytest

from seqtasks.training.progress import TrainingProgress, count_batches, duration, format_logs


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def bar(filled):
    return "━" * filled + "─" * (20 - filled)


def _progress(epochs=3, steps=4, budget=None, live=False, batches_done=0):
    clock, out = Clock(), io.StringIO()
    checkpoints = SimpleNamespace(batches_done=batches_done, train_seconds=0.0)
    progress = TrainingProgress(epochs, steps, checkpoints, budget, out=out, live=live, clock=clock)
    progress.set_model(SimpleNamespace(stop_training=False))
    progress.on_train_begin()
    return progress, clock, out, checkpoints


def _epoch(progress, clock, epoch, batch_times, end, logs=None):
    """One epoch: its batches end at `batch_times`, validation ends it at `end`."""
    progress.on_epoch_begin(epoch)
    for batch, at in enumerate(batch_times):
        clock.now = at
        progress.checkpoints.train_seconds = at
        progress.on_train_batch_end(batch, {"loss": 2.5})
    clock.now = progress.checkpoints.train_seconds = end
    progress.on_epoch_end(epoch, logs if logs is not None else {"loss": 2.5, "val_loss": 2.0})


@pytest.mark.parametrize(
    "seconds, text",
    [(0, "0s"), (41.4, "41s"), (59.6, "1m 00s"), (0.5, "1s"), (308, "5m 08s"), (7500, "2h 05m"), (-3, "0s")],
)
def test_durations_read_at_a_glance(seconds, text):
    assert duration(seconds) == text


def test_metrics_are_written_as_keras_writes_them():
    assert format_logs({"loss": 3.21041, "token_accuracy": 0.0001234, "hits": 0}) == (
        "loss: 3.2104 - token_accuracy: 1.2340e-04 - hits: 0.0000"
    )


def test_logs_get_the_steps_from_epoch_one_and_the_run_eta_with_each_epoch():
    progress, clock, out, _ = _progress()
    # 1 s a step and 2 s of validation. The first step traces for 10 s, which later epochs will not;
    # the first step of epoch 2 takes 3 s, which counts (a new iterator, say).
    _epoch(progress, clock, 0, [10, 11, 12, 13], 15)
    _epoch(progress, clock, 1, [18, 19, 20, 21], 23)
    _epoch(progress, clock, 2, [26, 27, 28, 29], 31)
    assert out.getvalue().splitlines() == [
        "Epoch 1/3 - 4 steps",
        "4/4 - 15s - 1s/step - loss: 2.5000 - val_loss: 2.0000 - run ETA 12s",
        "Epoch 2/3 - 4 steps - ETA 6s",
        "4/4 - 8s - 1s/step - loss: 2.5000 - val_loss: 2.0000 - run ETA 8s",
        "Epoch 3/3 - 4 steps - ETA 8s",
        "4/4 - 8s - 1s/step - loss: 2.5000 - val_loss: 2.0000",
    ]


def test_a_terminal_gets_a_live_line_with_the_epoch_and_run_eta_in_epoch_one():
    progress, clock, out, _ = _progress(live=True)
    progress.on_epoch_begin(0)
    for batch, at in enumerate([10.0, 10.5, 11.0]):
        clock.now = at
        progress.on_train_batch_end(batch, {"loss": 2.5})
    lines = out.getvalue().split("\r")
    assert lines[0] == "Epoch 1/3 - 4 steps\n"
    assert lines[1].rstrip() == "1/4 " + bar(5) + " 10s - loss: 2.5000"  # no time per step yet
    # 0.5 s a step once the first is done: 2 steps left in this epoch, 4 in each of 2 more.
    assert lines[2].rstrip() == "2/4 " + bar(10) + " ETA 1s, run 5s - loss: 2.5000"
    assert lines[3].rstrip() == "3/4 " + bar(15) + " ETA 1s, run 5s - loss: 2.5000"  # 0.5 s and 4.5 s, rounded up
    clock.now = 11.5
    progress.on_train_batch_end(3, {"loss": 2.25})
    clock.now = 13.5  # validation takes 2 s
    progress.on_epoch_end(0, {"loss": 2.25, "val_loss": 2.0})
    assert out.getvalue().split("\r")[-1] == "4/4 - 14s - 500ms/step - loss: 2.2500 - val_loss: 2.0000 - run ETA 8s\n"


def test_a_live_line_never_wraps(monkeypatch):
    import os
    import shutil

    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=None: os.terminal_size((40, 24)))
    progress, clock, out, _ = _progress(live=True)
    progress.on_epoch_begin(0)
    progress.on_train_batch_end(0, {f"metric_{i}": 0.5 for i in range(10)})
    assert len(out.getvalue().split("\r")[-1]) == 39


def test_the_run_eta_is_the_time_budget_left_when_that_is_earlier():
    progress, clock, out, checkpoints = _progress(epochs=10, budget=20.0)
    _epoch(progress, clock, 0, [10, 11, 12, 13], 15)
    assert out.getvalue().splitlines()[-1].endswith(" - run ETA 5s (time limit)")  # 20 s less 15 s, not 9 x 6 s
    clock.now = checkpoints.train_seconds = 16.0
    progress.on_epoch_begin(1)
    assert out.getvalue().splitlines()[-1] == "Epoch 2/10 - 4 steps - ETA 4s (time limit)"  # not the 6 s of an epoch
    clock.now = 17
    progress.model.stop_training = True  # as the time limit does
    checkpoints.train_seconds = 21.0
    progress.on_train_batch_end(0, {"loss": 2.5})
    progress.on_epoch_end(1, {"loss": 2.5})
    assert out.getvalue().splitlines()[-1] == "1/4 - 1s - 1s/step - loss: 2.5000 - time limit reached"


@pytest.mark.parametrize(
    "budget, eta",
    [(12.0, "ETA 1s, run 5s (time limit)"), (7.5, "ETA 1s (time limit)")],  # 0.5 s left, rounded up
)
def test_a_live_line_under_a_time_budget_ends_at_the_time_limit(budget, eta):
    progress, clock, out, checkpoints = _progress(epochs=10, budget=budget, live=True)
    progress.on_epoch_begin(0)
    for batch, at in enumerate([5.0, 6.0, 7.0]):
        clock.now = checkpoints.train_seconds = at
        progress.on_train_batch_end(batch, {"loss": 2.5})
    assert out.getvalue().split("\r")[-1].rstrip() == "3/4 " + bar(15) + f" {eta} - loss: 2.5000"


def test_early_stopping_ends_the_run_without_a_run_eta():
    progress, clock, out, _ = _progress(epochs=5)
    progress.model.stop_training = True
    _epoch(progress, clock, 0, [10, 11, 12, 13], 15)
    assert out.getvalue().splitlines()[-1] == "4/4 - 15s - 1s/step - loss: 2.5000 - val_loss: 2.0000"


def test_a_resumed_epoch_counts_on_from_the_batches_done():
    progress, clock, out, _ = _progress(batches_done=2)
    _epoch(progress, clock, 0, [10, 11], 12)
    assert out.getvalue().splitlines()[:2] == [
        "Epoch 1/3 - 4 steps, resumed after step 2",
        "4/4 - 12s - 1s/step - loss: 2.5000 - val_loss: 2.0000 - run ETA 10s",  # 2 x (4 x 1 s + 1 s)
    ]


def test_without_a_count_the_first_epoch_teaches_it():
    progress, clock, out, _ = _progress(steps=None, live=True)
    _epoch(progress, clock, 0, [10, 11, 12], 13)
    _epoch(progress, clock, 1, [14, 15, 16], 17)
    text = out.getvalue()
    assert "\r1/? 10s - loss: 2.5000" in text and "\r3/? 12s - loss: 2.5000" in text
    assert "3/3 - 13s - 1s/step - loss: 2.5000 - val_loss: 2.0000 - run ETA 8s\n" in text
    assert "Epoch 2/3 - 3 steps - ETA 4s\n" in text and "\r2/3 " + bar(13) + " ETA 2s, run 6s" in text


def test_batches_are_counted_whatever_the_training_position(tmp_path):
    import tensorflow as tf

    from seqtasks.data.batching import bucketed_batches
    from seqtasks.training.position import training_position

    data = tf.data.Dataset.range(40).map(lambda x: tf.fill([x % 9 + 1], x))
    # Buckets of lengths 1-3, 4-6, 7-9 hold 14, 13, 13 elements: 3 + 3 + 3 batches of at most 5.
    batches = bucketed_batches(data, 40, tf.size, [4, 7], 5, shuffle_seed=1).prefetch(2)
    gathered = []

    def gather(batch):  # as captioning gathers image grids: costly, and no change to the count
        gathered.append(1)
        return batch

    batches = batches.map(lambda batch: tf.py_function(gather, [batch], tf.int64)).prefetch(2)
    position = training_position()
    position.start_epoch(3, 4)  # a resumed run's position: the count is of a whole epoch
    assert tf.data.experimental.cardinality(batches) == tf.data.experimental.UNKNOWN_CARDINALITY
    assert count_batches(batches) == 9 and gathered == []
    assert (int(position.epoch.numpy()), int(position.batches_done.numpy())) == (3, 4)
    assert sum(1 for _ in batches) == 5 and len(gathered) == 5  # the epoch goes on after the 4 batches done
    position.start_epoch(0, 0)
    assert count_batches(tf.data.Dataset.range(10).batch(4)) == 3
    assert count_batches(tf.data.Dataset.range(3).repeat()) is None


@pytest.mark.slow
def test_fit_shows_the_steps_of_data_of_unknown_length_from_epoch_one(tmp_path, capsys):
    import dataclasses

    import keras
    import numpy as np
    import tensorflow as tf

    from seqtasks.recipe.schema import TrainingConfig
    from seqtasks.training.fit import fit, make_optimizer

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=make_optimizer(TrainingConfig(learning_rate=0.01)), loss="mse")
    x = np.random.default_rng(0).normal(size=(24, 4)).astype("float32")
    data = tf.data.Dataset.from_tensor_slices((x, x.sum(1, keepdims=True))).batch(8).filter(lambda x, y: True)
    fit(model, data, data, dataclasses.replace(TrainingConfig(), epochs=2), tmp_path)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Epoch 1/2 - 3 steps" and lines[2].startswith("Epoch 2/2 - 3 steps - ETA ")
    assert lines[1].startswith("3/3 - ") and " - run ETA " in lines[1] and "Unknown" not in lines[1]
    assert lines[3].startswith("3/3 - ") and "ETA" not in lines[3] and len(lines) == 4


def test_the_commands_page_shows_lines_training_prints():
    import re

    from tests.conftest import REPO

    page = " ".join((REPO / "docs" / "commands.md").read_text(encoding="utf-8").split())
    examples = [text for text in re.findall(r"`([^`]*)`", page) if "ETA" in text and "/" in text]
    assert len(examples) == 3, examples
    progress, clock, out, _ = _progress(epochs=15, steps=120, live=True)
    # 0.34 s a step, 0.2 s of validation; the first step traces for 5 s.
    _epoch(progress, clock, 0, [5.0 + 0.34 * k for k in range(120)], 5.0 + 0.34 * 119 + 0.2)
    started = clock.now
    _epoch(progress, clock, 1, [started + 0.34 * (k + 1) for k in range(120)], started + 0.34 * 120 + 0.2)
    printed = [line.rstrip() for chunk in out.getvalue().split("\r") for line in chunk.split("\n")]
    for example in examples:
        pattern = re.escape(example).replace(re.escape("..."), r"[0-9.e+-]+")
        assert [line for line in printed if re.fullmatch(pattern, line)], (example, printed[-3:])
