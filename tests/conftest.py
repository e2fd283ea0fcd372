import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

if "MUTANT_UNDER_TEST" in os.environ:  # running on mutmut's mutated copy
    from tests.support import mutation_support  # noqa: E402, F401

from hypothesis import settings as hypothesis_settings  # noqa: E402
from tests.support.tier_rule import pytest_runtest_protocol, pytest_runtest_setup  # noqa: E402, F401 - the tiers' rule

# Property tests run the same examples on every run (derandomize: examples from a hash of the
# test), so their verdict never depends on luck. SEQTASKS_PROPERTY_EXAMPLES sets how many.
# HYPOTHESIS_PROFILE=explore draws fresh random examples, ten times as many, keeping failures in
# .hypothesis/ to replay them: a way to hunt for new counterexamples locally.
_PROPERTY_EXAMPLES = int(os.environ.get("SEQTASKS_PROPERTY_EXAMPLES", "150"))
hypothesis_settings.register_profile(
    "seqtasks", derandomize=True, max_examples=_PROPERTY_EXAMPLES, deadline=None, print_blob=True
)
hypothesis_settings.register_profile(
    "explore",
    parent=hypothesis_settings.get_profile("default"),
    derandomize=False,
    max_examples=10 * _PROPERTY_EXAMPLES,
    deadline=None,
    print_blob=True,
)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "seqtasks"))

# pytester: tests/test_tier_rule.py runs small test files with pytest in-process.
pytest_plugins = ("pytester",)

REPO = Path(__file__).resolve().parent.parent
SAMPLE_PAIRS = REPO / "tests" / "data" / "spa-eng-sample.tsv"


def write_sample_pairs(path, count):
    """The first `count` lines of the Anki/Tatoeba sample (`English<TAB>Spanish`) written to `path`."""
    lines = SAMPLE_PAIRS.read_text(encoding="utf-8").splitlines()[:count]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def pytest_collection_modifyitems(config, items):
    if "__mutmut_" in os.environ.get("MUTANT_UNDER_TEST", ""):
        from tests.support.mutation_support import fastest_first

        fastest_first(items)


@pytest.fixture
def float16_floatx():
    """Sets Keras' global floatx to float16 for one test, then restores it."""
    import keras

    previous = keras.config.floatx()
    keras.config.set_floatx("float16")
    yield
    keras.config.set_floatx(previous)


@pytest.fixture
def ascii_locale():
    """The process's text encoding set to ASCII (the C locale), as on a machine without a UTF-8 locale."""
    import locale

    previous = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    yield
    locale.setlocale(locale.LC_CTYPE, previous)


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


_SERVER = """
import base64, json, sys
import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.client import pywrap_tf_session


def registered_ops():
    op_list = op_def_pb2.OpList()
    op_list.ParseFromString(pywrap_tf_session.TF_GetBuffer(pywrap_tf_session.TF_GetAllOpList()))
    return {op.name for op in op_list.op}


tensorflow_ops = registered_ops()
import tensorflow_text  # noqa: F401,E402 - registers the tokenizer ops
# What TensorFlow Serving's standard build runs: TensorFlow's ops and TensorFlow Text's.
servable = tensorflow_ops | registered_ops()
PYTHON_OPS = {"PyFunc", "PyFuncStateless", "EagerPyFunc"}


def graph_ops(export_dir):
    saved = saved_model_pb2.SavedModel()
    with open(export_dir + "/saved_model.pb", "rb") as handle:
        saved.ParseFromString(handle.read())
    ops = set()
    for graph in saved.meta_graphs:
        functions = {function.signature.name for function in graph.graph_def.library.function}
        ops |= {node.op for node in graph.graph_def.node}
        ops |= {node.op for function in graph.graph_def.library.function for node in function.node_def}
        ops -= functions
    return ops

loaded = {}


def text(x):
    return [text(item) for item in x] if isinstance(x, list) else x.decode("utf-8")


for line in sys.stdin:
    request = json.loads(line)
    if request["export_dir"] not in loaded:
        loaded[request["export_dir"]] = tf.saved_model.load(request["export_dir"])
    serve = loaded[request["export_dir"]].signatures["serving_default"]
    out = {"unservable_ops": sorted(op for op in graph_ops(request["export_dir"]) if op not in servable or op in PYTHON_OPS)}
    if out["unservable_ops"]:
        request["batches"] = {}  # nothing runs that would need them
    for name, batch in request["batches"].items():
        if request["binary"]:
            batch = [base64.b64decode(item) for item in batch]
        try:
            result = serve(**{request["input_name"]: tf.constant(batch, dtype=tf.string)})
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
    out["seqtasks_modules"] = [m for m in sys.modules if m.startswith("seqtasks")]
    print("RESULT " + json.dumps(out), flush=True)
"""
_SERVING = {}


