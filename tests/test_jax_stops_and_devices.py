"""Under Keras' JAX backend: early stopping, mixed_bfloat16, exports from a checkpoint, and data parallelism.

Apart from tests/test_jax_training.py so that pytest-xdist runs the two files' trainings on
different workers.
"""

import json
import math

import pytest
from conftest import serve_in_tensorflow_only

pytestmark = pytest.mark.slow  # trainings in fresh processes, compiled by XLA


_TWO_DEVICES = """
import json, sys
import jax
from click.testing import CliRunner
from seqtasks.cli import main
from seqtasks.training.distribute import make_strategy
from seqtasks.recipe.schema import DistributeConfig
assert len(jax.devices()) == 2, jax.devices()
replicas = {name: make_strategy(DistributeConfig(strategy=name), "jax").num_replicas_in_sync
            for name in ("auto", "mirrored", "default", "one_device")}
flags = []
# 257 and 33 examples: batches of 32 leave partial batches that do not divide over two devices.
for override in ["distribute.strategy=mirrored", "training.epochs=1", "export.enabled=false", "data.train_size=257",
                 "data.validation_size=33", "training.batch_size=32", "model.decoding.beam_width=1"]:
    flags += ["--set", override]
out = CliRunner().invoke(main, ["run", "toy", "--output-dir", sys.argv[1]] + flags)
print(json.dumps({"exit": out.exit_code, "output": out.output[-2000:], "error": str(out.exception or "")[-1000:],
                  "replicas": replicas}))
"""


def test_jax_trains_data_parallel_over_two_devices_with_uneven_batches(tmp_path, jax_env):
    from conftest import run_python

    env = dict(jax_env, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    result = run_python(_TWO_DEVICES.replace("sys.argv[1]", repr(str(tmp_path))), env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["exit"] == 0, outcome
    assert outcome["replicas"] == {"auto": 2, "mirrored": 2, "default": 1, "one_device": 1}
    (metrics,) = tmp_path.glob("*/*/metrics.json")
    history = json.loads(metrics.read_text())["history"]
    assert all(math.isfinite(v) for v in history["loss"] + history["val_loss"])


_STOPS_AND_EXPORTS = """
import json, sys
from click.testing import CliRunner
from seqtasks.cli import main
root = sys.argv[1]
common = ["data.train_size=300", "data.validation_size=40", "training.batch_size=32", "model.decoding.beam_width=1",
          "export.directory=" + root + "/exports"]


def run(*args):
    out = CliRunner().invoke(main, [str(arg) for arg in args])
    return {"exit": out.exit_code, "output": out.output[-3000:], "error": repr(out.exception)[-1000:]}


def flags(overrides):
    return [flag for override in common + overrides for flag in ("--set", override)]


# Steps too small to move float32 weights: val_loss never improves, so patience 1 stops the run after epoch 2.
stalled = run("run", "toy", "--output-dir", root + "/stalled", *flags(
    ["training.epochs=6", "training.optimizer=sgd", "training.learning_rate=1e-12", "training.early_stopping_patience=1",
     "export.enabled=false"]))
mixed = run("run", "toy", "--output-dir", root + "/mixed", *flags(["training.epochs=2", "training.precision=mixed_bfloat16"]))
import glob
(mixed_dir,) = glob.glob(root + "/mixed/*/*")
again = run("export", mixed_dir, "--checkpoint", "best", "--force")
print(json.dumps({"stalled": stalled, "mixed": mixed, "again": again}))
"""


def test_early_stopping_mixed_bfloat16_and_checkpoint_exports_under_jax(tmp_path, jax_env):
    from conftest import run_python

    result = run_python(_STOPS_AND_EXPORTS.replace("sys.argv[1]", repr(str(tmp_path))), env=jax_env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert all(outcome[key]["exit"] == 0 for key in outcome), outcome

    (stalled,) = (tmp_path / "stalled").glob("*/*/metrics.json")
    metrics = json.loads(stalled.read_text())
    history = metrics["history"]
    assert len(history["val_loss"]) == 2 and history["val_loss"][1] == history["val_loss"][0]
    # 300 and 40 examples, batches of 32: a full and a last, partial batch shape, compiled once for both epochs.
    assert {name: entry["compilations"] for name, entry in metrics["xla_compilations"].items()} == {
        "train_step": 2,
        "test_step": 2,
    }
    assert "XLA compiled train_step for 2 batch shape(s)" in outcome["stalled"]["output"]

    (mixed,) = (tmp_path / "mixed").glob("*/*/metrics.json")
    losses = json.loads(mixed.read_text())["history"]["loss"]
    assert all(math.isfinite(v) for v in losses) and losses[1] < losses[0]
    first, second = tmp_path / "exports" / "toy" / "1", tmp_path / "exports" / "toy" / "2"
    assert outcome["again"]["output"].strip().splitlines()[-1] == f"SavedModel: {second}"
    digits = ["1 2 3", "4 4 0 9", ""]
    served = serve_in_tensorflow_only(first, {"digits": digits})["digits"]
    # The run keeps its best weights, so the best checkpoint's export writes what the run's own export wrote.
    assert serve_in_tensorflow_only(second, {"digits": digits})["digits"]["output"]["value"] == served["output"]["value"]
    assert served["score"]["dtype"] == "float32"
