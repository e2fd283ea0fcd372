"""Each evaluation's task metrics and figures reach TensorBoard, at the training step of the weights evaluated."""

import json
import os
from types import SimpleNamespace

import numpy as np
import pytest

from seqtasks.evaluation.summaries import (
    log_folder,
    record_evaluation,
    scalars,
    training_step,
    write_evaluation_summaries,
)
from seqtasks.tasks.base import Evaluation


def _png(path, colour=(255, 0, 0)):
    """A 3 x 5 PNG of one colour, written as `seqtasks.evaluation.plots` writes: a new file renamed into place."""
    import tensorflow as tf

    image = np.zeros((3, 5, 3), np.uint8) + np.array(colour, np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(tf.io.encode_png(image).numpy())
    os.replace(temporary, path)


def _events(log_dir):
    """`{tag: [(step, value)]}` read back from the event files: numbers for scalars, image shapes for images."""
    import tensorflow as tf

    found = {}
    for file in sorted(log_dir.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(file)):
            for value in event.summary.value:
                tensor = tf.make_ndarray(value.tensor)
                if value.metadata.plugin_data.plugin_name == "images":
                    width, height, png = tensor
                    decoded = tf.io.decode_png(png).numpy()
                    found.setdefault(value.tag, []).append(
                        (event.step, (int(height), int(width), tuple(decoded[0, 0, :3])))
                    )
                else:
                    found.setdefault(value.tag, []).append((event.step, float(tensor)))
    return found


def test_metrics_and_figures_are_written_at_the_step(tmp_path):
    _png(tmp_path / "attention" / "attention_0.png")
    metrics = {"bleu": 13.74, "chrf": 35.5, "per_type": {"PER": {"f1": 0.5}}, "signature": "nrefs:1", "ok": True}
    write_evaluation_summaries(
        tmp_path / "logs",
        1500,
        metrics,
        {"evaluation/attention/attention_0": tmp_path / "attention" / "attention_0.png"},
    )
    events = _events(tmp_path / "logs")
    assert events == {
        "evaluation/bleu": [(1500, pytest.approx(13.74))],
        "evaluation/chrf": [(1500, 35.5)],
        "evaluation/per_type/PER/f1": [(1500, 0.5)],
        "evaluation/attention/attention_0": [(1500, (3, 5, (255, 0, 0)))],
    }


def test_only_numbers_become_scalars():
    assert scalars({"accuracy": 0.9, "macro_f1": 1, "flag": False, "name": "x", "nested": {"f1": 0.25, "n": None}}) == {
        "evaluation/accuracy": 0.9,
        "evaluation/macro_f1": 1.0,
        "evaluation/nested/f1": 0.25,
    }


def test_the_log_folder_follows_the_outputs(tmp_path):
    run = tmp_path / "run"
    assert log_folder(run, run) == run / "logs" / "evaluation"
    assert log_folder(run, run / "eval" / "test.tsv") == run / "logs" / "eval" / "test.tsv"
    assert log_folder(run, tmp_path / "elsewhere") == run / "logs" / "evaluation" / "elsewhere"


def test_the_step_is_the_optimizers_else_the_runs_last(tmp_path):
    compiled = SimpleNamespace(optimizer=SimpleNamespace(built=True, iterations=np.int64(420)))
    assert training_step(compiled, tmp_path) == 420
    loaded = SimpleNamespace(optimizer=None)
    assert training_step(loaded, tmp_path) == 0  # no checkpoint state
    (tmp_path / "checkpoints").mkdir()
    state = {"checkpoint": "step-600.weights.h5", "steps": 600}
    (tmp_path / "checkpoints" / "state.json").write_text(json.dumps(state))
    assert training_step(loaded, tmp_path) == 600
    # Keras counts one more iteration per epoch of data of unknown length than it trains steps.
    (tmp_path / "checkpoints" / "state.json").write_text(json.dumps({**state, "optimizer_iterations": 606}))
    assert training_step(loaded, tmp_path) == 606
    (tmp_path / "checkpoints" / "state.json").write_text("{")
    assert training_step(loaded, tmp_path) == 0  # a damaged state is reported where it matters, not here


def test_an_evaluation_logs_its_scores_and_the_figures_it_drew_not_older_ones(tmp_path):
    run = tmp_path / "run"
    _png(run / "attention" / "old_image.png", (0, 0, 255))  # from an earlier evaluation, not redrawn
    _png(run / "attention" / "attention_0.png", (0, 0, 255))
    model = SimpleNamespace(optimizer=SimpleNamespace(built=True, iterations=np.int64(7)))

    def evaluate():
        _png(run / "attention" / "attention_0.png", (0, 255, 0))
        _png(run / "confusion_matrix.png", (255, 255, 255))
        return Evaluation({"validation": {"accuracy": 0.75, "macro_f1": 0.5}, "per_class_f1": {"a": 1.0}}, ["line"])

    evaluation = record_evaluation(run, run, model, evaluate)
    assert evaluation.report == ["line"]
    assert _events(run / "logs" / "evaluation") == {
        "evaluation/accuracy": [(7, 0.75)],
        "evaluation/macro_f1": [(7, 0.5)],
        "evaluation/attention/attention_0": [(7, (3, 5, (0, 255, 0)))],
        "evaluation/confusion_matrix": [(7, (3, 5, (255, 255, 255)))],
    }


def test_the_runner_logs_every_evaluation(tmp_path):
    from seqtasks.lifecycle.runner import Runner

    run = tmp_path / "run"
    (run / "eval" / "test.tsv").mkdir(parents=True)
    runner = Runner.__new__(Runner)  # the task and its model are stand-ins: only the logging is under test
    runner.run_dir, logged = run, []
    runner.log = logged.append

    def evaluate(model, examples, out_dir):
        _png(out_dir / "attention" / "attention_0.png")
        return Evaluation({"validation": {"bleu": float(len(examples))}}, ["Sample translations:"])

    runner.task = SimpleNamespace(evaluate=evaluate)
    model = SimpleNamespace(optimizer=SimpleNamespace(built=True, iterations=np.int64(30)))
    assert runner._evaluate(model, ["a", "b"], run) == {"validation": {"bleu": 2.0}}
    assert runner._evaluate(model, ["a"], run / "eval" / "test.tsv") == {"validation": {"bleu": 1.0}}
    assert logged == ["Sample translations:"] * 2
    assert _events(run / "logs" / "evaluation")["evaluation/bleu"] == [(30, 2.0)]
    assert _events(run / "logs" / "eval" / "test.tsv") == {
        "evaluation/bleu": [(30, 1.0)],
        "evaluation/attention/attention_0": [(30, (3, 5, (255, 0, 0)))],
    }


def test_scores_by_length_are_logged_per_bucket_with_their_counts(tmp_path):
    from seqtasks.evaluation.length_buckets import scores_by_length

    by_length = scores_by_length([3, 4, 12], [5, 10], lambda ix: {"bleu": 10.0 * len(ix)}, "source words")
    model = SimpleNamespace(optimizer=SimpleNamespace(built=True, iterations=np.int64(3)))
    record_evaluation(tmp_path, tmp_path, model, lambda: Evaluation({"validation": {"bleu": 9.5}, "by_length": by_length}))
    assert _events(tmp_path / "logs" / "evaluation") == {
        "evaluation/bleu": [(3, 9.5)],
        "evaluation/by_length/1-5/count": [(3, 2.0)],
        "evaluation/by_length/1-5/bleu": [(3, 20.0)],
        "evaluation/by_length/6-10/count": [(3, 0.0)],
        "evaluation/by_length/11+/count": [(3, 1.0)],
        "evaluation/by_length/11+/bleu": [(3, 10.0)],
    }
