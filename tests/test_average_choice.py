"""`training.average_last`: a run ends by weighing the average of its last checkpoints against its best epoch's weights.

The average is evaluated on the validation data and kept only if it scores
higher by the task's headline metric; metrics.json, model/model.keras, the
held-out splits and the export's model card all say, and hold, the kept one.
"""

import json
import re
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import REPO

from seqtasks.errors import RecipeError
from seqtasks.recipe import load_recipe
from seqtasks.recipe.task_table import TASKS

TOY = REPO / "recipes" / "toy.yaml"


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (["training.average_last=1"], "an average of one checkpoint is that checkpoint; expected 0 (none) or at least 2"),
        (["training.average_last=3"], "must not exceed training.keep_checkpoints (2); got 3"),
        (["training.average_last=2", "training.ema_momentum=0.99"],
         "training.ema_momentum already averages the weights over steps; use one or the other"),
    ],
)
def test_a_recipe_that_cannot_average_so_is_refused_naming_the_field(overrides, expected):
    with pytest.raises(RecipeError, match=re.escape(f"training.average_last: {expected}")):
        load_recipe(TOY, overrides)
    assert load_recipe(TOY, ["training.average_last=2"]).training.average_last == 2
    assert load_recipe(TOY, ["training.average_last=3", "training.keep_checkpoints=3"]).training.average_last == 3


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
