"""Training progress a person can read: each epoch's steps known from the start, an ETA per epoch and for the run.

Keras' own bar shows `37/Unknown` through the first epoch, since `tf.data`
cannot tell the length of the task pipelines (they filter and bucket by
length). `count_batches` counts one epoch's batches before training, and
`TrainingProgress` takes the place of Keras' bar: a live line on a terminal,
a line per epoch in logs.
"""

import shutil
import sys
import time

import keras

_BAR_WIDTH = 20
# Datasets with as many elements as the one they read.
_COUNT_KEEPING = {"_MapDataset", "_ParallelMapDataset", "_PrefetchDataset", "_OptionsDataset"}


def count_batches(dataset):
    """The batches in one epoch of `dataset`: `tf.data`'s own count when it has one, else one pass's.

    Bucketing by length gives each bucket ceil(its examples / batch size)
    batches whatever the order, so every epoch of a task pipeline has as
    many. The pass reads the start of epoch 0 (the training position is put
    back after it) inside TensorFlow, and fills the pipeline's cache, which
    the first epoch then reads instead; the maps at the pipeline's end,
    which change no count, are left out of it (captioning's gathers the
    image grids). None for endless data.
    """
    import numpy as np
    import tensorflow as tf

    from seqtasks.training.position import training_position

    known = int(dataset.cardinality())
    if known == tf.data.INFINITE_CARDINALITY:
        return None
    if known >= 0:
        return known
    # tf.data's own classes, by name: another TensorFlow's are only counted through, at the maps' cost.
    while type(dataset).__name__ in _COUNT_KEEPING and hasattr(dataset, "_input_dataset"):
        dataset = dataset._input_dataset
    position = training_position()
    saved = int(position.epoch.numpy()), int(position.batches_done.numpy())
    position.start_epoch(0, 0)
    try:
        return int(dataset.reduce(np.int64(0), lambda count, _: count + 1))
    finally:
        position.start_epoch(*saved)


def progress_callback(config, train_data, checkpoints):
    """The `TrainingProgress` of a `fit` with the `training` recipe section `config`; counts the batches first."""
    budget = None if config.max_minutes is None else 60.0 * config.max_minutes
    return TrainingProgress(config.epochs, count_batches(train_data), checkpoints, budget)


def duration(seconds):
    """A duration at a glance: `41s`, `5m 08s`, `2h 05m`."""
    seconds = int(max(0.0, seconds) + 0.5)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"


def format_logs(logs):
    """`loss: 3.2104 - token_accuracy: 0.3120`, numbers as Keras writes them."""
    parts = []
    for name, value in (logs or {}).items():
        value = float(value)
        parts.append(f"{name}: {value:.4f}" if value == 0 or abs(value) >= 1e-3 else f"{name}: {value:.4e}")
    return " - ".join(parts)


