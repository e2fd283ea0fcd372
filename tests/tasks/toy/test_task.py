"""The default recipe end to end: train, evaluate, write the run folder, export, serve."""

import json
from pathlib import Path

import keras
import numpy as np
import pytest
import yaml

from seqtasks.recipe import load_recipe
from tests.conftest import run_recipe, seqtasks_command, serve_in_tensorflow_only
from tests.support.trained_runs import SMALL_TOY, TOY


@pytest.fixture(scope="module")
def toy_run(run_cache):
    """The whole default toy recipe (`trained_runs.TOY`): what it learns is the claim under test."""
    trained = run_cache.get(TOY)
    return trained.run_dir, trained.exports, trained.output


@pytest.fixture(scope="module")
def small_toy_run(run_cache):
    """One step of the toy recipe (`trained_runs.SMALL_TOY`), for the commands that need a run folder, not a good model."""
    trained = run_cache.get(SMALL_TOY)
    return trained.run_dir, trained.exports, trained.output


@pytest.mark.slow
def test_the_model_learns_to_reverse(toy_run):
    run_dir, _, output = toy_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["validation"]["sequence_accuracy"] >= 0.95
    assert metrics["validation"]["token_accuracy"] >= 0.98
    losses = metrics["history"]["loss"]
    assert losses[-1] < losses[0] / 10
    assert "validation sequence_accuracy" in output
    # Scores by length: the buckets' counts add up, and their accuracies average back to the whole.
    buckets = [entry for entry in metrics["by_length"]["buckets"] if entry["count"]]
    assert [entry["bucket"] for entry in buckets] == ["1-5", "6-10"] and sum(e["count"] for e in buckets) == 300
    overall = sum(e["count"] * e["sequence_accuracy"] for e in buckets) / 300
    assert overall == pytest.approx(metrics["validation"]["sequence_accuracy"])
    assert "By source length (source symbols):" in output


@pytest.mark.slow
def test_run_folder_holds_recipe_metrics_logs_and_model(toy_run):
    run_dir, exports, _ = toy_run
    saved = yaml.safe_load((run_dir / "recipe.yaml").read_text())
    assert saved["export"]["directory"] == str(exports)  # the --set value is in the merged recipe
    assert load_recipe(run_dir / "recipe.yaml").model.attention.score == "general"
    assert list((run_dir / "logs" / "train").glob("events.out.tfevents.*"))
    assert list((run_dir / "logs" / "validation").glob("events.out.tfevents.*"))
    assert (run_dir / "checkpoints" / "best.weights.h5").is_file()
    model = keras.models.load_model(run_dir / "model" / "model.keras", safe_mode=True)
    digits = np.array([[4, 5, 6, 0]])  # ids of "0 1 2", then padding
    target_in = np.array([[2, 6, 5, 4]])  # [START] "2 1 0"
    predicted = np.argmax(model.predict([digits, target_in], verbose=0), -1)
    np.testing.assert_array_equal(predicted, [[6, 5, 4, 3]])  # "2 1 0" [END]


@pytest.mark.slow
def test_saved_model_serves_strings_with_tensorflow_alone(toy_run):
    _, exports, _ = toy_run
    batches = {
        "digits": ["3 1 4 1 5", "2 7 1 8"],
        "single": ["9 8 7"],
        "edge": ["", "1 " * 1000, "déjà vu 1 2 3", "\t3\n4 "],
        "empty_batch": [],
    }
    out = serve_in_tensorflow_only(exports / "toy" / "1", batches)
    for name, batch in batches.items():
        assert out[name]["output"]["dtype"] == "string" and out[name]["score"]["dtype"] == "float32"
        assert out[name]["output"]["shape"] == out[name]["score"]["shape"] == [len(batch)]
    assert out["digits"]["output"]["value"] == ["5 1 4 1 3", "8 1 7 2"]
    assert out["single"]["output"]["value"] == ["7 8 9"]
    assert out["edge"]["output"]["value"][3] == "4 3"
    assert out["edge"]["output"]["value"][0] == "" and out["edge"]["score"]["value"][0] == 0.0  # nothing in, nothing out
    assert out["empty_batch"]["output"]["value"] == []


