"""`training.average_last`: a run ends by weighing the average of its last checkpoints against its best epoch's weights.

The average is evaluated on the validation data and kept only if it scores
higher by the task's headline metric; metrics.json, model/model.keras, the
held-out splits and the export's model card all say, and hold, the kept one.

`seqtasks average --last N` on a run that keeps more than N checkpoints: the mean of exactly the newest N.

The run is a toy run folder made here without training: its recipe and four
step checkpoints of a tiny model, each with weights of its own
(`save_weights`, no `fit`).
"""

import json
from types import SimpleNamespace

import keras
import numpy as np
import pytest

from seqtasks.errors import RecipeError
from seqtasks.lifecycle.runner import Runner
from seqtasks.recipe import dump_recipe, load_recipe
from seqtasks.tasks.table import TASKS
from seqtasks.training.checkpoints import step_file
from tests.conftest import REPO, seqtasks_command
from tests.support.trained_runs import TRANSLATION_WITHOUT_ATTENTION


TOY = REPO / "recipes" / "toy.yaml"


def test_every_task_names_a_headline_its_evaluation_reports_and_a_task_without_one_cannot_average():
    from seqtasks.recipe.loader import _check_averaging

    reported = {"toy": "sequence_accuracy", "translation": "bleu", "sentiment": "accuracy", "ner": "f1",
                "captioning": "bleu_4"}
    assert {name: spec.headline for name, spec in TASKS.items()} == reported
    training = load_recipe(TOY, ["training.average_last=2"]).training
    errors = SimpleNamespace(error=lambda field, message: RecipeError(f"{field}: {message}"))
    with pytest.raises(RecipeError, match="task mine names no headline metric to choose the average by"):
        _check_averaging(training, SimpleNamespace(name="mine", headline=None), errors)


@pytest.mark.parametrize("key", ["best", "final"])  # "final": metrics.json of run folders before 2026-12-02
def test_the_model_card_weighs_the_average_against_the_best_epochs_weights(key):
    from seqtasks.export.model_card import Source, _scores

    averaging = {"last": 3, "steps": [4, 6, 8], "metric": "bleu", key: 0.5, "average": 0.25, "kept": key}
    metrics = {"validation": {"bleu": 0.5}, "averaging": averaging}
    lines = _scores(load_recipe(TOY), metrics, Source("run", "final", "run/model/model.keras", "0"), False)
    assert lines[-1] == (
        "Checkpoint averaging (`training.average_last`): the average of the last 3 step checkpoints (steps 4, 6, 8) "
        "scored bleu 0.2500 on the validation data against 0.5000 for the best epoch's weights (those of the best "
        "`training.monitor` value); these are the best epoch's weights, which scored higher."
    )
    kept = _scores(load_recipe(TOY), {**metrics, "averaging": {**averaging, "kept": "average"}},
                   Source("run", "final", "run/model/model.keras", "0"), False)
    assert kept[-1].endswith("; these weights are that average.")