class TrainingProgress(keras.callbacks.Callback):
    """Each epoch's steps out of their number, the time the epoch and the run have left, the running metrics.

    At each epoch's start a line names the epoch, its steps and (from the
    second epoch on) how long it should take. On a terminal a live line
    follows the steps: `37/120 ━━━━━━──── ETA 28s, run 5m 10s - loss: ...`;
    its times leave out the first step (tracing, compiling). Each epoch ends
    with a line in Keras' per-epoch format (`120/120 - 41s - 340ms/step -
    loss: ... - val_loss: ...`) and, when more is to come, the run's ETA.
    The run's ETA is the epochs left times the last epoch's time,
    validation included, or the time budget left when that is earlier
    (`(time limit)`); early stopping may end the run sooner.

    Args:
        epochs: the epochs the run trains at most (`training.epochs`).
        steps: the batches in an epoch (`count_batches`), or None when not
            known: learnt from the first whole epoch then.
        checkpoints: the run's `TrainingCheckpoints` (listed before this
            callback): the batches of a resumed epoch already done and the
            training time so far, earlier runs included.
        time_budget: seconds the run may train (`training.max_minutes`), or None.
        out: where lines go; `sys.stdout` when training begins by default.
        live: whether to draw the live line; by default when `out` is a terminal.
        clock: seconds, for the step times.
    """

    def __init__(self, epochs, steps, checkpoints, time_budget=None, out=None, live=None, clock=time.monotonic):
        super().__init__()
        self.epochs = epochs
        self.steps = steps
        self.checkpoints = checkpoints
        self.time_budget = time_budget
        self.out = out
        self.live = live
        self.clock = clock
        self.epoch_seconds = None  # the last epoch's, made whole, validation included
        self.step_seconds = None  # the last epoch's time per step, its first step left out
        self.end_seconds = 0.0  # the last epoch's, from its last step to its end: validation, checkpoint
        self._stream = None
        self._live = False
        self._width = 0  # of the live line while it is open

    def on_train_begin(self, logs=None):
        self._stream = self.out if self.out is not None else sys.stdout
        self._live = self.live if self.live is not None else _is_terminal(self._stream)

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        self.first = self.checkpoints.batches_done  # a resumed epoch goes on from there
        self.done = self.first
        self.started = self.clock()
        self.after_first = self.last_batch = None
        self.shown_at = None
        self._width = 0
        header = f"Epoch {epoch + 1}/{self.epochs}"
        if self.steps is not None:
            header += f" - {self.steps} steps"
            if self.first:
                header += f", resumed after step {self.first}"
        if self.epoch_seconds is not None and self.steps:
            header += " - ETA " + self._eta(self.epoch_seconds * (self.steps - self.first) / self.steps)
        self._line(header)

    def on_train_batch_end(self, batch, logs=None):
        now = self.clock()
        self.done += 1
        if self.after_first is None:
            self.after_first = now
        self.last_batch = now
        if self.steps is not None and self.done > self.steps:
            self.steps = self.done  # never shows more steps done than there are
        if self._live and (self.shown_at is None or now - self.shown_at >= 0.1 or self.done == self.steps):
            self.shown_at = now
            self._draw(self._live_text(logs))

    def on_epoch_end(self, epoch, logs=None):
        now = self.clock()
        ran = self.done - self.first
        rate = self._rate()
        stopped = self.model is not None and self.model.stop_training
        if self.steps is None and not stopped:
            self.steps = self.done
        if rate is not None and ran:
            self.end_seconds = now - self.last_batch
            # The first step of the first epoch traces and compiles: it counts as a usual step;
            # later epochs' first steps (a new iterator, its shuffle) count as they took.
            first_step = rate if self.step_seconds is None else self.after_first - self.started
            self.step_seconds = rate
            if self.steps is not None:
                self.epoch_seconds = first_step + (self.steps - 1) * rate + self.end_seconds
        parts = [f"{self.done}/{self.steps if self.steps is not None else '?'}", duration(now - self.started)]
        if ran:  # the time per step of Keras' line, but without the first step and validation
            parts.append(_per_step(rate if ran >= 2 else (now - self.started) / ran))
        text = " - ".join(parts + ([format_logs(logs)] if logs else []))
        if self._over_budget():
            text += " - time limit reached"
        elif not stopped and epoch + 1 < self.epochs and self.epoch_seconds is not None:
            text += " - run ETA " + self._eta((self.epochs - epoch - 1) * self.epoch_seconds)
        if self._live:
            self._draw(text)
            self.end_line()
        else:
            self._line(text)

    def end_line(self):
        """Ends the live line if it is open, so that what comes next (an error) starts a line of its own."""
        if self._width:
            self._stream.write("\n")
            self._stream.flush()
            self._width = 0

    def _rate(self):
        """Seconds per step in this epoch, the first step left out; the last epoch's before two steps."""
        if self.after_first is not None and self.done - self.first >= 2:
            return (self.last_batch - self.after_first) / (self.done - self.first - 1)
        return self.step_seconds

    def _epoch_left(self):
        """Seconds to the end of the epoch: its steps left, then validation as long as the last epoch's."""
        return (self.steps - self.done) * self._rate() + self.end_seconds

    def _live_text(self, logs):
        steps = self.steps
        text = f"{self.done}/{steps if steps is not None else '?'}"
        if steps:
            filled = min(_BAR_WIDTH, _BAR_WIDTH * self.done // steps)
            text += " " + "━" * filled + "─" * (_BAR_WIDTH - filled)
        rate = self._rate()
        if steps is not None and rate is not None:
            left = self._epoch_left()
            text += " ETA " + self._eta(left)
            later = self.epochs - self.epoch - 1
            if later and self._budget_left() >= left:
                per_epoch = self.epoch_seconds if self.epoch_seconds is not None else steps * rate
                text += ", run " + self._eta(left + later * per_epoch)
        else:
            text += f" {duration(self.clock() - self.started)}"
        return text + (" - " + format_logs(logs) if logs else "")

    def _eta(self, seconds):
        """`seconds`, or the time budget left when that is less: `3m 10s (time limit)`."""
        left = self._budget_left()
        return f"{duration(left)} (time limit)" if left < seconds else duration(seconds)

    def _budget_left(self):
        """Seconds of training the time budget leaves (infinite without one)."""
        if self.time_budget is None:
            return float("inf")
        return self.time_budget - self.checkpoints.train_seconds

    def _over_budget(self):
        return self._budget_left() < 0

    def _draw(self, text):
        """Rewrites the live line, cut to the terminal's width so that it never wraps."""
        text = text[: max(20, shutil.get_terminal_size().columns - 1)]
        self._stream.write("\r" + text + " " * max(0, self._width - len(text)))
        self._stream.flush()
        self._width = len(text)

    def _line(self, text):
        self._stream.write(text + "\n")
        self._stream.flush()


def _per_step(seconds):
    return f"{seconds:.0f}s/step" if seconds >= 1 else f"{seconds * 1000:.0f}ms/step"


def _is_terminal(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
