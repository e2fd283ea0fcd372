"""Training under Keras' JAX backend: every task trains, resumes and exports a SavedModel TensorFlow serves alike.

Each test runs `seqtasks` in a fresh process started with `KERAS_BACKEND=jax`
(this process runs TensorFlow's Keras). The exports are then served by a
process that imports TensorFlow alone, and must give the JAX model's own
evaluation outputs.
"""

import json
import math

import pytest
from conftest import SAMPLE_PAIRS, serve_in_tensorflow_only

pytestmark = pytest.mark.slow  # trainings in fresh processes, compiled by XLA

JAX = {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}


@pytest.fixture(scope="module")
def jax_env(tmp_path_factory):
    """The JAX processes of a module share XLA's compilation cache: the same steps compile once."""
    cache = tmp_path_factory.mktemp("xla-cache")
    return dict(JAX, JAX_COMPILATION_CACHE_DIR=str(cache), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")

_EVERY_TASK = """
import json, sys
from click.testing import CliRunner
from seqtasks.cli import main
root = sys.argv[1]
common = ["training.epochs=1", "training.max_minutes=0.1", "export.directory=" + root + "/exports"]
tiny = ["model.encoder.units=16", "model.decoder.units=16", "model.embedding_dim=16", "model.decoding.beam_width=1"]
extra = {
    "translation": ["data.path=" + SAMPLE_PAIRS_PATH, "data.validation_size=20", "data.max_length=12", "data.source_vocab_size=400",
                    "data.target_vocab_size=400"] + tiny,
    "sentiment": ["data.validation_size=20", "data.vocab_size=300", "model.encoder.units=8", "model.embedding_dim=8"],
    "ner": ["model.encoder.units=8", "model.word_embedding_dim=8", "model.char_filters=4"],
    "captioning": ["data.max_train_images=41", "data.max_validation_images=5", "model.decoder.units=8",
                   "model.decoding.beam_width=1"],
}
results = {}
for task, overrides in extra.items():
    flags = [flag for override in common + overrides for flag in ("--set", override)]
    out = CliRunner().invoke(main, ["run", task, "--output-dir", root + "/runs"] + flags)
    results[task] = {"exit": out.exit_code, "output": out.output[-3000:], "error": str(out.exception or "")[-1000:]}
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def jax_runs(tmp_path_factory, jax_env):
    from conftest import run_python

    root = tmp_path_factory.mktemp("jax")
    script = _EVERY_TASK.replace("SAMPLE_PAIRS_PATH", repr(str(SAMPLE_PAIRS)))
    result = run_python(script.replace("sys.argv[1]", repr(str(root))), env=jax_env, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(result.stdout.strip().splitlines()[-1])
    runs = {}
    for task, outcome in results.items():
        assert outcome["exit"] == 0, (task, outcome)
        (run_dir,) = (root / "runs" / task).iterdir()
        runs[task] = (run_dir, outcome["output"], json.loads((run_dir / "metrics.json").read_text()))
    return runs


@pytest.mark.parametrize("task", ["translation", "sentiment", "ner", "captioning"])
def test_every_task_trains_under_jax_and_says_so(jax_runs, task):
    run_dir, output, metrics = jax_runs[task]
    assert "Keras backend: jax" in output
    assert "\nbackend: jax\n" in (run_dir / "recipe.yaml").read_text()
    history = metrics["history"]
    assert metrics["xla_compilations"]["train_step"]["compilations"] >= 1
    assert history["loss"] and all(math.isfinite(v) for key in ("loss", "val_loss") for v in history[key])
    assert metrics["export"] == str(_export(run_dir, task))
    assert (_export(run_dir, task) / "saved_model.pb").is_file()
    # The export's own copy of the recipe says what trained it.
    assert "\nbackend: jax\n" in (_export(run_dir, task) / "assets.extra" / "recipe.yaml").read_text()


def _export(run_dir, task):
    return run_dir.parent.parent.parent / "exports" / task / "1"


def test_a_translation_export_writes_what_the_jax_model_wrote(jax_runs):
    run_dir, _, _ = jax_runs["translation"]
    rows = [line.split("\t") for line in (run_dir / "translations.tsv").read_text(encoding="utf-8").split("\n") if line]
    sources, hypotheses = [row[0] for row in rows], [row[1] for row in rows]
    served = serve_in_tensorflow_only(_export(run_dir, "translation"), {"sample": sources})["sample"]
    assert served["translation"]["value"] == hypotheses
    assert any(hypotheses)


def test_a_sentiment_export_labels_as_the_jax_model_did(jax_runs):
    run_dir, _, _ = jax_runs["sentiment"]
    rows = [line.split("\t") for line in (run_dir / "predictions.tsv").read_text(encoding="utf-8").split("\n") if line]
    served = serve_in_tensorflow_only(_export(run_dir, "sentiment"), {"sample": [row[2] for row in rows]})["sample"]
    assert served["label"]["value"] == [row[0] for row in rows]


def test_a_ner_export_tags_as_the_jax_model_did(jax_runs):
    run_dir, _, _ = jax_runs["ner"]
    blocks = (run_dir / "predictions.conll").read_text(encoding="utf-8").strip().split("\n\n")[:40]
    sentences = [[line.split("\t") for line in block.splitlines()] for block in blocks]
    texts = [" ".join(word for word, _, _ in rows) for rows in sentences]
    served = serve_in_tensorflow_only(_export(run_dir, "ner"), {"sample": texts})["sample"]
    for rows, tags in zip(sentences, served["tags"]["value"]):
        assert tags[: len(rows)] == [predicted for _, _, predicted in rows]


_RESUME = """
import json, sys
from seqtasks.checkpoints import TrainingCheckpoints
from seqtasks.recipe import load_recipe
from seqtasks.runner import Runner

root, pairs = sys.argv[1], sys.argv[2]
overrides = ["data.path=" + pairs, "data.validation_size=20", "data.max_length=12", "data.source_vocab_size=400", "data.target_vocab_size=400",
             "model.encoder.units=16", "model.decoder.units=16", "model.embedding_dim=16", "model.decoding.beam_width=1",
             "training.batch_size=32", "training.epochs=2", "training.checkpoint_every_steps=3",
             "training.early_stopping_patience=null", "export.enabled=false", "training.max_minutes=null"]
recipe = load_recipe("recipes/translation.yaml", overrides)
quiet = lambda line: None
whole = Runner.start(recipe, root + "/whole", log=quiet).train()


class Stopped(Exception):
    pass


save = TrainingCheckpoints.save


def save_then_stop(self, done=False):
    save(self, done)
    if self.epoch == 1 and self.batches_done >= 2:
        raise Stopped


TrainingCheckpoints.save = save_then_stop
try:
    Runner.start(recipe, root + "/stopped", log=quiet).train()
except Stopped:
    pass
TrainingCheckpoints.save = save
resumed = Runner.start(recipe, root + "/stopped", log=quiet).train()
print(json.dumps({"whole": whole["history"], "resumed": resumed["history"]}))
"""


def test_a_jax_run_stopped_mid_epoch_resumes_as_the_uninterrupted_run(tmp_path, jax_env):
    from conftest import run_python, write_sample_pairs

    write_sample_pairs(tmp_path / "pairs.tsv", 400)
    result = run_python(
        _RESUME.replace("sys.argv[1], sys.argv[2]", f"{str(tmp_path)!r}, {str(tmp_path / 'pairs.tsv')!r}"),
        env=jax_env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    histories = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(histories["whole"]["loss"]) == 2
    assert histories["resumed"] == histories["whole"]


_TWO_DEVICES = """
import json, sys
import jax
from click.testing import CliRunner
from seqtasks.cli import main
from seqtasks.distribute import make_strategy
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
