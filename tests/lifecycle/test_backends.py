"""The recipe's `backend` field: chosen before Keras starts, checked, recorded and printed; JAX's strategies.

`training.matmul_precision`: set for the whole process by a run, and read back by the tests' tolerances.

Training under Keras' JAX backend: every task trains, resumes and exports a SavedModel TensorFlow serves alike.

One fresh process started with `KERAS_BACKEND=jax` (this process runs
TensorFlow's Keras) runs `seqtasks` on every task, then stops the translation
run's recipe at a step checkpoint mid-epoch and resumes it: the translation
run of the sweep is the uninterrupted run the resumed one must equal. The
exports are served by a process that imports TensorFlow alone, and must give
the JAX model's own evaluation outputs.
"""

import json
import math

import keras  # noqa: F401 - Keras starts here, on TensorFlow, before any command below runs
import pytest

from seqtasks.errors import SeqtasksError
from seqtasks.lifecycle.backends import matmul_precision, resolve_backend, set_matmul_precision
from seqtasks.lifecycle.runner import Runner
from seqtasks.recipe import load_recipe
from seqtasks.recipe.schema import DistributeConfig
from seqtasks.training.distribute import make_strategy
from tests.conftest import REPO, SAMPLE_PAIRS, run_python, seqtasks_command, serve_in_tensorflow_only
from tests.support import numerics
from tests.support.numerics import tolerance
from tests.support.trained_runs import (
    EXACT_RESUME,
    RESUMABLE,
    json_lines,
    stop_and_resume_script,
    write_translation_for_resume,
)


TOY = REPO / "recipes" / "toy.yaml"


