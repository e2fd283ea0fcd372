"""The layer tests again, in a subprocess running Keras on JAX.

The subprocess starts when this test is collected (see `conftest.py`), so it
runs on the second core while the rest of the suite runs; the test waits for
it and checks its result.
"""

import importlib.util
import os
import subprocess
import sys
import tempfile

import pytest
from conftest import REPO

LAYER_TESTS = [
    "tests/test_bahdanau_attention.py",
    "tests/test_luong_attention.py",
    "tests/test_stacked_rnn.py",
    "tests/test_attention_decoder.py",
    "tests/test_attention_pooling.py",
    "tests/test_character_cnn.py",
    "tests/test_crf.py",
    "tests/test_greedy_search.py",
    "tests/test_beam_search.py",
    "tests/test_image_captioner.py",
]
# Repeats of one check at other sizes: under JAX one size of each is kept, for the suite's time.
DESELECTED = [
    "tests/test_beam_search.py::test_matches_a_plain_beam_search_that_never_stops_early[2-5]",
    "tests/test_beam_search.py::test_matches_a_plain_beam_search_that_never_stops_early[3-8]",
    "tests/test_beam_search.py::test_matches_a_plain_beam_search_that_never_stops_early[5-10]",
    "tests/test_beam_search.py::test_matches_a_plain_beam_search_that_never_stops_early[9-8]",
]
HAVE_JAX = importlib.util.find_spec("jax") is not None
_run = {}


def start():
    """Starts the JAX run in the background (once); `test_layer_tests_pass_under_jax` waits for it."""
    if _run or not HAVE_JAX:
        return
    env = {**os.environ, "KERAS_BACKEND": "jax", "SEQTASKS_EXPECT_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    output = tempfile.TemporaryFile(mode="w+")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *LAYER_TESTS]
    command += [f"--deselect={test}" for test in DESELECTED]
    _run["output"] = output
    _run["process"] = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO)


@pytest.mark.skipif(not HAVE_JAX, reason="jax is not installed; `pip install -e '.[test]'` installs it")
def test_layer_tests_pass_under_jax():
    start()
    process, output = _run["process"], _run["output"]
    try:
        returncode = process.wait(timeout=900)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    output.seek(0)
    text = output.read()
    summary = text.strip().splitlines()[-1] if text.strip() else ""
    assert returncode == 0, text[-5000:]
    assert " passed" in summary and "failed" not in summary and "skipped" not in summary, summary
    assert f"{len(DESELECTED)} deselected" in summary, summary
