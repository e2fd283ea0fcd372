"""Finding the run folder a repeated `seqtasks run` resumes."""

from pathlib import Path

from seqtasks.distribute import worker_name


def unfinished_run(output_dir, name, recipe_text):
    """The newest run folder of `output_dir/name` that this process can resume, or None.

    That is one with a training checkpoint but no `metrics.json`, made from
    the same merged recipe (`recipe_text`) by the same worker of a cluster.
    """
    base = Path(output_dir) / name
    if not base.is_dir():
        return None
    from seqtasks.checkpoints import read_state

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
