"""The TensorFlow export process (`export_request`): it rebuilds what it exports, an ensemble of runs too."""

import json

import pytest

from seqtasks.recipe import load_recipe
from tests.support.trained_runs import TRANSLATION


@pytest.fixture(scope="module")
def translation_run(run_cache):
    return run_cache.get(TRANSLATION)


@pytest.mark.slow
def test_the_tensorflow_export_process_rebuilds_an_ensemble_from_its_runs(translation_run, tmp_path):
    # What a JAX run's `export --ensemble` asks of its TensorFlow process (backends.export_in_tensorflow).
    from seqtasks.lifecycle.tensorflow_export import export_request
    from seqtasks.recipe import dump_recipe

    _, run_dir, _ = translation_run
    recipe = load_recipe(run_dir / "recipe.yaml", [f"export.directory={tmp_path}", "name=tiny-ensemble"])
    (tmp_path / "recipe.yaml").write_text(dump_recipe(recipe), encoding="utf-8")
    request = {"run_dir": str(run_dir), "recipe_file": str(tmp_path / "recipe.yaml"), "checkpoint": None,
               "metrics": None, "force": False, "ensemble": [str(run_dir)], "notes": ["An ensemble of 2 runs."],
               "run_metrics": False, "result": str(tmp_path / "result.json")}
    (tmp_path / "request.json").write_text(json.dumps(request), encoding="utf-8")
    export_request(tmp_path / "request.json")
    answer = json.loads((tmp_path / "result.json").read_text())
    assert answer == {"exported": str(tmp_path / "tiny-ensemble" / "1"), "error": None}
    extra = tmp_path / "tiny-ensemble" / "1" / "assets.extra"
    assert "An ensemble of 2 runs." in (extra / "MODEL_CARD.md").read_text()
    assert not (extra / "metrics.json").exists()
    sha = (extra / "weights.sha256").read_text().split()[0]
    from seqtasks.lifecycle.runner import Runner
    from seqtasks.export.saved_model import weights_sha256

    runner = Runner.open(run_dir, log=lambda line: None)
    assert sha == weights_sha256(runner.ensemble([run_dir]).weights)  # both members' weights, not one model's
