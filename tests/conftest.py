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


def seqtasks_command(*args, expect=0):
    """`seqtasks ARGS...` in this process; asserts the exit status, returns the click result (stdout, stderr)."""
    from click.testing import CliRunner

    from seqtasks.cli import main

    result = CliRunner().invoke(main, [str(arg) for arg in args], catch_exceptions=False)
    assert result.exit_code == expect, result.output
    return result


def check_eval_export_predict(run_dir, data_file, examples, export_root, expected_metrics=None):
    """`eval` on `data_file`, `export` from the best checkpoint, `predict` against what `eval` wrote.

    `examples(eval_folder)` gives `(inputs, expected output lines)` from the
    predictions `eval` wrote. `expected_metrics`, when given, must equal the
    eval metrics. Returns the eval metrics.
    """
    result = seqtasks_command("eval", run_dir, "--data", data_file)
    (metrics_path,) = (run_dir / "eval").glob("*/metrics.json")
    metrics = json.loads(metrics_path.read_text())
    assert metrics["data"] == str(Path(data_file).resolve())
    assert f"Metrics: {metrics_path}" in result.stdout
    if expected_metrics is not None:
        assert metrics["validation"] == pytest.approx(expected_metrics, abs=1e-6)

    result = seqtasks_command(
        "export", run_dir, "--checkpoint", "best", "--set", f"export.directory={export_root}"
    )
    exported = Path(result.stdout.strip().splitlines()[-1].removeprefix("SavedModel: "))
    assert exported.parent.parent == Path(export_root) and (exported / "saved_model.pb").is_file()

    inputs, expected_lines = examples(metrics_path.parent)
    input_file = Path(export_root) / "inputs.txt"
    input_file.write_text("".join(f"{item}\n" for item in inputs), encoding="utf-8")
    result = seqtasks_command("predict", exported, "--input", input_file, "--batch-size", 2)
    assert result.stdout.splitlines() == expected_lines
    one = seqtasks_command("predict", exported, inputs[0], "--json")
    assert json.loads(one.stdout) and len(one.stdout.splitlines()) == 1
    return metrics


def pytest_collection_modifyitems(session, config, items):
    """Starts the JAX re-run of the layer tests as soon as it is collected, to overlap the rest of the suite."""
    if any(item.nodeid.endswith("test_layer_tests_pass_under_jax") for item in items):
        import test_jax_backend

        test_jax_backend.start()


def pytest_sessionfinish(session, exitstatus):
    """A session stopped before the JAX test (`-x`, Ctrl-C) does not leave its subprocess running."""
    module = sys.modules.get("test_jax_backend")
    process = getattr(module, "_run", {}).get("process") if module else None
    if process is not None and process.poll() is None:
        process.kill()
        process.wait()