@pytest.mark.slow
def test_export_command_writes_the_next_version_and_a_full_disk_keeps_the_last(run_cache, tmp_path, monkeypatch):
    import tensorflow as tf

    copy = run_cache.copy(SMALL_TOY, tmp_path / "copy")  # new versions go to the run's own export directory
    run_dir, exports = copy.run_dir, copy.exports
    before = {p.relative_to(exports): p.read_bytes() for p in (exports / "toy").rglob("*") if p.is_file()}
    # The final model is the one training exported: same weights (hashed from model.keras), same recipe.
    result = seqtasks_command("export", run_dir)
    assert result.stdout.strip().splitlines()[-2:] == [
        f"{exports / 'toy' / '1'} has these weights and this recipe already: nothing exported "
        "(--force exports a new version anyway)",
        f"SavedModel: {exports / 'toy' / '1'}",
    ]
    assert sorted(p.name for p in (exports / "toy").iterdir()) == ["1"]
    result = seqtasks_command("export", run_dir, "--force")
    assert result.stdout.strip().splitlines()[-1] == f"SavedModel: {exports / 'toy' / '2'}"
    assert sorted(p.name for p in (exports / "toy").iterdir()) == ["1", "2"]

    def fill_the_disk(obj, folder, signatures=None):
        (Path(folder) / "saved_model.pb").write_bytes(b"half")
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    monkeypatch.setattr(tf.saved_model, "save", fill_the_disk)
    result = seqtasks_command("export", run_dir, "--checkpoint", "latest", "--force", expect=2)
    assert result.stderr.strip().splitlines() == [
        f"Error: {exports / 'toy'}: writing the new version failed (No space left on device); no version was "
        "added and earlier versions are untouched"
    ]
    assert sorted(p.name for p in (exports / "toy").iterdir()) == ["1", "2"]  # no temporary folder left
    assert {p: (exports / p).read_bytes() for p in before} == before


@pytest.mark.slow
def test_an_export_carries_the_recipe_its_sources_the_metrics_and_a_model_card(small_toy_run):
    from seqtasks import __version__

    run_dir, exports, _ = small_toy_run
    version = exports / "toy" / "1"  # exported at the end of training
    extra = version / "assets.extra"
    names = ["MODEL_CARD.md", "metrics.json", "recipe.yaml", "source.json", "weights.sha256"]
    assert sorted(p.name for p in extra.iterdir()) == names
    assert (extra / "recipe.yaml").read_text() == (run_dir / "recipe.yaml").read_text()
    run_metrics = json.loads((run_dir / "metrics.json").read_text())
    exported_metrics = json.loads((extra / "metrics.json").read_text())  # as they were before the export
    assert exported_metrics["validation"] == run_metrics["validation"]
    assert {key: run_metrics[key] for key in exported_metrics} == exported_metrics
    weights = (extra / "weights.sha256").read_text()
    assert len(weights) == 65 and weights.endswith("\n")
    assert json.loads((extra / "source.json").read_text()) == {
        "seqtasks_version": __version__,
        "run_dir": str(run_dir.resolve()),
        "checkpoint": "final",
        "checkpoint_file": str(run_dir.resolve() / "model" / "model.keras"),
        "weights_sha256": weights.strip(),
        "data_files": {},
        "data_url": "",
        "signature": {
            "inputs": {"text": {"dtype": "string", "shape": [None]}},
            "outputs": {"output": {"dtype": "string", "shape": [None]}, "score": {"dtype": "float32", "shape": [None]}},
            "custom_ops": [],
            "signatures": ["attention", "score", "serving_default", "with_prefix", "with_settings"],
        },
    }
    card = (extra / "MODEL_CARD.md").read_text()
    assert "Other signatures (`signature_name` in TensorFlow Serving's predict API): `attention`: " in card
    assert "`with_settings`: the same outputs, decoded with the decoding settings (below) as inputs" in card
    # The settings' table: every declared setting, with this export's own value (the recipe's) and its bounds.
    from seqtasks.decoding.settings import SETTINGS

    decoding = load_recipe(run_dir / "recipe.yaml").model.decoding
    for setting in SETTINGS:
        row = f"| `{setting.name}` | {setting.dtype} | {getattr(decoding, setting.name)} | {setting.low}..{setting.high} |"
        assert row in card
    assert "`score`: given a `target` text per input, the log-probability" in card
    assert "`with_prefix`: the outputs of `with_settings` given a `prefix` text per input" in card
    recipe = load_recipe(run_dir / "recipe.yaml")
    expected = [
        "```python",
        "import tensorflow as tf",  # no tensorflow_text: the toy graph uses core operations only
        f'serve = tf.saved_model.load("{version}").signatures["serving_default"]',
        'outputs = serve(text=tf.constant(["Your text here."]))',
        'print(outputs["output"].numpy())',
        'print(outputs["score"].numpy())',
        "```",
        "",
        "| | name | dtype | shape |",
        "| --- | --- | --- | --- |",
        "| input | `text` | string | [batch] |",
        "| output | `output` | string | [batch] |",
        "| output | `score` | float32 | [batch] |",
    ]
    assert "\n".join(expected) in card
    assert f"Exported by seqtasks {__version__} from the run folder `{run_dir.resolve()}`, its final model" in card
    for key, value in run_metrics["validation"].items():
        assert f"| {key} | {value:.4f} |" in card
    assert f"Generated by seqtasks from the recipe (seed {recipe.seed}); no data files." in card
    assert f"- A text is cut to its first {recipe.data.max_length} tokens (`data.max_length`)." in card
    assert f"- An output has at most {recipe.model.decoding.max_length} tokens" in card


