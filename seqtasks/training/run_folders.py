"""Run folders on disk: finding the one a command names, the one a repeated `seqtasks run` resumes, and what is in them.

A run folder is `<output dir>/<recipe name>/<timestamp>/` holding `recipe.yaml`
(the merged recipe), what the task learned from its training data
(vocabularies, labels), `checkpoints/`, `model/model.keras` once trained,
`metrics.json` once finished, and `.lock`, which the process training in it
holds.
"""

import os
from pathlib import Path

from seqtasks.errors import SeqtasksError

CHECKPOINTS = ("final", "best", "latest")
LOCK_FILE = ".lock"
_HELD_LOCKS = {}


def find_run(target, output_dir, resolve_recipe):
    """The run folder `target` names: a run folder itself, or the newest finished run of a recipe.

    A recipe (a file or a built-in name, through `resolve_recipe`) is looked up
    in `output_dir/<recipe name>/`; a finished run is one with `metrics.json`.
    Unfinished runs are never picked (see `newer_unfinished_runs`).
    """
    path = Path(target)
    if path.is_dir():
        if not (path / "recipe.yaml").is_file():
            raise SeqtasksError(f"{path}: not a run folder (it has no recipe.yaml)")
        return path
    from seqtasks.recipe import load_recipe

    name = load_recipe(resolve_recipe(target)).name
    base = Path(output_dir) / name
    finished = sorted(base.glob("*/metrics.json"), key=lambda p: p.stat().st_mtime) if base.is_dir() else []
    if not finished:
        raise SeqtasksError(
            f"{base}: no finished run of recipe {name!r}; train it with `seqtasks run {target}` "
            f"or give a run folder"
        )
    return finished[-1].parent


def newer_unfinished_runs(run_dir):
    """The run folders beside `run_dir` that started after it and have no `metrics.json`, oldest first."""
    run_dir = Path(run_dir)
    return [
        folder
        for folder in sorted((p for p in run_dir.parent.iterdir() if p.is_dir()), key=_started)
        if _started(folder) > _started(run_dir) and (folder / "recipe.yaml").is_file()
        and not (folder / "metrics.json").exists()
    ]


def unfinished_run(output_dir, name, recipe_text):
    """The newest run folder of `output_dir/name` that this process can resume, or None.

    That is one with a training checkpoint but no `metrics.json`, made from
    the same merged recipe (`recipe_text`) by the same worker of a cluster. A
    damaged `state.json` in such a folder is an error, not a reason to start
    a new run unasked.
    """
    base = Path(output_dir) / name
    if not base.is_dir():
        return None
    from seqtasks.training.checkpoints import read_state
    from seqtasks.training.distribute import worker_name

    for folder in sorted((path for path in base.iterdir() if path.is_dir()), key=_started, reverse=True):
        recipe = folder / "recipe.yaml"
        if (folder / "metrics.json").exists() or not recipe.is_file():
            continue
        try:
            same = recipe.read_text(encoding="utf-8") == recipe_text
        except (OSError, ValueError):
            continue
        state = read_state(folder / "checkpoints") if same else None
        if state is not None and state.get("worker", "") == worker_name():
            return folder
    return None


def lock_run(run_dir):
    """Holds an exclusive lock on `run_dir` until the process ends, so no other process trains in it.

    The lock is `flock` on `run_dir/.lock`, which holds the owner's process
    id; the kernel releases it when the process ends, however it ends.
    Locking a folder this process holds already does nothing.
    """
    import fcntl

    run_dir = Path(run_dir)
    key = os.path.realpath(run_dir)
    if key in _HELD_LOCKS:
        return
    path = run_dir / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise SeqtasksError(f"{path}: cannot lock the run folder: {error.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise SeqtasksError(f"{run_dir} is in use by another seqtasks process (pid {owner})") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _HELD_LOCKS[key] = fd


def _started(folder):
    """Run folders are named by start time, `-2`, `-3`... for runs started in the same second."""
    stamp, _, attempt = folder.name.partition("-")[2].partition("-")
    return folder.name.split("-")[0], stamp, int(attempt) if attempt.isdigit() else 1


def read_lines(run_dir, name):
    """The lines of a file the task wrote into the run folder (a vocabulary, the labels)."""
    return read_bytes(run_dir, name).decode("utf-8").splitlines()


def read_bytes(run_dir, name):
    """The bytes of a file the task wrote into the run folder (a vocabulary, a SentencePiece model)."""
    path = Path(run_dir) / name
    if not path.is_file():
        raise SeqtasksError(f"{path}: missing; the run folder is incomplete (was it trained by this version?)")
    return path.read_bytes()


def checkpoint_file(run_dir, checkpoint):
    """The weights file a `--checkpoint` value names, or None for the final `model/model.keras`.

    `None` and `final` pick the final model, which only a finished run has:
    the weights of a run that did not finish are used only when asked for.
    `best` and `latest` name the run's checkpoints, a number the kept
    checkpoint of that training step, and anything else is a path to a
    `.weights.h5` file.
    """
    from seqtasks.training.checkpoints import BEST_FILE, read_state, step_file

    run_dir = Path(run_dir)
    final = run_dir / "model" / "model.keras"
    if checkpoint in (None, "final"):
        if not final.is_file():
            raise SeqtasksError(f"{run_dir}: the run did not finish (it has no model/model.keras); {_choices(run_dir)}")
        return None
    directory = run_dir / "checkpoints"
    if checkpoint == "best":
        path = directory / BEST_FILE
    elif checkpoint == "latest":
        state = read_state(directory)
        if state is None:
            raise SeqtasksError(f"{directory}: the run has no training checkpoint")
        path = directory / state["checkpoint"]
    elif checkpoint.isdigit():
        path = directory / step_file(int(checkpoint))
        if not path.is_file():
            raise SeqtasksError(f"--checkpoint {checkpoint}: no checkpoint of step {int(checkpoint)} is kept; "
                                f"{_kept_steps(run_dir)}")
    else:
        path = Path(checkpoint)
        if not path.name.endswith(".weights.h5"):
            raise SeqtasksError(
                f"--checkpoint: expected one of {', '.join(CHECKPOINTS)}, a step number or a .weights.h5 file; "
                f"got {checkpoint!r}"
            )
    if not path.is_file():
        raise SeqtasksError(f"{path}: no such checkpoint")
    return path


def _kept_steps(run_dir):
    """Which step checkpoints `run_dir` keeps, as the end of a sentence."""
    from seqtasks.training.checkpoints import kept_steps

    steps = kept_steps(Path(run_dir) / "checkpoints")
    return f"kept: {', '.join(map(str, steps))}" if steps else "it keeps none"


def _choices(run_dir):
    """How to pick the weights of a run that did not finish, naming the steps it keeps."""
    return f"choose its weights with --checkpoint latest, best or STEP ({_kept_steps(run_dir)})"


def eval_folder(run_dir, data_path):
    """Where `seqtasks eval` writes the predictions for `data_path`: `run_dir/eval/<file name>/`."""
    name = Path(data_path).name
    for suffix in (".gz", ".txt", ".tsv", ".csv", ".json", ".conll"):
        name = name.removesuffix(suffix)
    return Path(run_dir) / "eval" / (name or "data")
