import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import json  # noqa: E402
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


_SERVE = """
import base64, json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401 - registers the tokenizer ops
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
input_name, binary = sys.argv[2], sys.argv[3] == "binary"


def text(x):
    return [text(item) for item in x] if isinstance(x, list) else x.decode("utf-8")


out = {}
for name, batch in json.loads(sys.stdin.read()).items():
    if binary:
        batch = [base64.b64decode(item) for item in batch]
    try:
        result = serve(**{input_name: tf.constant(batch, dtype=tf.string)})
    except tf.errors.InvalidArgumentError as error:
        out[name] = {"error": error.message}
        continue
    out[name] = {
        key: {
            "shape": list(value.shape),
            "dtype": value.dtype.name,
            "value": text(value.numpy().tolist()) if value.dtype == tf.string else value.numpy().tolist(),
        }
        for key, value in result.items()
    }
assert not [m for m in sys.modules if m.startswith("seqtasks")], "seqtasks was imported"
print(json.dumps(out))
"""


def serve_in_tensorflow_only(export_dir, batches, input_name="text"):
    """Runs `serving_default` of a SavedModel in a fresh process importing only TensorFlow (and tensorflow_text).

    `batches` maps names to lists of input strings, or of bytes (sent as
    such), in one process one after the other. Returns, per name and output
    key, `{"shape", "dtype", "value"}` with strings decoded; for a batch the
    model refused, `{"error": message}`.
    """
    import base64

    binary = any(isinstance(item, bytes) for batch in batches.values() for item in batch)
    if binary:
        batches = {name: [base64.b64encode(item).decode() for item in batch] for name, batch in batches.items()}
    result = subprocess.run(
        [sys.executable, "-c", _SERVE, str(export_dir), input_name, "binary" if binary else "text"],
        input=json.dumps(batches),
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
        cwd=REPO,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


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