@pytest.mark.slow
@pytest.mark.parametrize("average_wins", [True, False])
def test_a_run_keeps_the_better_of_its_average_and_its_best_epochs_weights_and_says_which(tmp_path, average_wins):
    import keras

    from seqtasks.lifecycle.runner import Runner

    recipe = load_recipe(TOY, [
        "data.train_size=256", "data.validation_size=64", "model.embedding_dim=8", "model.encoder.units=8",
        "model.decoder.units=16", "training.epochs=2", "training.batch_size=32", "training.checkpoint_every_steps=2",
        "training.keep_checkpoints=3", "training.average_last=3", f"export.directory={tmp_path / 'exports'}",
    ])
    runner = Runner.start(recipe, tmp_path / "runs", log=lambda line: None)
    evaluate = runner._evaluate

    def scripted(model, examples, out_dir):
        """The task's own evaluation, the average's headline moved so that the branch under test is taken."""
        evaluation = evaluate(model, examples, out_dir)
        (out_dir / "outputs.tsv").write_text("written as translation writes its outputs\n", encoding="utf-8")
        if out_dir.name == "average":
            evaluation["validation"]["sequence_accuracy"] += 0.5 if average_wins else -0.5
        return evaluation

    runner._evaluate = scripted
    metrics = runner.train()
    averaging = metrics["averaging"]
    assert averaging["last"] == 3 and averaging["metric"] == "sequence_accuracy"
    kept_steps = sorted(int(p.name[5:13]) for p in (runner.run_dir / "checkpoints").glob("step-*.weights.h5"))
    assert averaging["steps"] == kept_steps[-3:]  # the newest three
    assert averaging["kept"] == ("average" if average_wins else "best")
    assert metrics["validation"]["sequence_accuracy"] == max(averaging["average"], averaging["best"])
    on_disk = json.loads((runner.run_dir / "metrics.json").read_text(encoding="utf-8"))
    assert on_disk["averaging"] == averaging
    # model/model.keras holds the kept weights: the average file's, or the best epoch's.
    kept = keras.models.load_model(runner.run_dir / "model" / "model.keras", safe_mode=True, compile=False)
    averaged = runner.load_model(averaging["file"])
    same = all(np.array_equal(a, b) for a, b in zip(kept.get_weights(), averaged.get_weights()))
    assert same == (averaging["kept"] == "average")
    card = next(iter((tmp_path / "exports").rglob("MODEL_CARD.md"))).read_text(encoding="utf-8")
    assert f"the average of the last 3 step checkpoints (steps {', '.join(map(str, kept_steps[-3:]))})" in card
    assert ("these weights are that average" in card) == (averaging["kept"] == "average")


STEPS = (10, 20, 30, 40)
TINY = ["model.embedding_dim=4", "model.encoder.units=4", "model.decoder.units=4", "data.num_symbols=3"]


def _floating(model):
    """The model's floating-point weights: what `average` averages (this model has no others)."""
    return [v for v in model.weights if np.issubdtype(np.dtype(v.dtype), np.floating)]


@pytest.fixture
def run_with_four_checkpoints(tmp_path):
    """`(run_dir, {step: [floating weights]})`, each checkpoint's weights drawn apart."""
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "recipe.yaml").write_text(dump_recipe(load_recipe("recipes/toy.yaml", TINY)))
    runner = Runner.open(run_dir, log=lambda line: None)
    model = runner.task.build_model()
    model.build()
    runner.task.compile_model(model)
    model.optimizer.build(model.trainable_variables)
    rng = np.random.default_rng(0)
    floating = {}
    for step in STEPS:
        for variable in _floating(model):
            variable.assign(rng.normal(size=variable.shape).astype(np.dtype(variable.dtype)))
        model.optimizer.iterations.assign(step)
        model.save_weights(run_dir / "checkpoints" / step_file(step))
        floating[step] = [np.array(v.numpy()) for v in _floating(model)]
    return run_dir, floating


def test_average_last_3_of_4_kept_checkpoints_is_the_mean_of_the_newest_3(run_with_four_checkpoints):
    run_dir, floating = run_with_four_checkpoints
    result = seqtasks_command("average", run_dir, "--last", 3)
    path = run_dir / "checkpoints" / "average-3-to-step-00000040.weights.h5"
    assert result.output.splitlines()[-2:] == ["Averaged the checkpoints of steps 20, 30, 40", f"Checkpoint: {path}"]
    averaged = Runner.open(run_dir, log=lambda line: None).load_model(str(path))
    weights = [np.array(v.numpy()) for v in _floating(averaged)]
    assert len(weights) == len(floating[40]) > 0
    newest = [np.mean([floating[step][index] for step in STEPS[1:]], axis=0) for index in range(len(weights))]
    every = [np.mean([floating[step][index] for step in STEPS], axis=0) for index in range(len(weights))]
    for found, expected in zip(weights, newest):
        np.testing.assert_allclose(found, expected, rtol=1e-6, atol=1e-7)
    # The oldest checkpoint is not in it: with it, the mean would be far from what was written.
    assert max(float(np.max(np.abs(found - wrong))) for found, wrong in zip(weights, every)) > 0.1
    # The optimizer's state is the newest checkpoint's.
    assert int(averaged.optimizer.iterations.numpy()) == STEPS[-1]