def serve_in_tensorflow_only(export_dir, batches, input_name="text"):
    """Runs `serving_default` of a SavedModel in a process that imports only TensorFlow (and tensorflow_text).

    It also fails if any op of the SavedModel's graph (every signature's) is
    neither TensorFlow's nor TensorFlow Text's, so stock TensorFlow Serving
    can load every export the tests make.

    One such process serves every call of the test session, as a model
    server would. `batches` maps names to lists of input strings, or of bytes
    (sent as such), one after the other. Returns, per name and output key,
    `{"shape", "dtype", "value"}` with strings decoded; for a batch the model
    refused, `{"error": message}`.
    """
    import base64
    import tempfile

    if "process" not in _SERVING or _SERVING["process"].poll() is not None:
        _SERVING["stderr"] = tempfile.TemporaryFile(mode="w+")
        _SERVING["process"] = subprocess.Popen(
            [sys.executable, "-c", _SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=_SERVING["stderr"],
            text=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
            cwd=REPO,
        )
    process = _SERVING["process"]
    binary = any(isinstance(item, bytes) for batch in batches.values() for item in batch)
    if binary:
        batches = {name: [base64.b64encode(item).decode() for item in batch] for name, batch in batches.items()}
    request = {"export_dir": str(export_dir), "batches": batches, "input_name": input_name, "binary": binary}
    process.stdin.write(json.dumps(request) + "\n")
    process.stdin.flush()
    for line in process.stdout:
        if line.startswith("RESULT "):
            out = json.loads(line.removeprefix("RESULT "))
            assert out.pop("seqtasks_modules") == [], "the serving process imported seqtasks"
            # Stock TensorFlow Serving links TensorFlow Text's ops but no others: no PyFunc, no custom op.
            unservable = out.pop("unservable_ops")
            assert unservable == [], f"{export_dir}: ops TensorFlow Serving lacks: {unservable}"
            return out
    _SERVING["stderr"].seek(0)
    raise AssertionError(f"the serving process ended: {_SERVING['stderr'].read()[-3000:]}")


@pytest.fixture(scope="session")
def run_cache(tmp_path_factory):
    """The session's cache of small trained runs (`tests/support/trained_runs.py`): `run_cache.get(spec)` trains a spec
    the first time any test of the session, in either pytest-xdist worker, asks for it."""
    from tests.support.trained_runs import RunCache, session_cache_folder

    return RunCache(session_cache_folder(tmp_path_factory))


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


def pytest_sessionfinish(session, exitstatus):
    """The serving process ends with the session."""
    process = _SERVING.get("process")
    if process is not None and process.poll() is None:
        process.stdin.close()
        process.wait(timeout=60)


@pytest.fixture(scope="module")
def jax_env(tmp_path_factory):
    """The environment of a fresh JAX process; those of a test module share XLA's compilation cache."""
    cache = tmp_path_factory.mktemp("xla-cache")
    return {
        "KERAS_BACKEND": "jax",
        "JAX_PLATFORMS": "cpu",
        "JAX_COMPILATION_CACHE_DIR": str(cache),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    }
