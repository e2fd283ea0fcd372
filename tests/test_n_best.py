"""Exports with `model.decoding.n_best`: the K best hypotheses beside the best one, and `predict --n-best`."""

import json

import numpy as np
import pytest
from conftest import run_recipe, seqtasks_command

pytestmark = pytest.mark.slow  # a small training and two exports

TINY = [
    "data.train_size=64",
    "data.validation_size=8",
    "training.epochs=1",
    "model.embedding_dim=8",
    "model.encoder.units=8",
    "model.decoder.units=16",
    "model.decoding.beam_width=4",
]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    root = tmp_path_factory.mktemp("n_best")
    run_dir, _ = run_recipe("toy", root / "runs", *TINY, "model.decoding.n_best=3", f"export.directory={root}/three")
    seqtasks_command("export", run_dir, "--set", f"export.directory={root}/one", "--set", "model.decoding.n_best=1")
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
