"""The layer tests again, in a subprocess running Keras on JAX."""

import importlib.util
import os
import subprocess
import sys

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


@pytest.mark.skipif(
    importlib.util.find_spec("jax") is None,
    reason="jax is not installed; `pip install -e '.[test]'` installs it",
)
def test_layer_tests_pass_under_jax():
    env = {
        **os.environ,
        "KERAS_BACKEND": "jax",
        "SEQTASKS_EXPECT_BACKEND": "jax",
        "JAX_PLATFORMS": "cpu",
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *LAYER_TESTS],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=900,
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in summary and "failed" not in summary and "skipped" not in summary, summary
