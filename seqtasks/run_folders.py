"""Run folders on disk: finding the one a command names, the one a repeated `seqtasks run` resumes, and what is in them.

A run folder is `<output dir>/<recipe name>/<timestamp>/` holding `recipe.yaml`
(the merged recipe), what the task learned from its training data
(vocabularies, labels), `checkpoints/`, `model/model.keras` once trained, and
`metrics.json` once finished.
"""

from pathlib import Path

from seqtasks.errors import SeqtasksError

CHECKPOINTS = ("final", "best", "latest")


def find_run(target, output_dir, resolve_recipe):
    """The run folder `target` names: a run folder itself, or the newest finished run of a recipe.

    A recipe (a file or a built-in name, through `resolve_recipe`) is looked up
    in `output_dir/<recipe name>/`; a finished run is one with `metrics.json`.
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


def unfinished_run(output_dir, name, recipe_text):
    """The newest run folder of `output_dir/name` that this process can resume, or None.

    That is one with a training checkpoint but no `metrics.json`, made from
    the same merged recipe (`recipe_text`) by the same worker of a cluster.
    """
    base = Path(output_dir) / name
    if not base.is_dir():
        return None
    from seqtasks.checkpoints import read_state
    from seqtasks.distribute import worker_name

    for folder in sorted((path for path in base.iterdir() if path.is_dir()), key=_started, reverse=True):
        recipe = folder / "recipe.yaml"
        if (folder / "metrics.json").exists() or not recipe.is_file():
            continue
        try:
            state = read_state(folder / "checkpoints")
            same = recipe.read_text(encoding="utf-8") == recipe_text
        except (OSError, ValueError):
            continue
        if state is not None and same and state.get("worker", "") == worker_name():
            return folder
    return None


def _started(folder):
    """Run folders are named by start time, `-2`, `-3`... for runs started in the same second."""
    stamp, _, attempt = folder.name.partition("-")[2].partition("-")
    return folder.name.split("-")[0], stamp, int(attempt) if attempt.isdigit() else 1


def read_lines(run_dir, name):
    """The lines of a file the task wrote into the run folder (a vocabulary, the labels)."""
    path = Path(run_dir) / name
    if not path.is_file():
        raise SeqtasksError(f"{path}: missing; the run folder is incomplete (was it trained by this version?)")
    return path.read_text(encoding="utf-8").splitlines()


def checkpoint_file(run_dir, checkpoint):
    """The weights file a `--checkpoint` value names, or None for the final `model/model.keras`.

    `None` picks the final model when the run finished, else its newest
    checkpoint; `best` and `latest` name the run's checkpoints; anything else
    is a path to a `.weights.h5` file.
    """
    from seqtasks.checkpoints import BEST_FILE, read_state

    run_dir = Path(run_dir)
    final = run_dir / "model" / "model.keras"
    if checkpoint is None:
        checkpoint = "final" if final.is_file() else "latest"
    if checkpoint == "final":
        if not final.is_file():
            raise SeqtasksError(f"{final}: missing; the run did not finish (use --checkpoint latest or best)")
        return None
    directory = run_dir / "checkpoints"
    if checkpoint == "best":
        path = directory / BEST_FILE
    elif checkpoint == "latest":
        state = read_state(directory)
        if state is None:
            raise SeqtasksError(f"{directory}: the run has no training checkpoint")
        path = directory / state["checkpoint"]
    else:
        path = Path(checkpoint)
        if not path.name.endswith(".weights.h5"):
            raise SeqtasksError(
                f"--checkpoint: expected one of {', '.join(CHECKPOINTS)} or a .weights.h5 file; got {checkpoint!r}"
            )
    if not path.is_file():
        raise SeqtasksError(f"{path}: no such checkpoint")
    return path


def eval_folder(run_dir, data_path):
    """Where `seqtasks eval` writes the predictions for `data_path`: `run_dir/eval/<file name>/`."""
    name = Path(data_path).name
    for suffix in (".gz", ".txt", ".tsv", ".csv", ".json", ".conll"):
        name = name.removesuffix(suffix)
    return Path(run_dir) / "eval" / (name or "data")
