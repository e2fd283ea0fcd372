import dataclasses
import json

import pytest
from test_training import _data, _model

from seqtasks.checkpoints import read_state
from seqtasks.recipe.schema import TrainingConfig
from seqtasks.run_folders import unfinished_run
from seqtasks.training import fit


def test_checkpoints_every_n_steps_keep_the_newest_and_record_the_state(tmp_path):
    config = dataclasses.replace(TrainingConfig(), epochs=2, checkpoint_every_steps=3, keep_checkpoints=2)
    fit(_model(), _data(5), _data(2), config, tmp_path)
    folder = tmp_path / "checkpoints"
    # Steps 3, 5 (epoch end), 6, 9, 10 (epoch end); the newest two are kept.
    assert sorted(p.name for p in folder.iterdir()) == [
        "best.weights.h5",
        "state.json",
        "step-00000009.weights.h5",
        "step-00000010.weights.h5",
    ]
    state = read_state(folder)
    assert state["done"] and (state["epoch"], state["batches_done"], state["steps"]) == (2, 0, 10)
    assert state["checkpoint"] == "step-00000010.weights.h5"
    assert len(state["history"]["loss"]) == 2 and state["best"] == min(state["history"]["val_loss"])


def test_a_finished_training_state_is_not_trained_again(tmp_path):
    config = dataclasses.replace(TrainingConfig(), epochs=2)
    first = fit(_model(), _data(5), _data(2), config, tmp_path)
    from seqtasks.checkpoints import restore

    model = _model()
    state = restore(model, tmp_path / "checkpoints")
    again = fit(model, _data(5), _data(2), config, tmp_path, state)
    assert again.history == first.history and again.batches_seen == 10
    assert int(model.optimizer.iterations.numpy()) == state["optimizer_iterations"]


def test_a_resumed_run_keeps_the_early_stopping_count_and_the_time_already_trained(tmp_path):
    config = dataclasses.replace(TrainingConfig(), epochs=3, early_stopping_patience=4)
    fit(_model(), _data(5), _data(2), config, tmp_path)
    state = read_state(tmp_path / "checkpoints")
    assert state["early_stopping"]["wait"] == 0 and state["train_seconds"] > 0
    # Pretend the run was stopped after its second epoch with a stalled monitor.
    state.update(epoch=2, done=False, early_stopping={"wait": 3, "best": -1.0})
    from seqtasks.checkpoints import restore

    (tmp_path / "checkpoints" / "state.json").write_text(json.dumps(state))
    model = _model()
    history = fit(model, _data(5), _data(2), config, tmp_path, restore(model, tmp_path / "checkpoints"))
    resumed = read_state(tmp_path / "checkpoints")
    assert resumed["early_stopping"]["wait"] == 4  # one more epoch without beating -1.0
    assert len(history.history["loss"]) == 4  # three epochs of the first fit's history, then the third again
    assert history.train_seconds > state["train_seconds"]


def _run_folder(base, name, recipe="task: toy\n", state=None, metrics=False):
    folder = base / "toy" / name
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "recipe.yaml").write_text(recipe)
    if state is not None:
        (folder / "checkpoints" / "state.json").write_text(json.dumps(state))
    if metrics:
        (folder / "metrics.json").write_text("{}")
    return folder


@pytest.mark.parametrize(
    "folders, expected",
    [
        ([("20261122-100000", {}), ("20261122-110000", {})], "20261122-110000"),
        ([("20261122-110000", {}), ("20261122-110000-2", {})], "20261122-110000-2"),
        ([("20261122-100000", {}), ("20261122-110000", {"metrics": True})], "20261122-100000"),
        ([("20261122-100000", {}), ("20261122-110000", {"recipe": "task: toy\nseed: 2\n"})], "20261122-100000"),
        ([("20261122-100000", {"state": None})], None),
        ([("20261122-100000", {"state": {"worker": "worker:1"}})], None),
    ],
)
def test_the_run_resumed_is_the_newest_unfinished_one_of_the_same_recipe(tmp_path, folders, expected):
    for name, options in folders:
        _run_folder(tmp_path, name, **{"state": {"worker": ""}, **options})
    found = unfinished_run(tmp_path, "toy", "task: toy\n")
    assert (found.name if found else None) == expected
    assert unfinished_run(tmp_path / "elsewhere", "toy", "task: toy\n") is None