@pytest.mark.slow
def test_eval_refuses_a_task_without_data_files_and_export_names_a_bad_checkpoint(small_toy_run, tmp_path):
    run_dir, _, _ = small_toy_run
    data = tmp_path / "digits.txt"
    data.write_text("1 2 3\n")
    result = seqtasks_command("eval", run_dir, "--data", data, expect=2)
    assert "task 'toy' makes its own data; it has no data files to evaluate on" in result.stderr
    result = seqtasks_command("export", run_dir, "--checkpoint", "last", expect=2)
    assert "--checkpoint: expected one of final, best, latest, a step number or a .weights.h5 file; got 'last'" in (
        result.stderr
    )
    result = seqtasks_command("export", tmp_path, expect=2)
    assert f"{tmp_path}: not a run folder (it has no recipe.yaml)" in result.stderr
    result = seqtasks_command("eval", "toy", "--data", data, "--output-dir", tmp_path, expect=2)
    assert f"{tmp_path / 'toy'}: no finished run of recipe 'toy'" in result.stderr


@pytest.mark.slow
def test_an_unfinished_run_is_resumed_by_the_same_command_unless_fresh(run_cache, tmp_path):
    from click.testing import CliRunner

    from seqtasks.cli import main

    copy = run_cache.copy(SMALL_TOY, tmp_path / "copy")  # one step, as if trained in tmp_path/copy
    output_dir, run_dir = copy.root / "runs", copy.run_dir
    overrides = [*SMALL_TOY.overrides, f"export.directory={copy.exports}"]
    first = json.loads((run_dir / "metrics.json").read_text())
    # As if killed after training, before the metrics were written: training is not redone.
    (run_dir / "metrics.json").unlink()
    again, output = run_recipe("toy", output_dir, *overrides)
    assert again == run_dir and f"Resuming the unfinished run in {run_dir}" in output
    assert "Resuming from step 1 (epoch 2, batch 0)" in output and "Epoch 1/1" not in output
    assert json.loads((run_dir / "metrics.json").read_text())["validation"] == first["validation"]
    args = ["run", "toy", "--output-dir", str(output_dir), "--fresh"] + [a for o in overrides for a in ("--set", o)]
    (run_dir / "metrics.json").unlink()
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0 and "Resuming" not in result.output
    assert len(list((output_dir / "toy").iterdir())) == 2


@pytest.mark.slow
def test_without_attention_the_toy_trains_decodes_n_best_and_serves_with_tensorflow_alone(tmp_path):
    # Sutskever et al.'s kind: the source reaches the decoder only through the bridge's initial state.
    overrides = ["model.attention.type=none", "model.decoding.beam_width=3", "model.decoding.n_best=2", "training.epochs=6"]
    run_dir, output = run_recipe("toy", tmp_path / "runs", f"export.directory={tmp_path / 'exports'}", *overrides)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    # The plain encoder-decoder learns short reversals, and does worse on the longer ones.
    short, longer = [entry for entry in metrics["by_length"]["buckets"] if entry["count"]]
    assert short["sequence_accuracy"] >= 0.5 and short["sequence_accuracy"] > longer["sequence_accuracy"]
    out = serve_in_tensorflow_only(tmp_path / "exports" / "toy" / "1", {"digits": ["3 1 4", "2 7 1 8"]})["digits"]
    assert out["outputs"]["shape"] == [2, 2] and out["output"]["value"] == [row[0] for row in out["outputs"]["value"]]
    assert out["output"]["value"][0] == "4 1 3"
    assert all(first >= second for first, second in out["scores"]["value"])
