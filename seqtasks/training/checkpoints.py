"""Training checkpoints from which a stopped run resumes where it was, mid-epoch included."""

import hashlib
import io
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

import keras

from seqtasks.training.distribute import worker_name
from seqtasks.errors import SeqtasksError
from seqtasks.utils.io_utils import write_json_atomic

STATE_FILE = "state.json"
BEST_FILE = "best.weights.h5"
DAMAGED_SUFFIX = ".damaged"
# Room left on the disk beyond a checkpoint's expected size before it is written.
_SPARE_BYTES = 1 << 20


def step_file(steps):
    """The name of the checkpoint written after training step `steps`."""
    return f"step-{steps:08d}.weights.h5"


def kept_steps(directory):
    """The training steps of the step checkpoints in `directory`, in order."""
    names = (path.name for path in Path(directory).glob("step-*.weights.h5"))
    return sorted(int(name[5:-11]) for name in names if name[5:-11].isdigit())


def read_state(directory):
    """The training state saved in `directory` (a run's `checkpoints/`), or None when there is none.

    A state that cannot be read (truncated, garbled) is a `SeqtasksError`
    naming the file: the run cannot be resumed from it, and silently starting
    over would hide that.
    """
    path = Path(directory) / STATE_FILE
    if not path.is_file():
        return None
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        problem = None if isinstance(state, dict) and isinstance(state.get("checkpoint"), str) else "not a state"
    except json.JSONDecodeError as error:
        problem = f"{error.msg}: line {error.lineno} column {error.colno}"
    except (OSError, ValueError) as error:
        problem = getattr(error, "strerror", None) or str(error)
    if problem is not None:
        raise SeqtasksError(
            f"{path}: damaged training state ({problem}); the run cannot resume from it: give the command "
            "again with --fresh to start a new run (this folder is left as it is)"
        )
    return state


def restore(model, directory, log=print):
    """Loads the newest intact checkpoint in `directory` into `model`; returns its state or None.

    The weights, the optimizer's variables and the dropout seeds are restored.
    A checkpoint whose file is missing, has another size or digest than when
    it was written, or does not load is reported in one line and renamed to
    `<name>.damaged` (nothing is deleted), and the checkpoint kept before it
    is used instead. Call it under the model's distribution strategy, once
    the model is built and compiled.
    """
    state = read_state(directory)
    if state is None:
        return None
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    directory = Path(directory)
    damaged = []
    for candidate in _newest_first(state):
        path = directory / candidate["checkpoint"]
        problem = _damage(path, candidate)
        if problem is None:
            try:
                model.load_weights(str(path))
            except (OSError, ValueError, KeyError, RuntimeError) as error:  # h5py and Keras on a damaged file
                problem = f"cannot be loaded ({str(error).splitlines()[0] if str(error) else type(error).__name__})"
        if problem is not None:
            damaged.append((path, problem))
            continue
        for path, problem in damaged:
            kept = ""
            if path.exists():
                os.replace(path, path.with_name(path.name + DAMAGED_SUFFIX))
                kept = f"; kept as {path.name}{DAMAGED_SUFFIX}"
            log(f"{path}: {problem}{kept}; resuming from {candidate['checkpoint']} instead")
        _assign(seed_states(model), candidate.get("seeds"))
        return candidate
    path, problem = damaged[0]
    earlier = "; the earlier ones too" if len(damaged) > 1 else ", and no earlier checkpoint is kept"
    raise SeqtasksError(
        f"{path}: {problem}{earlier}; give the command again with --fresh to start a new run "
        "(this folder is left as it is)"
    )


def weights_file_bytes(model, scratch=None):
    """The `.weights.h5` file `model.save_weights` writes (weights and optimizer variables), as bytes.

    Keras (3.12 to 3.15) writes it in memory through its saving library's
    state writer, so a full disk never reaches HDF5. That writer is not
    public API: where a Keras release lacks it or changed its arguments, the
    file is written by the public `model.save_weights` into a temporary
    folder under `scratch` (the checkpoint folder, whose free space the
    caller has checked) and read back.
    """
    try:
        from keras.src.saving import saving_lib

        buffer = io.BytesIO()
        store = saving_lib.H5IOStore(buffer, mode="w")
        saving_lib._save_state(model, weights_store=store, assets_store=None, inner_path="", visited_saveables=set())
        store.close()
        return buffer.getvalue()
    except (ImportError, AttributeError, TypeError):
        with tempfile.TemporaryDirectory(dir=scratch, prefix=".weights-") as folder:
            path = os.path.join(folder, "model.weights.h5")
            model.save_weights(path)
            with open(path, "rb") as handle:
                return handle.read()


