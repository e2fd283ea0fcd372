"""Each evaluation's scores and figures in the run's TensorBoard logs, at the training step of the weights evaluated.

Keras' TensorBoard callback logs the losses of training; the task metrics
(BLEU, F1, accuracy) and the figures come from the tasks' evaluations,
which `record_evaluation` writes next to them: `logs/evaluation/` for the
validation split, `logs/eval/<file name>/` for `seqtasks eval --data`.
"""

from pathlib import Path

from seqtasks.training.checkpoints import read_state
from seqtasks.errors import SeqtasksError
from seqtasks.evaluation.length_buckets import by_length_scalars

FIGURE_PATTERNS = ("*.png", "attention/*.png")


def record_evaluation(run_dir, out_dir, model, evaluate):
    """Runs `evaluate()` (returning the task's `Evaluation`) and logs its metrics and the figures it drew.

    Scalars are the headline metrics (`metrics["validation"]`, nested names
    joined by `/`) under `evaluation/`, and the scores and counts by source
    length (`metrics["by_length"]`) under `evaluation/by_length/<bucket>/`; images are the PNG files in
    `out_dir` and `out_dir/attention/` that this evaluation wrote or
    rewrote. Returns the `Evaluation`.
    """
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    before = figure_stamps(out_dir)
    evaluation = evaluate()
    figures = [path for path, stamp in figure_stamps(out_dir).items() if before.get(path) != stamp]
    logged = dict(evaluation.metrics.get("validation", {}))
    if "by_length" in evaluation.metrics:
        logged["by_length"] = by_length_scalars(evaluation.metrics["by_length"])
    write_evaluation_summaries(
        log_folder(run_dir, out_dir),
        training_step(model, run_dir),
        logged,
        {_figure_tag(path, out_dir): path for path in sorted(figures)},
    )
    return evaluation


def log_folder(run_dir, out_dir):
    """`RUN/logs/evaluation` for the run folder's own outputs; `RUN/logs/eval/<name>` for `RUN/eval/<name>`."""
    try:
        inside = Path(out_dir).resolve().relative_to(Path(run_dir).resolve())
    except ValueError:
        inside = Path("evaluation", Path(out_dir).name)
    return Path(run_dir) / "logs" / (inside if inside.parts else "evaluation")


def training_step(model, run_dir):
    """The training step of `model`'s weights: its optimizer's iterations.

    A model without an optimizer (the final model as `seqtasks eval` loads
    it) counts as the run's last checkpoint, by the optimizer's iterations
    it recorded (its steps when it has none); 0 without a checkpoint.
    """
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and getattr(optimizer, "built", False):
        import keras

        return int(keras.ops.convert_to_numpy(optimizer.iterations))
    try:
        state = read_state(Path(run_dir) / "checkpoints")
    except SeqtasksError:
        state = None
    if not state:
        return 0
    iterations = state.get("optimizer_iterations")
    return int(iterations if iterations is not None else state.get("steps", 0))


def scalars(metrics, prefix="evaluation"):
    """`{"evaluation/bleu": 13.7, ...}`: the numbers in `metrics`, nested dictionaries' names joined by `/`."""
    found = {}
    for name, value in metrics.items():
        if isinstance(value, dict):
            found.update(scalars(value, f"{prefix}/{name}"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            found[f"{prefix}/{name}"] = float(value)
    return found


def write_evaluation_summaries(log_dir, step, metrics, figures):
    """Writes `metrics` (see `scalars`) and `figures` (`{tag: PNG path}`) as TensorBoard summaries at `step`."""
    import tensorflow as tf

    writer = tf.summary.create_file_writer(str(log_dir))
    try:
        with writer.as_default(step=step):
            for tag, value in scalars(metrics).items():
                tf.summary.scalar(tag, value)
            for tag, path in figures.items():
                image = tf.io.decode_png(Path(path).read_bytes(), channels=4)
                tf.summary.image(tag, image[tf.newaxis])
        writer.flush()
    finally:
        writer.close()


def figure_stamps(out_dir):
    """`{path: (inode, modification time, size)}` of the figures in `out_dir`.

    The figures are written to a new file renamed into place
    (`seqtasks.evaluation.plots`), so a redrawn figure has a new inode even when the
    clock has not moved on.
    """
    stamps = {}
    for pattern in FIGURE_PATTERNS:
        for path in Path(out_dir).glob(pattern):
            info = path.stat()
            stamps[path] = (info.st_ino, info.st_mtime_ns, info.st_size)
    return stamps


def _figure_tag(path, out_dir):
    """`evaluation/attention/attention_0` for `OUT/attention/attention_0.png`."""
    return "evaluation/" + path.relative_to(out_dir).with_suffix("").as_posix()
