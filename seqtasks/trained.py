"""A trained run folder for `seqtasks eval` and `seqtasks export`: its recipe and its model."""

from dataclasses import dataclass, field
from pathlib import Path

from seqtasks.errors import SeqtasksError

CHECKPOINTS = ("final", "best", "latest")


@dataclass
class TrainedRun:
    """A run folder's merged recipe, its model and what the task needs beside it (tokenizers, labels)."""

    run_dir: Path
    recipe: object
    model: object
    parts: dict = field(default_factory=dict)


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


def read_run_recipe(run_dir, overrides=()):
    from seqtasks.recipe import load_recipe

    return load_recipe(Path(run_dir) / "recipe.yaml", overrides)


def read_lines(run_dir, name):
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


def load_model(run_dir, checkpoint, model_class, build, training):
    """The run's model: `model/model.keras` in safe mode, or `build()` with a checkpoint's weights.

    A checkpoint holds the optimizer's variables too, so the model is compiled
    with the recipe's optimizer (`training`) before its weights are read.
    """
    import keras

    from seqtasks.training import dtype_policy, make_optimizer

    path = checkpoint_file(run_dir, checkpoint)
    if path is None:
        final = Path(run_dir) / "model" / "model.keras"
        try:
            return keras.models.load_model(
                final, custom_objects={model_class.__name__: model_class}, safe_mode=True, compile=False
            )
        except Exception as error:  # Keras raises many types for a file that is not its model
            raise SeqtasksError(f"{final}: cannot load the model (safe mode): {str(error).splitlines()[0]}") from None
    with dtype_policy(training.precision):  # as in training, so mixed_float16 gets its loss-scale optimizer
        model = build()
        if not model.built:
            model.build()
    model.compile(optimizer=make_optimizer(training))
    model.optimizer.build(model.trainable_variables)
    try:
        model.load_weights(str(path))
    except ValueError as error:
        raise SeqtasksError(f"{path}: does not fit the run's model ({error})") from None
    return model


def eval_folder(run_dir, data_path):
    """Where `seqtasks eval` writes the predictions for `data_path`: `run_dir/eval/<file name>/`."""
    name = Path(data_path).name
    for suffix in (".gz", ".txt", ".tsv", ".csv", ".json", ".conll"):
        name = name.removesuffix(suffix)
    folder = Path(run_dir) / "eval" / (name or "data")
    folder.mkdir(parents=True, exist_ok=True)
    return folder
