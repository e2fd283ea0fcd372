"""Checkpoint averaging: the mean of a run's last kept checkpoints, as one checkpoint that `eval` and `export` take."""

from pathlib import Path

from seqtasks.errors import SeqtasksError


def averaged_file(steps):
    """The name of the average of the checkpoints of `steps`: `average-N-to-step-LAST.weights.h5`."""
    return f"average-{len(steps)}-to-step-{steps[-1]:08d}.weights.h5"


def average_checkpoints(runner, last, output=None):
    """Writes the mean weights of `runner`'s `last` newest kept step checkpoints; returns the file.

    Every floating-point weight of the model is averaged (in float64, then
    cast back); integer weights and the optimizer's variables are the
    newest checkpoint's, so the file is a checkpoint like the others. It
    goes to `RUN/checkpoints/average-N-to-step-LAST.weights.h5` (or
    `output`), written whole or not at all. A run trained with
    `training.ema_momentum` is refused: its checkpoints' weights are not the
    ones it validated (the moving average is).
    """
    import numpy as np

    from seqtasks.training.checkpoints import kept_steps, step_file, weights_file_bytes
    from seqtasks.utils.io_utils import write_bytes_atomic

    directory = runner.run_dir / "checkpoints"
    steps = kept_steps(directory)
    if runner.recipe.training.ema_momentum is not None:
        raise SeqtasksError(
            f"{runner.run_dir}: trained with training.ema_momentum, its checkpoints' weights are already averaged "
            "over steps (the moving average); averaging them again is not supported"
        )
    kept = ", ".join(map(str, steps)) or "none"
    if len(steps) < 2:
        raise SeqtasksError(
            f"{directory}: keeps {len(steps)} step checkpoint(s) ({kept}); averaging needs at least 2 "
            "(training.keep_checkpoints and training.checkpoint_every_steps say how many a run keeps)"
        )
    if not 2 <= last <= len(steps):
        raise SeqtasksError(
            f"--last: expected 2..{len(steps)} (the step checkpoints {directory} keeps: {kept}); got {last}"
        )
    steps = steps[-last:]
    path = Path(output) if output is not None else directory / averaged_file(steps)
    if not path.name.endswith(".weights.h5"):
        raise SeqtasksError(f"--output: expected a file name ending in .weights.h5; got {str(path)!r}")
    model = runner.load_model(str(steps[0]))
    floating = [v for v in model.weights if np.issubdtype(np.dtype(v.dtype), np.floating)]
    sums = [np.asarray(v.numpy(), np.float64) for v in floating]
    for step in steps[1:]:
        model.load_weights(str(directory / step_file(step)))  # the newest is loaded last: its optimizer state stays
        for total, variable in zip(sums, floating):
            total += np.asarray(variable.numpy(), np.float64)
    for total, variable in zip(sums, floating):
        variable.assign((total / len(steps)).astype(np.dtype(variable.dtype)))
    write_bytes_atomic(path, weights_file_bytes(model, path.parent))
    return path, steps