def _newest_first(state):
    """The states of the kept checkpoints, newest first, each with the records of those before it."""
    chain = [record for record in state.get("earlier", []) if isinstance(record, dict) and "checkpoint" in record]
    chain.append({key: value for key, value in state.items() if key != "earlier"})
    for index in range(len(chain) - 1, -1, -1):
        yield {**chain[index], "earlier": chain[:index]}


def _damage(path, record):
    """What is wrong with the checkpoint file at `path` against what was recorded when it was written, or None."""
    if not path.is_file():
        return "missing"
    size = path.stat().st_size
    if record.get("bytes") is not None and size != record["bytes"]:
        return f"damaged ({size} bytes; {record['bytes']} were written)"
    if record.get("sha256") is not None and _sha256(path) != record["sha256"]:
        return "damaged (its SHA-256 differs from the one recorded when it was written)"
    return None


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def seed_states(model):
    """The states of the model's random seed generators (dropout masks): not among the weights Keras saves."""
    return [variable for variable in model.variables if variable.name == "seed_generator_state"]


def _values(variables):
    return [keras.ops.convert_to_numpy(variable).tolist() for variable in variables]


def _assign(variables, values):
    """Assigns saved `values` to `variables`; nothing when none were saved or the variables do not match."""
    if values is None or len(values) != len(variables):
        return
    import numpy as np

    for variable, value in zip(variables, values):
        if np.shape(value) == tuple(variable.shape):
            variable.assign(np.asarray(value, dtype=variable.dtype))


