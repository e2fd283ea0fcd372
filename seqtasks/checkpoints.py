"""Training checkpoints from which a stopped run resumes where it was, mid-epoch included."""

import json
import math
import os
import time
from pathlib import Path

import keras

from seqtasks.distribute import worker_name
from seqtasks.io_utils import write_json_atomic

STATE_FILE = "state.json"
BEST_FILE = "best.weights.h5"


def read_state(directory):
    """The training state saved in `directory` (a run's `checkpoints/`), or None when there is none."""
    path = Path(directory) / STATE_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def restore(model, directory):
    """Loads the newest checkpoint in `directory` into `model` (weights and optimizer); returns its state or None.

    Call it under the model's distribution strategy, once the model is built
    and compiled.
    """
    state = read_state(directory)
    if state is None:
        return None
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    model.load_weights(str(Path(directory) / state["checkpoint"]))
    return state


class TrainingCheckpoints(keras.callbacks.Callback):
    """Saves the training state every `every_steps` steps and at each epoch's end; keeps the best weights.

    A checkpoint is the model's and the optimizer's variables,
    `step-<steps>.weights.h5`, plus `state.json`: the epoch, the batches of it
    done, the steps, the history so far, the best `monitor` value, the early
    stopping count and the training time. Files are written under temporary
    names and renamed into place, the state last, so a run killed at any
    moment resumes from its last complete checkpoint. The newest `keep` step
    checkpoints are kept; `best.weights.h5` holds the weights of the epoch with
    the best `monitor` value.

    Args:
        directory: where checkpoints are written.
        every_steps: int or None; None saves at epochs' ends only.
        keep: how many step checkpoints to keep.
        monitor: the logged value that picks the best weights.
        mode: `"min"` or `"max"`: which `monitor` values are better.
        position: the `TrainingPosition` the training pipelines follow.
        state: the restored state of a resumed run, or None.
        early_stopping: the run's `EarlyStopping` callback, whose count is
            saved and restored (list it before this callback), or None.
    """

    def __init__(self, directory, every_steps, keep, monitor, mode, position, state=None, early_stopping=None):
        super().__init__()
        self.directory = Path(directory)
        self.every_steps = every_steps
        self.keep = keep
        self.monitor = monitor
        self.mode = mode
        self.position = position
        self.early_stopping = early_stopping
        state = state or {}
        self.epoch = state.get("epoch", 0)
        self.batches_done = state.get("batches_done", 0)
        self.steps = state.get("steps", 0)
        # A NaN loss is saved as null (strict JSON) and read back as NaN.
        self.history = {
            key: [math.nan if value is None else value for value in values]
            for key, values in state.get("history", {}).items()
        }
        self.best = state.get("best")
        self.previous_seconds = state.get("train_seconds", 0.0)
        self.saved = state.get("checkpoints", [])
        self.early_stopping_state = state.get("early_stopping")
        self.started = None
        self.first_step_seconds = None
        self.directory.mkdir(parents=True, exist_ok=True)

    @property
    def train_seconds(self):
        """Training time so far, earlier `fit` calls and runs included."""
        running = 0.0 if self.started is None else time.monotonic() - self.started
        return self.previous_seconds + running

    def on_train_begin(self, logs=None):
        self.started = time.monotonic()
        # EarlyStopping resets itself when training begins; this runs after it.
        if self.early_stopping is not None and self.early_stopping_state is not None:
            self.early_stopping.wait = self.early_stopping_state["wait"]
            self.early_stopping.best = self.early_stopping_state["best"]

    def on_epoch_begin(self, epoch, logs=None):
        if epoch != self.epoch:
            self.epoch, self.batches_done = epoch, 0
        self.position.start_epoch(epoch, self.batches_done)

    def on_train_batch_end(self, batch, logs=None):
        if self.first_step_seconds is None:
            self.first_step_seconds = round(time.monotonic() - self.started, 2)
        self.batches_done += 1
        self.steps += 1
        if self.every_steps and self.steps % self.every_steps == 0:
            self.save()

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        for key, value in logs.items():
            self.history.setdefault(key, []).append(float(value))
        value = logs.get(self.monitor)
        if value is not None and math.isfinite(value) and (self.best is None or self._better(value, self.best)):
            self.best = float(value)
            self._save_weights(BEST_FILE)
        self.epoch, self.batches_done = epoch + 1, 0
        self.save()

    def on_train_end(self, logs=None):
        self.previous_seconds = self.train_seconds
        self.started = None
        if self.early_stopping is not None:
            self.early_stopping_state = {"wait": self.early_stopping.wait, "best": self.early_stopping.best}

    def _better(self, value, best):
        return value < best if self.mode == "min" else value > best

    def _save_weights(self, name):
        temporary = self.directory / f".{name}"  # still ends in .weights.h5, as Keras requires
        self.model.save_weights(str(temporary), overwrite=True)
        os.replace(temporary, self.directory / name)

    def save(self, done=False):
        """Writes a checkpoint of the current step (and `done`: training has ended)."""
        name = f"step-{self.steps:08d}.weights.h5"
        self._save_weights(name)
        self.saved = [n for n in self.saved if n != name][-(self.keep - 1):] + [name] if self.keep > 1 else [name]
        early = None
        if self.early_stopping is not None:
            early = {"wait": int(self.early_stopping.wait), "best": finite_or_none(self.early_stopping.best)}
        optimizer = getattr(self.model, "optimizer", None)
        iterations = None if optimizer is None else optimizer.iterations
        state = {
            "checkpoint": name,
            "checkpoints": self.saved,
            "epoch": self.epoch,
            "batches_done": self.batches_done,
            "steps": self.steps,
            "optimizer_iterations": None if iterations is None else int(keras.ops.convert_to_numpy(iterations)),
            "history": {key: [finite_or_none(value) for value in values] for key, values in self.history.items()},
            "best": self.best,
            "early_stopping": early,
            "train_seconds": round(self.train_seconds, 3),
            "done": done,
            "worker": worker_name(),
        }
        write_json_atomic(self.directory / STATE_FILE, state)
        for path in self.directory.glob("step-*.weights.h5"):
            if path.name not in self.saved:
                path.unlink(missing_ok=True)


def finite_or_none(value):
    """`value` as a float, or None for None, NaN and infinities: what strict JSON can hold."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None
