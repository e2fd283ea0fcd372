"""The tiers' rule (`tests/support/tier_rule.py`): unmarked tests that train, export, load, start processes or use the
run cache fail; marked ones run. Each case runs a small test file with pytest in this process (pytester)."""

import pytest

TRAINS = """
import keras
import numpy as np
{marker}
def test_trains():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(loss="mse")
    model.fit(np.zeros((4, 2)), np.zeros((4, 1)), verbose=0)
"""


def run_file(pytester, source):
    pytester.makepyfile(test_case=source)
    return pytester.runpytest_inprocess("-p", "tests.support.tier_rule", "-p", "no:cacheprovider", "-p", "no:xdist",
                                         "-q", "-W", "ignore::pytest.PytestAssertRewriteWarning")


def assert_refused(result, what):
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "test_case.py::" in output and what in output, output
    assert "is not marked `slow`" in output, output


def test_an_unmarked_training_test_fails(pytester):
    result = run_file(pytester, TRAINS.format(marker=""))
    assert_refused(result, "trains (`fit`)")


def test_training_in_a_fixture_of_an_unmarked_test_fails(pytester):
    source = """
import keras
import numpy as np
import pytest

@pytest.fixture(scope="module")
def trained():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(loss="mse")
    model.train_on_batch(np.zeros((4, 2)), np.zeros((4, 1)))
    return model

def test_uses_a_trained_model(trained):
    assert trained is not None
"""
    result = run_file(pytester, source)
    result.assert_outcomes(errors=1)
    assert "trains (`train_on_batch`)" in result.stdout.str()


@pytest.mark.parametrize(
    ("body", "what"),
    [
        ("tf.saved_model.save(tf.Module(), str(tmp_path / 'm'))", "exports a SavedModel"),
        ("tf.saved_model.load(str(tmp_path / 'm'))", "loads a SavedModel"),
        ("subprocess.run(['true'])", "starts a process (subprocess.Popen)"),
        ("os.system('true')", "starts a process (os.system)"),
    ],
)
def test_unmarked_exports_loads_and_processes_fail(pytester, body, what):
    source = f"""
import os
import subprocess
import tensorflow as tf

def test_slow_work(tmp_path):
    {body}
"""
    assert_refused(run_file(pytester, source), what)


def test_an_unmarked_test_of_the_run_cache_fails_before_its_fixture_is_made(pytester):
    source = """
import pytest

@pytest.fixture
def run_cache():
    raise AssertionError("made")

def test_cached(run_cache):
    pass
"""
    result = run_file(pytester, source)
    result.assert_outcomes(errors=1)
    assert "uses the trained-run cache (fixture `run_cache`)" in result.stdout.str()
    assert "made" not in result.stdout.str()


def test_unmarked_tests_doing_fast_work_pass(pytester):
    source = """
import keras
import numpy as np

def test_layer():
    assert keras.layers.Dense(3)(np.zeros((2, 4))).shape == (2, 3)
"""
    run_file(pytester, source).assert_outcomes(passed=1)


@pytest.mark.slow
def test_a_marked_training_test_trains(pytester):
    for marker in ("import pytest\n@pytest.mark.slow", "import pytest\npytestmark = pytest.mark.slow"):
        run_file(pytester, TRAINS.format(marker=marker)).assert_outcomes(passed=1)
