"""The recipe's `backend` field: chosen before Keras starts, checked, recorded and printed; JAX's strategies."""

import keras  # noqa: F401 - Keras starts here, on TensorFlow, before any command below runs
import pytest
from conftest import REPO, run_python, seqtasks_command

from seqtasks.lifecycle.backends import resolve_backend
from seqtasks.training.distribute import make_strategy
from seqtasks.errors import SeqtasksError
from seqtasks.recipe import load_recipe
from seqtasks.recipe.schema import DistributeConfig
from seqtasks.lifecycle.runner import Runner

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