@pytest.mark.slow
def test_seqtasks_run_sets_the_recipe_s_backend_before_keras_starts():
    result = run_python(
        "from seqtasks.lifecycle.backends import select_backend\n"
        "from seqtasks.recipe import load_recipe\n"
        f"select_backend(load_recipe({str(TOY)!r}, ['backend=jax']))\n"
        "import keras\n"
        "print(keras.backend.backend())\n",
        env={"KERAS_BACKEND": "tensorflow", "JAX_PLATFORMS": "cpu"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["jax"]


def test_a_backend_keras_did_not_start_with_is_a_one_line_error_and_leaves_no_run_folder(tmp_path):
    result = seqtasks_command("run", TOY, "--output-dir", tmp_path, "--set", "backend=jax", expect=2)
    assert (
        "backend: the recipe asks for 'jax', but Keras already runs on 'tensorflow' in this process "
        "(start it with KERAS_BACKEND=jax, as `seqtasks run` does)"
    ) in result.output
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_backend_is_a_recipe_error(tmp_path):
    result = seqtasks_command("run", TOY, "--output-dir", tmp_path, "--set", "backend=torch", expect=2)
    assert "backend" in result.output and "expected one of auto, tensorflow, jax" in result.output


def test_auto_is_recorded_as_the_backend_that_ran_and_printed(tmp_path):
    lines = []
    recipe = load_recipe(TOY)
    assert recipe.backend == "auto"
    assert resolve_backend(recipe).backend == "tensorflow"
    runner = Runner.start(recipe, tmp_path, log=lines.append)
    assert runner.recipe.backend == "tensorflow"
    assert "\nbackend: tensorflow\n" in (runner.run_dir / "recipe.yaml").read_text()
    assert "Keras backend: tensorflow" in lines


@pytest.mark.parametrize(
    "strategy, message",
    [
        ("tpu", "distribute.strategy: 'tpu' is TensorFlow's TPUStrategy; under JAX a TPU's cores are devices"),
        ("multi_worker", "distribute.strategy: 'multi_worker' under JAX needs one process per host"),
    ],
)
def test_strategies_jax_cannot_run_are_clear_errors(strategy, message, monkeypatch):
    monkeypatch.delenv("KERAS_DISTRIBUTION_JOB_ADDRESSES", raising=False)
    with pytest.raises(SeqtasksError, match="^" + message.replace("(", r"\(")):
        make_strategy(DistributeConfig(strategy=strategy), "jax")


@pytest.fixture
def restore_precision():
    before = matmul_precision()
    yield
    set_matmul_precision(before)


@pytest.mark.backends
def test_highest_is_set_for_the_process_and_read_back(restore_precision):
    set_matmul_precision("highest")
    assert matmul_precision() == "highest"
    set_matmul_precision("default")
    assert matmul_precision() == "default"


@pytest.mark.backends
def test_the_backend_itself_holds_the_setting(restore_precision):
    import keras

    set_matmul_precision("highest")
    if keras.backend.backend() == "jax":
        import jax

        assert jax.config.jax_default_matmul_precision == "highest"
    else:
        import tensorflow as tf

        assert not tf.config.experimental.tensor_float_32_execution_enabled()


@pytest.mark.backends
def test_a_run_sets_its_recipe_s_precision(restore_precision, tmp_path):
    from tests.conftest import REPO

    from seqtasks.recipe import load_recipe
    from seqtasks.lifecycle.runner import Runner

    set_matmul_precision("default")
    Runner(load_recipe(REPO / "recipes" / "toy.yaml", ["training.matmul_precision=highest"]), tmp_path, log=None)
    assert matmul_precision() == "highest"


@pytest.mark.backends
@pytest.mark.skipif("numerics.accelerated()")
def test_tolerances_are_float32_s_on_a_cpu_whatever_the_precision(restore_precision):
    for name in ("default", "highest"):
        set_matmul_precision(name)
        assert not numerics.tensorfloat32_in_force()
        assert tolerance(atol=1e-5) == {"atol": 1e-5, "rtol": 1e-7}


@pytest.mark.backends
def test_tolerances_widen_only_where_tensorfloat32_is_in_force(monkeypatch):
    monkeypatch.setattr(numerics, "tensorfloat32_in_force", lambda: True)
    assert tolerance(atol=1e-5) == {"atol": 1e-2, "rtol": 1e-2}
    assert tolerance(atol=0.5, rtol=0.1) == {"atol": 0.5, "rtol": 0.1}


@pytest.mark.backends
def test_an_unknown_precision_is_a_recipe_error():
    from tests.conftest import REPO

    from seqtasks.errors import SeqtasksError
    from seqtasks.recipe import load_recipe

    with pytest.raises(SeqtasksError, match="training.matmul_precision.*expected one of default, highest"):
        load_recipe(REPO / "recipes" / "toy.yaml", ["training.matmul_precision=tf32"])


_EVERY_TASK = """
import json, sys
from click.testing import CliRunner
from seqtasks.cli import main
root = sys.argv[1]
common = ["training.epochs=1", "training.max_minutes=0.1", "export.directory=" + root + "/exports"]
tiny = ["model.encoder.units=16", "model.decoder.units=16", "model.embedding_dim=16", "model.decoding.beam_width=1"]
# The decoder without attention trains its whole epoch, whatever the load: its beam search's n-best translations are
# compared with the export's word for word, and cut short by the time limit on a busy machine (a step or two), the
# barely trained model's near-tied hypotheses came out different under JAX and TensorFlow.
whole_epoch = ["training.max_minutes=null"]
extra = {
    # The exact-resume recipe (RNNsearch's decoder, dropout, two epochs, a step checkpoint every 3 steps), whole.
    "translation": RESUME_OVERRIDES + ["training.max_minutes=null", "name=translation"],
    "sentiment": ["data.validation_size=20", "data.vocab_size=300", "model.encoder.units=8", "model.embedding_dim=8"],
    "ner": ["model.encoder.units=8", "model.word_embedding_dim=8", "model.char_filters=4"],
    # The decoder without attention (beam search, n-best), named apart so it has its own folders.
    "translation-none": ["data.path=" + SAMPLE_PAIRS_PATH, "data.validation_size=20", "data.max_length=12",
                         "data.source_vocab_size=400", "data.target_vocab_size=400", "name=translation-none",
                         "model.attention.type=none", "model.decoder.summary_input=true", "model.decoding.n_best=2",
                         # Sources of up to 37 subwords of 400: the export and evaluation read all whole.
                         "data.split_longer_than=48"]
                        + tiny[:-1] + ["model.decoding.beam_width=3"] + whole_epoch,
    "captioning": ["data.max_train_images=41", "data.max_validation_images=5", "model.decoder.units=8",
                   "model.decoding.beam_width=1"],
}
results = {}
recipes = {"translation": RESUME_RECIPE}
for task, overrides in extra.items():
    flags = [flag for override in common + overrides for flag in ("--set", override)]
    recipe = recipes.get(task, task.split("-")[0])
    out = CliRunner().invoke(main, ["run", recipe, "--output-dir", root + "/runs"] + flags)
    results[task] = {"exit": out.exit_code, "output": out.output[-3000:], "error": str(out.exception or "")[-1000:]}
print(json.dumps(results), flush=True)
"""


@pytest.fixture(scope="module")
def jax_runs(tmp_path_factory, jax_env):
    from tests.conftest import run_python

    root = tmp_path_factory.mktemp("jax")
    resume = root / "resume"
    resume.mkdir()
    overrides = write_translation_for_resume(resume)
    script = _EVERY_TASK.replace("SAMPLE_PAIRS_PATH", repr(str(SAMPLE_PAIRS))).replace("sys.argv[1]", repr(str(root)))
    script = script.replace("RESUME_RECIPE", repr(str(resume / "recipe.yaml")))
    script = script.replace("RESUME_OVERRIDES", repr([*RESUMABLE, *overrides]))
    script += stop_and_resume_script(resume, [*EXACT_RESUME, *overrides], uninterrupted=False)
    result = run_python(script, env=jax_env, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    *_, results, resumed = json_lines(result.stdout)
    runs = {"resumed": resumed}
    for task, outcome in results.items():
        assert outcome["exit"] == 0, (task, outcome)
        (run_dir,) = (root / "runs" / task).iterdir()
        runs[task] = (run_dir, outcome["output"], json.loads((run_dir / "metrics.json").read_text()))
    return runs


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_jax_run_stopped_mid_epoch_resumes_as_the_uninterrupted_run(jax_runs):
    _, _, metrics = jax_runs["translation"]
    resumed = jax_runs["resumed"]
    assert len(metrics["history"]["loss"]) == 2 and resumed["epochs"] == 2
    assert resumed["resumed"] == metrics["history"]


def _export(run_dir, task):
    return run_dir.parent.parent.parent / "exports" / task / "1"


@pytest.mark.slow
def test_a_translation_export_writes_what_the_jax_model_wrote(jax_runs):
    run_dir, _, _ = jax_runs["translation"]
    rows = [line.split("\t") for line in (run_dir / "translations.tsv").read_text(encoding="utf-8").split("\n") if line]
    sources, hypotheses = [row[0] for row in rows], [row[1] for row in rows]
    served = serve_in_tensorflow_only(_export(run_dir, "translation"), {"sample": sources})["sample"]
    assert served["translation"]["value"] == hypotheses
    assert any(hypotheses)


@pytest.mark.slow
def test_a_model_without_attention_trains_under_jax_and_its_export_writes_what_it_wrote(jax_runs):
    run_dir, output, metrics = jax_runs["translation-none"]
    assert "Keras backend: jax" in output and "this model has no attention" in output
    assert sum(entry["count"] for entry in metrics["by_length"]["buckets"]) == 20
    rows = [line.split("\t") for line in (run_dir / "translations.tsv").read_text(encoding="utf-8").split("\n") if line]
    served = serve_in_tensorflow_only(_export(run_dir, "translation-none"), {"sample": [row[0] for row in rows]})["sample"]
    assert served["translation"]["value"] == [row[1] for row in rows]
    assert served["translations"]["shape"] == [20, 2]


@pytest.mark.slow
def test_a_sentiment_export_labels_as_the_jax_model_did(jax_runs):
    run_dir, _, _ = jax_runs["sentiment"]
    rows = [line.split("\t") for line in (run_dir / "predictions.tsv").read_text(encoding="utf-8").split("\n") if line]
    served = serve_in_tensorflow_only(_export(run_dir, "sentiment"), {"sample": [row[2] for row in rows]})["sample"]
    assert served["label"]["value"] == [row[0] for row in rows]


@pytest.mark.slow
def test_a_ner_export_tags_as_the_jax_model_did(jax_runs):
    run_dir, _, _ = jax_runs["ner"]
    blocks = (run_dir / "predictions.conll").read_text(encoding="utf-8").strip().split("\n\n")[:40]
    sentences = [[line.split("\t") for line in block.splitlines()] for block in blocks]
    texts = [" ".join(word for word, _, _ in rows) for rows in sentences]
    served = serve_in_tensorflow_only(_export(run_dir, "ner"), {"sample": texts})["sample"]
    for rows, tags in zip(sentences, served["tags"]["value"]):
        assert tags[: len(rows)] == [predicted for _, _, predicted in rows]