def test_average_last_2_names_and_averages_the_newest_2_only(run_with_four_checkpoints, tmp_path):
    run_dir, floating = run_with_four_checkpoints
    output = tmp_path / "newest.weights.h5"
    result = seqtasks_command("average", run_dir, "--last", 2, "--output", output)
    assert result.output.splitlines()[-2:] == ["Averaged the checkpoints of steps 30, 40", f"Checkpoint: {output}"]
    averaged = Runner.open(run_dir, log=lambda line: None).load_model(str(output))
    assert len(_floating(averaged)) == len(floating[40]) > 0
    for index, variable in enumerate(_floating(averaged)):
        expected = (floating[30][index] + floating[40][index]) / 2
        np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-6, atol=1e-7)
    assert keras.ops.convert_to_numpy(averaged.optimizer.iterations) == 40


@pytest.fixture(scope="module")
def checkpointed_run(run_cache, tmp_path_factory):
    return run_cache.copy(TRANSLATION_WITHOUT_ATTENTION, tmp_path_factory.mktemp("average") / "copy")


@pytest.mark.slow
def test_average_writes_the_mean_of_the_last_kept_checkpoints(checkpointed_run):
    from seqtasks.lifecycle.runner import Runner
    from seqtasks.training.checkpoints import kept_steps

    root, run_dir, _ = checkpointed_run
    steps = kept_steps(run_dir / "checkpoints")
    assert len(steps) >= 2
    result = seqtasks_command("average", run_dir, "--last", 2)
    path = run_dir / "checkpoints" / f"average-2-to-step-{steps[-1]:08d}.weights.h5"
    assert result.output.splitlines() == [
        f"Averaged the checkpoints of steps {steps[-2]}, {steps[-1]}",
        f"Checkpoint: {path}",
    ]
    runner = Runner.open(run_dir, log=lambda line: None)
    older, newer = (runner.load_model(str(step)) for step in steps[-2:])
    averaged = runner.load_model(str(path))
    for variable, a, b in zip(averaged.weights, older.weights, newer.weights):
        np.testing.assert_allclose(variable.numpy(), (a.numpy() + b.numpy()) / 2, rtol=1e-6, atol=1e-7)
    assert any(not np.allclose(a.numpy(), b.numpy()) for a, b in zip(older.weights, newer.weights))
    # The optimizer's state is the newest checkpoint's.
    assert int(averaged.optimizer.iterations.numpy()) == int(newer.optimizer.iterations.numpy())
    evaluated = seqtasks_command("eval", run_dir, "--data", root / "pairs.tsv", "--checkpoint", path)
    assert "bleu:" in evaluated.output


@pytest.mark.slow
def test_average_refuses_what_it_cannot_average(checkpointed_run, tmp_path):
    _, run_dir, _ = checkpointed_run
    kept = len(list((run_dir / "checkpoints").glob("step-*.weights.h5")))
    for last in (1, kept + 1):
        result = seqtasks_command("average", run_dir, "--last", last, expect=2)
        assert f"Error: --last: expected 2..{kept} (the step checkpoints {run_dir / 'checkpoints'} keeps: " in result.output
        assert result.output.rstrip().endswith(f"; got {last}") and len(result.output.strip().splitlines()) == 1
    result = seqtasks_command("average", run_dir, "--last", 2, "--output", tmp_path / "mean.h5", expect=2)
    assert f"--output: expected a file name ending in .weights.h5; got '{tmp_path / 'mean.h5'}'" in result.output
    assert not (tmp_path / "mean.h5").exists()
    written = seqtasks_command("average", run_dir, "--last", 2, "--output", tmp_path / "mean.weights.h5")
    assert written.output.splitlines()[-1] == f"Checkpoint: {tmp_path / 'mean.weights.h5'}"
