"""Exports with `model.decoding.n_best`: the K best hypotheses beside the best one, and `predict --n-best`."""

import json

import numpy as np
import pytest
from conftest import seqtasks_command
from trained_runs import SMALL_TOY

pytestmark = pytest.mark.slow  # two exports

# Beams of 4 over the small toy run's model (`trained_runs.SMALL_TOY`), exported with its 3 best and with the best only.
BEAM = "model.decoding.beam_width=4"


@pytest.fixture(scope="module")
def exports(run_cache, tmp_path_factory):
    run_dir = run_cache.get(SMALL_TOY).run_dir
    root = tmp_path_factory.mktemp("n_best")
    for folder, n_best in (("three", 3), ("one", 1)):
        seqtasks_command("export", run_dir, "--set", f"export.directory={root}/{folder}", "--set", BEAM,
                         "--set", f"model.decoding.n_best={n_best}")
    return root / "three" / "toy" / "1", root / "one" / "toy" / "1"


def test_an_export_returns_the_n_best_best_first_and_the_best_as_before(exports):
    import tensorflow as tf

    three, one = exports
    texts = tf.constant(["1 2 3", "4 5 6 7", "", "   "])
    served = tf.saved_model.load(str(three)).signatures["serving_default"](text=texts)
    assert set(served) == {"output", "score", "outputs", "scores"}
    outputs, scores = served["outputs"].numpy(), served["scores"].numpy()
    assert outputs.shape == scores.shape == (4, 3)
    np.testing.assert_array_equal(served["output"].numpy(), outputs[:, 0])
    np.testing.assert_array_equal(served["score"].numpy(), scores[:, 0])
    assert np.all(np.diff(scores[:2], axis=1) <= 0)  # best first
    assert len(set(outputs[0])) == 3  # three different hypotheses
    assert outputs[2:].tolist() == [[b""] * 3] * 2 and scores[2:].tolist() == [[0.0] * 3] * 2
    best = tf.saved_model.load(str(one)).signatures["serving_default"](text=texts)
    assert set(best) == {"output", "score"}
    np.testing.assert_array_equal(best["output"].numpy(), outputs[:, 0])


def test_predict_n_best_prints_k_scored_lines_per_input(exports):
    import tensorflow as tf

    three, one = exports
    served = tf.saved_model.load(str(three)).signatures["serving_default"](text=tf.constant(["1 2 3"]))
    lines = seqtasks_command("predict", three, "1 2 3", "4 5", "--n-best", 2).stdout.splitlines()
    assert len(lines) == 4
    first = [line.split("\t") for line in lines[:2]]
    assert [text for _, text in first] == [t.decode() for t in served["outputs"].numpy()[0, :2]]
    np.testing.assert_allclose([float(score) for score, _ in first], served["scores"].numpy()[0, :2], atol=1e-4)
    assert seqtasks_command("predict", three, "1 2 3").stdout.splitlines() == [served["output"].numpy()[0].decode()]
    (line,) = seqtasks_command("predict", three, "1 2 3", "--n-best", 3, "--json").stdout.splitlines()
    found = json.loads(line)
    assert found["output"] == [t.decode() for t in served["outputs"].numpy()[0]]
    np.testing.assert_allclose(found["score"], served["scores"].numpy()[0], rtol=1e-6)


@pytest.mark.parametrize(
    "which, k, message",
    [
        (0, 4, "--n-best 4: the export returns 3 hypotheses per input (model.decoding.n_best)"),
        (1, 2, "--n-best 2: the export returns only the best hypothesis; export it with model.decoding.n_best=2 "
               "(and a beam_width of at least 2)"),
    ],
)
def test_predict_n_best_beyond_what_the_export_keeps_is_an_error(exports, which, k, message):
    result = seqtasks_command("predict", exports[which], "1 2 3", "--n-best", k, expect=2)
    assert result.stderr.splitlines() == [f"Error: {message}"]
