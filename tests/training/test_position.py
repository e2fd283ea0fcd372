"""A run stopped at a step checkpoint mid-epoch and resumed ends exactly where an uninterrupted run ends.

Dropout, shuffling and the running training metrics all decide the result, so
the small recipes here have dropout, several epochs and a checkpoint every few
steps; the stop falls inside the second epoch.
"""

import json
import shutil

import pytest
import tensorflow as tf

from seqtasks.lifecycle.runner import Runner
from seqtasks.recipe import load_recipe
from seqtasks.training.checkpoints import TrainingCheckpoints
from seqtasks.training.position import TrainingPosition
from tests.conftest import REPO
from tests.support.trained_runs import (
    EXACT_RESUME,
    NER_RECIPE,
    TRANSLATION_WITHOUT_ATTENTION,
    conll_sentences,
    write_translation_for_resume,
)


COMMON = list(EXACT_RESUME)


_translation = write_translation_for_resume


def _ner(root):
    data = REPO / "recipes" / "data"
    (root / "train.conll").write_text(conll_sentences(data / "ner-sample.train.conll", 200), encoding="utf-8")
    (root / "dev.conll").write_text(conll_sentences(data / "ner-sample.dev.conll", 30), encoding="utf-8")
    (root / "recipe.yaml").write_text(NER_RECIPE)
    return ["data.heldout_documents=0"]  # these sentences come without -DOCSTART- lines


class Stopped(Exception):
    """The stand-in for a kill."""


def _stop_and_resume(recipe, root, monkeypatch):
    """Trains `recipe` in `root/stopped`, stopped at a step checkpoint inside the second epoch, then resumed there."""
    quiet = lambda line: None  # noqa: E731
    save = TrainingCheckpoints.save

    def save_then_stop(self, done=False):
        save(self, done)
        if self.epoch == 1 and self.batches_done >= 2:  # a step checkpoint inside the second epoch
            raise Stopped

    with monkeypatch.context() as patch:
        patch.setattr(TrainingCheckpoints, "save", save_then_stop)
        with pytest.raises(Stopped):
            Runner.start(recipe, root / "stopped", log=quiet).train()
    runs = list((root / "stopped" / recipe.name).iterdir())
    resumed = Runner.start(recipe, root / "stopped", log=quiet).train()
    assert list((root / "stopped" / recipe.name).iterdir()) == runs  # resumed in the same folder
    return resumed


@pytest.mark.slow
@pytest.mark.parametrize("task, write", [("translation", _translation), ("ner", _ner)])
def test_a_run_stopped_mid_epoch_and_resumed_ends_as_the_uninterrupted_run(task, write, tmp_path, monkeypatch):
    overrides = write(tmp_path)
    recipe = load_recipe(tmp_path / "recipe.yaml", COMMON + overrides)
    uninterrupted = Runner.start(recipe, tmp_path / "uninterrupted", log=lambda line: None).train()
    resumed = _stop_and_resume(recipe, tmp_path, monkeypatch)
    assert resumed["history"] == uninterrupted["history"]
    assert resumed["validation"] == uninterrupted["validation"]
    assert resumed["epochs_run"] == 2


@pytest.mark.slow
def test_a_run_without_attention_stopped_mid_epoch_and_resumed_ends_as_the_uninterrupted_run(run_cache, tmp_path, monkeypatch):
    # The uninterrupted run is the session's (tests/tasks/translation/test_task.py decodes and serves it); its recipe
    # and data here, exporting nothing, train the stopped and resumed run.
    trained = run_cache.get(TRANSLATION_WITHOUT_ATTENTION)
    uninterrupted = json.loads((trained.run_dir / "metrics.json").read_text())
    for name, _ in TRANSLATION_WITHOUT_ATTENTION.files:
        shutil.copy(trained.root / name, tmp_path / name)
    shutil.copy(trained.root / "tiny.yaml", tmp_path / "tiny.yaml")
    recipe = load_recipe(tmp_path / "tiny.yaml", [*TRANSLATION_WITHOUT_ATTENTION.overrides, "export.enabled=false"])
    resumed = _stop_and_resume(recipe, tmp_path, monkeypatch)
    assert resumed["history"] == uninterrupted["history"]
    assert resumed["validation"] == uninterrupted["validation"]
    assert resumed["epochs_run"] == 2


def test_a_new_position_is_the_start_of_the_first_epoch_in_untrained_named_variables():
    position = TrainingPosition()
    assert (int(position.epoch.numpy()), int(position.batches_done.numpy())) == (0, 0)
    for variable, name in [(position.epoch, "epoch"), (position.batches_done, "batches_done")]:
        assert variable.name.split(":")[0] == name
        assert not variable.trainable and variable.dtype == tf.int64
    position.start_epoch(3, 2)
    assert (int(position.epoch.numpy()), int(position.batches_done.numpy())) == (3, 2)
