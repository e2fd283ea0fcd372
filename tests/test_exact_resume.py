"""A run stopped at a step checkpoint mid-epoch and resumed ends exactly where an uninterrupted run ends.

Dropout, shuffling and the running training metrics all decide the result, so
the small recipes here have dropout, several epochs and a checkpoint every few
steps; the stop falls inside the second epoch.
"""

import pytest
from conftest import REPO, write_sample_pairs
from test_ner_task import RECIPE as NER_RECIPE
from test_ner_task import _sentences
from test_translation_task import RECIPE as TRANSLATION_RECIPE

from seqtasks.training.checkpoints import TrainingCheckpoints
from seqtasks.recipe import load_recipe
from seqtasks.lifecycle.runner import Runner

pytestmark = pytest.mark.slow  # three small trainings for each task

COMMON = [
    "training.epochs=2",
    "training.checkpoint_every_steps=3",
    "export.enabled=false",
    "training.early_stopping_patience=null",
]


def _translation(root):
    write_sample_pairs(root / "pairs.tsv", 300)
    (root / "recipe.yaml").write_text(TRANSLATION_RECIPE)
    return ["model.decoding.beam_width=1"]


def _translation_without_attention(root):
    return _translation(root) + [
        "model.attention.type=none", "model.decoder.summary_input=true", "model.decoder.placement=after",
        "model.decoder.deep_output=null",
    ]


def _ner(root):
    data = REPO / "recipes" / "data"
    (root / "train.conll").write_text(_sentences(data / "ner-sample.train.conll", 200), encoding="utf-8")
    (root / "dev.conll").write_text(_sentences(data / "ner-sample.dev.conll", 30), encoding="utf-8")
    (root / "recipe.yaml").write_text(NER_RECIPE)
    return ["data.heldout_documents=0"]  # these sentences come without -DOCSTART- lines


class Stopped(Exception):
    """The stand-in for a kill."""


@pytest.mark.parametrize(
    "task, write",
    [("translation", _translation), ("translation-none", _translation_without_attention), ("ner", _ner)],
)
def test_a_run_stopped_mid_epoch_and_resumed_ends_as_the_uninterrupted_run(task, write, tmp_path, monkeypatch):
    overrides = write(tmp_path)
    recipe = load_recipe(tmp_path / "recipe.yaml", COMMON + overrides)
    quiet = lambda line: None  # noqa: E731
    uninterrupted = Runner.start(recipe, tmp_path / "uninterrupted", log=quiet).train()

    save = TrainingCheckpoints.save

    def save_then_stop(self, done=False):
        save(self, done)
        if self.epoch == 1 and self.batches_done >= 2:  # a step checkpoint inside the second epoch
            raise Stopped

    with monkeypatch.context() as patch:
        patch.setattr(TrainingCheckpoints, "save", save_then_stop)
        with pytest.raises(Stopped):
            Runner.start(recipe, tmp_path / "stopped", log=quiet).train()
    runs = list((tmp_path / "stopped" / recipe.name).iterdir())
    resumed = Runner.start(recipe, tmp_path / "stopped", log=quiet).train()
    assert list((tmp_path / "stopped" / recipe.name).iterdir()) == runs  # resumed in the same folder
    assert resumed["history"] == uninterrupted["history"]
    assert resumed["validation"] == uninterrupted["validation"]
    assert resumed["epochs_run"] == 2


_STOP_AND_RESUME = """
import json
from pathlib import Path
from seqtasks.training.checkpoints import TrainingCheckpoints
from seqtasks.recipe import load_recipe
from seqtasks.lifecycle.runner import Runner

root, overrides = Path(ROOT), OVERRIDES
recipe = load_recipe(root / "recipe.yaml", overrides)
quiet = lambda line: None
uninterrupted = Runner.start(recipe, root / "uninterrupted", log=quiet).train()
save = TrainingCheckpoints.save


class Stopped(Exception):
    pass


def save_then_stop(self, done=False):
    save(self, done)
    if self.epoch == 1 and self.batches_done >= 2:
        raise Stopped


TrainingCheckpoints.save = save_then_stop
try:
    Runner.start(recipe, root / "stopped", log=quiet).train()
except Stopped:
    pass
TrainingCheckpoints.save = save
resumed = Runner.start(recipe, root / "stopped", log=quiet).train()
print(json.dumps({"uninterrupted": uninterrupted["history"], "resumed": resumed["history"],
                  "epochs": resumed["epochs_run"]}))
"""


def stop_and_resume_script(root, overrides, setup=""):
    """A script for a fresh process: `setup`, then the recipe `root/recipe.yaml` with `overrides` trained
    whole, then stopped at a step checkpoint inside epoch 2 and resumed; it prints both histories as JSON."""
    return setup + _STOP_AND_RESUME.replace("ROOT", repr(str(root))).replace("OVERRIDES", repr(list(overrides)))


_TWO_LOGICAL_CPUS = """
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
"""


def test_a_mirrored_run_over_two_replicas_resumes_mid_epoch_as_the_uninterrupted_run(fresh_python, tmp_path):
    import json

    overrides = COMMON + _translation(tmp_path) + [
        "distribute.strategy=mirrored",
        "distribute.devices=[/cpu:0, /cpu:1]",
    ]
    script = stop_and_resume_script(tmp_path, overrides, setup=_TWO_LOGICAL_CPUS)
    result = fresh_python(script, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["epochs"] == 2
    uninterrupted, resumed = found["uninterrupted"], found["resumed"]
    assert uninterrupted.keys() == resumed.keys() and len(uninterrupted["loss"]) == 2
    # Each replica keeps its own running metric totals; the sums over replicas may add up in
    # another order from run to run (tests/test_replica_equivalence.py), hence a tolerance far
    # below what losing the totals of the epoch's first steps changes.
    for name, values in uninterrupted.items():
        assert resumed[name] == pytest.approx(values, rel=1e-4), name
