import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def run_python(code, env=None, cwd=None, timeout=300):
    """Runs `code` in a fresh Python process; returns the completed process."""
    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd or REPO,
        timeout=timeout,
    )


def run_recipe(recipe, output_dir, *overrides):
    """`seqtasks run` in this process; asserts success, returns `(run_dir, output)`."""
    from click.testing import CliRunner

    from seqtasks.cli import main

    args = ["run", str(recipe), "--output-dir", str(output_dir)]
    for override in overrides:
        args += ["--set", override]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (run_dir,) = [path for path in Path(output_dir).glob("*/*") if path.is_dir()]
    return run_dir, result.output


@pytest.fixture
def fresh_python():
    return run_python


@pytest.fixture(autouse=True)
def _expected_backend():
    """Under `SEQTASKS_EXPECT_BACKEND`, fail if Keras runs another backend."""
    expected = os.environ.get("SEQTASKS_EXPECT_BACKEND")
    if expected:
        import keras

        assert keras.backend.backend() == expected
    yield
