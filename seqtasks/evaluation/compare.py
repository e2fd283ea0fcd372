"""`seqtasks compare`: runs' scores by source length side by side, as one figure and a CSV file."""

import csv
import io
import json
from pathlib import Path

from seqtasks.errors import SeqtasksError


def read_by_length(path):
    """The `by_length` scores of a run folder (its `metrics.json`) or of a `metrics.json` file."""
    path = Path(path)
    metrics_file = path / "metrics.json" if path.is_dir() else path
    try:
        metrics = json.loads(metrics_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SeqtasksError(f"{metrics_file}: no such file (is {path} a finished run folder?)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SeqtasksError(f"{metrics_file}: not a readable metrics file ({error})") from None
    by_length = metrics.get("by_length") if isinstance(metrics, dict) else None
    if not isinstance(by_length, dict) or not isinstance(by_length.get("buckets"), list):
        raise SeqtasksError(
            f"{metrics_file}: no scores by source length (only translation and toy runs evaluated by this version "
            "of seqtasks have them; `seqtasks eval RUN --data FILE` adds them to an older run)"
        )
    return by_length


def run_labels(paths):
    """A short name per run: its folder's parent (the recipe name), with the folder's own name where two share it."""
    paths = [Path(path) for path in paths]
    folders = [path if path.is_dir() else path.parent for path in paths]
    short = [folder.resolve().parent.name for folder in folders]
    return [
        name if short.count(name) == 1 else f"{name}/{folder.name}" for name, folder in zip(short, folders)
    ]


def compare_by_length(paths, figure_path, metric=None, labels=None):
    """Draws `metric` by length bucket for each run into `figure_path` (PNG) and writes the numbers beside it.

    `metric` defaults to the first score the runs report per bucket (BLEU for
    translation, sequence accuracy for the toy). The CSV file has the PNG's
    name with `.csv`: a row per run and bucket with the count and every score.
    Returns `(figure_path, csv_path)`.
    """
    from seqtasks.utils.io_utils import write_text_atomic
    from seqtasks.evaluation.plots import save_length_comparison

    if not paths:
        raise SeqtasksError("give at least one run folder to compare")
    figure_path = Path(figure_path)
    if figure_path.suffix.lower() != ".png":
        raise SeqtasksError(f"{figure_path}: the figure is a PNG file; give a path ending in .png")
    labels = list(labels) if labels else run_labels(paths)
    if len(labels) != len(paths):
        raise SeqtasksError(f"got {len(labels)} --label values for {len(paths)} runs; give one per run or none")
    runs = [read_by_length(path) for path in paths]
    first = runs[0]
    for path, run in zip(paths[1:], runs[1:]):
        if run.get("edges") != first.get("edges") or run.get("unit") != first.get("unit"):
            raise SeqtasksError(
                f"{path}: its buckets ({run.get('edges')}, {run.get('unit')}) differ from {paths[0]}'s "
                f"({first.get('edges')}, {first.get('unit')}); evaluate them with the same evaluation.length_buckets"
            )
    names = [key for key in first["buckets"][0] if key not in ("bucket", "count")] or [
        key for entry in first["buckets"] for key in entry if key not in ("bucket", "count")
    ]
    metric = metric or (names[0] if names else None)
    if metric not in names:
        raise SeqtasksError(f"no score {metric!r} by length in these runs; they have: {', '.join(names) or 'none'}")
    buckets = [entry["bucket"] for entry in first["buckets"]]
    tick_labels = [f"{entry['bucket']}\n({entry['count']})" for entry in first["buckets"]]
    series = {label: [entry.get(metric) for entry in run["buckets"]] for label, run in zip(labels, runs)}
    figure_path.parent.mkdir(parents=True, exist_ok=True)
    save_length_comparison(tick_labels, buckets, series, metric, first.get("unit", ""), figure_path)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["run", "bucket", "count", *names])
    for label, run in zip(labels, runs):
        for entry in run["buckets"]:
            writer.writerow([label, entry["bucket"], entry["count"], *(entry.get(name, "") for name in names)])
    csv_path = figure_path.with_suffix(".csv")
    write_text_atomic(csv_path, out.getvalue())
    return figure_path, csv_path
