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


@pytest.fixture(scope="module")
def decoding_exports(run_cache, tmp_path_factory):
    """The small toy run exported to sample 4 outputs per input, and to search with the beam's preferences."""
    run_dir = run_cache.get(SMALL_TOY).run_dir
    root = tmp_path_factory.mktemp("decoding")
    settings = {
        "samples": ["model.decoding.num_samples=4", "model.decoding.n_best=4", "model.decoding.seed=5",
                    "model.decoding.temperature=1.5"],
        "preferences": [BEAM, "model.decoding.no_repeat_ngram_size=2", "model.decoding.coverage_penalty=0.5"],
    }
    for folder, overrides in settings.items():
        arguments = [part for override in overrides for part in ("--set", override)]
        seqtasks_command("export", run_dir, "--set", f"export.directory={root}/{folder}", *arguments)
    return {folder: root / folder / "toy" / "1" for folder in settings}


def test_an_export_that_samples_returns_its_samples_best_first_and_the_same_for_the_same_seed(decoding_exports):
    import tensorflow as tf

    serve = tf.saved_model.load(str(decoding_exports["samples"])).signatures["serving_default"]
    texts = tf.constant(["1 2 3 4", "5 6 7", "1 2 3 4"])
    first, again = serve(text=texts), serve(text=texts)
    outputs, scores = first["outputs"].numpy(), first["scores"].numpy()
    assert outputs.shape == scores.shape == (3, 4)
    assert np.all(np.diff(scores, axis=1) <= 0)
    assert len(set(outputs[0])) > 1  # at temperature 1.5 a small model's samples differ
    np.testing.assert_array_equal(again["outputs"].numpy(), outputs)  # the recipe's seed: the same samples
    np.testing.assert_array_equal(outputs[2], outputs[0])  # an input's samples do not depend on its place
    lines = seqtasks_command("predict", decoding_exports["samples"], "1 2 3 4", "--n-best", 4).stdout.splitlines()
    assert [line.split("\t")[1] for line in lines] == [text.decode() for text in outputs[0]]


def test_an_export_with_repeated_bigrams_blocked_never_writes_one(decoding_exports):
    import tensorflow as tf

    serve = tf.saved_model.load(str(decoding_exports["preferences"])).signatures["serving_default"]
    # Reversed, these repeat a bigram ("2 1 ... 2 1"): what the model was trained to write.
    texts = ["1 2 1 2", "3 4 5 3 4", "7 7 7"]
    for text in serve(text=tf.constant(texts))["output"].numpy():
        tokens = text.decode().split()
        bigrams = list(zip(tokens, tokens[1:]))
        assert len(bigrams) == len(set(bigrams)), text