class TrainingCheckpoints(keras.callbacks.Callback):
    """Saves the training state every `every_steps` steps and at each epoch's end; keeps the best weights.

    A checkpoint is the model's and the optimizer's variables,
    `step-<steps>.weights.h5`, plus `state.json`: the epoch, the batches of it
    done, the steps, the history so far, the best `monitor` value, the early
    stopping count, the training time, the dropout seeds, the running
    training metrics of the epoch, and the size and SHA-256 of the weights
    file, with the same record of each earlier kept checkpoint to fall back
    on. Files are written under temporary names, checked and renamed into
    place, the state last, so a run killed at any moment resumes from its
    last complete checkpoint. The newest `keep` step checkpoints are kept;
    `best.weights.h5` holds the weights of the epoch with the best `monitor`
    value.

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
        self.records = [record for record in state.get("earlier", []) if record.get("checkpoint") in self.saved]
        if "checkpoint" in state:
            self.records.append({key: value for key, value in state.items() if key != "earlier"})
        self.early_stopping_state = state.get("early_stopping")
        # The running training metrics of an epoch stopped part way, to go on from.
        self.epoch_metrics = state.get("epoch_metrics") if self.batches_done else None
        logged = (state.get("epoch_logs") or {}) if self.batches_done else {}
        self.epoch_logs = {key: math.nan if value is None else value for key, value in logged.items()}
        self.batches_this_epoch = 0
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
            self.epoch_metrics, self.epoch_logs = None, {}
        self.batches_this_epoch = 0
        # Keras has just reset the metrics; a resumed epoch goes on averaging from where it stopped.
        _assign(self.model.metrics_variables, self.epoch_metrics)
        self.epoch_metrics = None
        self.position.start_epoch(epoch, self.batches_done)

    def on_train_batch_end(self, batch, logs=None):
        if self.first_step_seconds is None:
            self.first_step_seconds = round(time.monotonic() - self.started, 2)
        self.batches_done += 1
        self.batches_this_epoch += 1
        self.steps += 1
        self.epoch_logs = {key: float(value) for key, value in (logs or {}).items()}
        if self.every_steps and self.steps % self.every_steps == 0:
            self.save()

    def on_epoch_end(self, epoch, logs=None):
        logs = {} if logs is None else logs
        if not self.batches_this_epoch:
            # Resumed after the epoch's last batch: Keras has no training logs for it, the checkpoint has.
            logs.update({key: value for key, value in self.epoch_logs.items() if key not in logs})
        for key, value in logs.items():
            self.history.setdefault(key, []).append(float(value))
        value = logs.get(self.monitor)
        if value is not None and math.isfinite(value) and (self.best is None or self._better(value, self.best)):
            self.best = float(value)
            self._save_weights(BEST_FILE)
        self.epoch, self.batches_done = epoch + 1, 0
        self.epoch_logs = {}
        self.save()

    def on_train_end(self, logs=None):
        self.previous_seconds = self.train_seconds
        self.started = None
        if self.early_stopping is not None:
            self.early_stopping_state = {"wait": self.early_stopping.wait, "best": self.early_stopping.best}

    def _better(self, value, best):
        return value < best if self.mode == "min" else value > best

    def _save_weights(self, name):
        """Writes the weights to a temporary file and renames it to `name`; returns the file's size and SHA-256.

        The file is made in memory and written with Python's own I/O, so a
        full disk or an I/O error is one `SeqtasksError` (HDF5 writing to a
        full disk floods stderr and can crash the process); the files
        written before are untouched.
        """
        path = self.directory / name
        temporary = self.directory / f".{name}"
        self._check_space(path)
        data = weights_file_bytes(self.model, self.directory)
        try:
            with open(temporary, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())  # a full disk shows here at the latest, before the rename
            os.replace(temporary, path)
        except OSError as error:
            temporary.unlink(missing_ok=True)
            raise SeqtasksError(
                f"{path}: cannot write the checkpoint ({error.strerror or error}); the checkpoints written "
                f"before it in {self.directory} are intact"
            ) from None
        return len(data), hashlib.sha256(data).hexdigest()

    def _check_space(self, path):
        """Fails before writing when the disk has less room than the checkpoint needs."""
        variables = list(self.model.weights)
        if getattr(self.model, "optimizer", None) is not None:
            variables += list(self.model.optimizer.variables)
        expected = sum(int(math.prod(v.shape)) * _itemsize(v.dtype) for v in variables)
        if self.records:  # HDF5 adds its own structure to the variables' bytes
            expected = max(expected, self.records[-1].get("bytes") or 0)
        free = shutil.disk_usage(self.directory).free
        if free < expected + _SPARE_BYTES:
            raise SeqtasksError(
                f"{path}: no space left on the device for the checkpoint ({_megabytes(free)} free, about "
                f"{_megabytes(expected + _SPARE_BYTES)} needed); the checkpoints written before it in "
                f"{self.directory} are intact"
            )

    def save(self, done=False):
        """Writes a checkpoint of the current step (and `done`: training has ended)."""
        name = step_file(self.steps)
        size, digest = self._save_weights(name)
        self.saved = [n for n in self.saved if n != name][-(self.keep - 1):] + [name] if self.keep > 1 else [name]
        early = None
        if self.early_stopping is not None:
            early = {"wait": int(self.early_stopping.wait), "best": finite_or_none(self.early_stopping.best)}
        optimizer = getattr(self.model, "optimizer", None)
        iterations = None if optimizer is None else optimizer.iterations
        record = {
            "checkpoint": name,
            "checkpoints": self.saved,
            "bytes": size,
            "sha256": digest,
            "epoch": self.epoch,
            "batches_done": self.batches_done,
            "steps": self.steps,
            "optimizer_iterations": None if iterations is None else int(keras.ops.convert_to_numpy(iterations)),
            "history": {key: [finite_or_none(value) for value in values] for key, values in self.history.items()},
            "best": self.best,
            "early_stopping": early,
            "train_seconds": round(self.train_seconds, 3),
            "seeds": _values(seed_states(self.model)),
            "epoch_metrics": _values(self.model.metrics_variables) if self.batches_done else None,
            "epoch_logs": {key: finite_or_none(value) for key, value in self.epoch_logs.items()},
            "done": done,
            "worker": worker_name(),
        }
        self.records = [r for r in self.records if r["checkpoint"] in self.saved and r["checkpoint"] != name]
        write_json_atomic(self.directory / STATE_FILE, {**record, "earlier": self.records})
        self.records.append(record)
        for path in self.directory.glob("step-*.weights.h5"):
            if path.name not in self.saved:
                path.unlink(missing_ok=True)


def _itemsize(dtype):
    import numpy as np

    try:
        return np.dtype(keras.backend.standardize_dtype(dtype)).itemsize
    except TypeError:
        return 4


def _megabytes(count):
    return f"{count / 1e6:.1f} MB"


def finite_or_none(value):
    """`value` as a float, or None for None, NaN and infinities: what strict JSON can hold."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None
