"""Run folders: which weights a command uses, which run it picks or resumes, and who may train in it."""

import fcntl
import json
import os

import pytest

from seqtasks.errors import SeqtasksError
from seqtasks.training.run_folders import checkpoint_file, find_run, lock_run, newer_unfinished_runs, unfinished_run


def _run(base, name, steps=(), finished=False, state=None, recipe="task: toy\n"):
    """A fake run folder of recipe `toy`: its step checkpoints, a state naming the newest, a final model if finished."""
    folder = base / "toy" / name
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "recipe.yaml").write_text(recipe)
    for step in steps:
        (folder / "checkpoints" / f"step-{step:08d}.weights.h5").write_bytes(b"weights")
    if steps and state is None:
        state = {"checkpoint": f"step-{steps[-1]:08d}.weights.h5", "worker": ""}
    if state is not None:
        text = state if isinstance(state, str) else json.dumps(state)
        (folder / "checkpoints" / "state.json").write_text(text)
    if finished:
        (folder / "model").mkdir()
        (folder / "model" / "model.keras").write_bytes(b"model")
        (folder / "metrics.json").write_text("{}")
    return folder


def test_an_unfinished_run_has_no_default_weights_and_the_error_says_how_to_choose(tmp_path):
    run = _run(tmp_path, "20261122-100000", steps=(40, 80, 120))
    expected = (
        f"{run}: the run did not finish (it has no model/model.keras); choose its weights with "
        "--checkpoint latest, best or STEP (kept: 40, 80, 120)"
    )
    for checkpoint in (None, "final"):
        with pytest.raises(SeqtasksError) as error:
            checkpoint_file(run, checkpoint)
        assert str(error.value) == expected
    assert checkpoint_file(run, "latest") == run / "checkpoints" / "step-00000120.weights.h5"
    empty = _run(tmp_path, "20261122-110000")
    with pytest.raises(SeqtasksError, match=r"--checkpoint latest, best or STEP \(it keeps none\)$"):
        checkpoint_file(empty, None)


def test_a_finished_run_uses_its_final_model_unless_a_checkpoint_is_named(tmp_path):
    run = _run(tmp_path, "20261122-100000", steps=(40, 80), finished=True)
    assert checkpoint_file(run, None) is None and checkpoint_file(run, "final") is None
    assert checkpoint_file(run, "latest") == run / "checkpoints" / "step-00000080.weights.h5"


def test_a_step_number_names_a_kept_checkpoint(tmp_path):
    run = _run(tmp_path, "20261122-100000", steps=(40, 80))
    assert checkpoint_file(run, "40") == run / "checkpoints" / "step-00000040.weights.h5"
    assert checkpoint_file(run, "0080") == run / "checkpoints" / "step-00000080.weights.h5"
    with pytest.raises(SeqtasksError) as error:
        checkpoint_file(run, "60")
    assert str(error.value) == "--checkpoint 60: no checkpoint of step 60 is kept; kept: 40, 80"
    with pytest.raises(SeqtasksError) as error:
        checkpoint_file(run, "last")
    assert str(error.value) == (
        "--checkpoint: expected one of final, best, latest, a step number or a .weights.h5 file; got 'last'"
    )
    weights = tmp_path / "other.weights.h5"
    weights.write_bytes(b"weights")
    assert checkpoint_file(run, str(weights)) == weights


def test_a_recipe_names_its_newest_finished_run_and_the_newer_unfinished_ones_are_listed(tmp_path):
    older = _run(tmp_path, "20261122-100000", steps=(40,), finished=True)
    finished = _run(tmp_path, "20261122-110000", steps=(40,), finished=True)
    killed = _run(tmp_path, "20261122-120000", steps=(40,))
    started = _run(tmp_path, "20261122-120000-2")
    os.utime(older / "metrics.json", (1e9, 1e9))  # the run that finished last
    os.utime(finished / "metrics.json", (2e9, 2e9))
    assert find_run("toy", tmp_path, lambda name: _recipe(tmp_path)) == finished
    assert newer_unfinished_runs(finished) == [killed, started]
    assert newer_unfinished_runs(killed) == [started] and newer_unfinished_runs(started) == []


def _recipe(tmp_path):
    path = tmp_path / "toy.yaml"
    path.write_text("task: toy\n")
    return path


def test_a_damaged_state_of_the_run_to_resume_is_an_error_not_a_new_run(tmp_path):
    run = _run(tmp_path, "20261122-100000", state='{"checkpoint": "step-00000040.weights.h5", "ep')
    with pytest.raises(SeqtasksError) as error:
        unfinished_run(tmp_path, "toy", "task: toy\n")
    assert str(error.value) == (
        f"{run / 'checkpoints' / 'state.json'}: damaged training state (Unterminated string starting at: line 1 "
        "column 44); the run cannot resume from it: give the command again with --fresh to start a new run "
        "(this folder is left as it is)"
    )
    # Another recipe's run is not looked into.
    assert unfinished_run(tmp_path, "toy", "task: toy\nseed: 1\n") is None


@pytest.mark.parametrize("text, problem", [("[1, 2]", "not a state"), ("", "Expecting value: line 1 column 1")])
def test_a_state_that_is_no_training_state_is_damaged(tmp_path, text, problem):
    run = _run(tmp_path, "20261122-100000", state=text)
    with pytest.raises(SeqtasksError, match=f"state.json: damaged training state \\({problem}\\)"):
        checkpoint_file(run, "latest")


def test_a_run_folder_locked_by_another_process_is_refused_with_its_pid(tmp_path):
    run = _run(tmp_path, "20261122-100000")
    with open(run / ".lock", "w") as other:  # another open file: flock treats it as another process
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        other.write("4242\n")
        other.flush()
        with pytest.raises(SeqtasksError) as error:
            lock_run(run)
        assert str(error.value) == f"{run} is in use by another seqtasks process (pid 4242)"
    lock_run(run)  # released: this process takes it, writes its pid and holds it
    lock_run(run)  # already held: nothing to do
    assert (run / ".lock").read_text() == f"{os.getpid()}\n"
    with open(run / ".lock") as other, pytest.raises(BlockingIOError):
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)


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
        ([("20261122-100000", {"state": {"checkpoint": "step-00000001.weights.h5", "worker": "worker:1"}})], None),
    ],
)
def test_the_run_resumed_is_the_newest_unfinished_one_of_the_same_recipe(tmp_path, folders, expected):
    for name, options in folders:
        _run_folder(tmp_path, name, **{"state": {"checkpoint": "step-00000001.weights.h5", "worker": ""}, **options})
    found = unfinished_run(tmp_path, "toy", "task: toy\n")
    assert (found.name if found else None) == expected
    assert unfinished_run(tmp_path / "elsewhere", "toy", "task: toy\n") is None
