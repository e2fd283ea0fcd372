"""Starting a run: the recipe's inputs are checked before a run folder is made, and a run folder has one trainer."""

import dataclasses
import fcntl
import json

import numpy as np
import pytest

from seqtasks.errors import SeqtasksError
from seqtasks.lifecycle.runner import Runner, check_inputs
from seqtasks.recipe import dump_recipe, load_recipe
from seqtasks.tasks import make_task
from tests.conftest import seqtasks_command, serve_in_tensorflow_only
from tests.support.trained_runs import TRANSLATION


def _recipe(tmp_path, text):
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    return load_recipe(path)


TRANSLATION_RECIPE = "task: translation\ndata: {path: pairs.tsv}\n"


def test_a_missing_data_file_is_reported_before_any_run_folder_is_made(tmp_path):
    with pytest.raises(SeqtasksError) as error:
        Runner.start(_recipe(tmp_path, TRANSLATION_RECIPE), tmp_path / "runs", log=pytest.fail)
    assert str(error.value) == f"{tmp_path / 'pairs.tsv'}: no such data file"
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "recipe, make, expected",
    [
        (TRANSLATION_RECIPE, {"pairs.tsv": "folder"}, "{root}/pairs.tsv: is a folder, expected a data file"),
        (TRANSLATION_RECIPE, {"pairs.tsv": "fifo"}, "{root}/pairs.tsv: not a regular file"),
        (
            "task: sentiment\ndata: {format: lines, path: rt, labels: [neg, pos]}\n",
            {"rt.neg": "file"},
            "{root}/rt.pos: no such data file",
        ),
        ("task: sentiment\ndata: {format: folders, path: texts}\n", {"texts": "file"},
         "{root}/texts: not a folder, expected a folder of data files"),
        (
            "task: captioning\ndata: {captions: c.txt, train_split: t.txt, validation_split: v.txt, images: img}\n",
            {"c.txt": "file", "t.txt": "file", "v.txt": "file"},
            "{root}/img: no such data folder",
        ),
        (
            "task: captioning\ndata: {captions: c.txt, train_split: t.txt, validation_split: v.txt, images: img}\n"
            "model: {backbone: {type: file, path: backbone.keras}}\n",
            {"c.txt": "file", "t.txt": "file", "v.txt": "file", "img": "folder"},
            "{root}/backbone.keras: no such data file",
        ),
    ],
    ids=["folder", "fifo", "lines-label", "folders-format", "images", "backbone"],
)
def test_each_input_the_task_reads_must_be_there_as_a_file_or_folder(tmp_path, recipe, make, expected):
    import os

    for name, kind in make.items():
        path = tmp_path / name
        {"file": lambda: path.write_text("x\n"), "folder": path.mkdir, "fifo": lambda: os.mkfifo(path)}[kind]()
    with pytest.raises(SeqtasksError) as error:
        check_inputs(make_task(_recipe(tmp_path, recipe)).input_paths())
    assert str(error.value) == expected.format(root=tmp_path)


def test_a_run_another_process_is_training_is_not_resumed_twice(tmp_path):
    recipe = _recipe(tmp_path, "task: toy\nname: toy\n")
    run = tmp_path / "runs" / "toy" / "20261122-100000"
    (run / "checkpoints").mkdir(parents=True)
    # As `Runner.start` saves it: with the backend that ran.
    (run / "recipe.yaml").write_text(dump_recipe(dataclasses.replace(recipe, backend="tensorflow")))
    (run / "checkpoints" / "state.json").write_text(json.dumps({"checkpoint": "step-00000004.weights.h5"}))
    with open(run / ".lock", "w") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        other.write("4242\n")
        other.flush()
        with pytest.raises(SeqtasksError) as error:
            Runner.start(recipe, tmp_path / "runs", log=lambda line: None)
    assert str(error.value) == f"{run} is in use by another seqtasks process (pid 4242)"
    assert [p.name for p in (tmp_path / "runs" / "toy").iterdir()] == ["20261122-100000"]


def _fake_run(base, name, finished):
    run = base / "toy" / name
    (run / "checkpoints").mkdir(parents=True)
    (run / "recipe.yaml").write_text("task: toy\nname: toy\n")
    for step in (50, 100):
        (run / "checkpoints" / f"step-{step:08d}.weights.h5").write_bytes(b"weights")
    (run / "checkpoints" / "state.json").write_text(json.dumps({"checkpoint": "step-00000100.weights.h5"}))
    if finished:
        (run / "model").mkdir()
        (run / "model" / "model.keras").write_bytes(b"model")
        (run / "metrics.json").write_text("{}")
    return run


@pytest.mark.parametrize("command", ["export", "eval"])
def test_a_run_that_did_not_finish_is_used_only_when_its_checkpoint_is_named(tmp_path, command):
    from tests.conftest import seqtasks_command

    run = _fake_run(tmp_path, "20261122-100000", finished=False)
    data = tmp_path / "digits.txt"
    data.write_text("1 2\n")
    result = seqtasks_command(command, run, *(["--data", data] if command == "eval" else []), expect=2)
    assert result.stderr.splitlines() == [
        f"Error: {run}: the run did not finish (it has no model/model.keras); choose its weights with "
        "--checkpoint latest, best or STEP (kept: 50, 100)"
    ]


def test_eval_of_a_recipe_names_the_finished_run_it_picked_and_the_newer_ones_it_skipped(tmp_path, monkeypatch):
    from tests.conftest import seqtasks_command

    finished = _fake_run(tmp_path, "20261122-100000", finished=True)
    killed = _fake_run(tmp_path, "20261122-110000", finished=False)
    data = tmp_path / "digits.txt"
    data.write_text("1 2\n")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "toy.yaml").write_text("task: toy\n")
    result = seqtasks_command("eval", "toy.yaml", "--data", data, "--output-dir", tmp_path, expect=2)
    assert result.stdout.splitlines()[:2] == [
        f"Run folder: {finished} (the newest finished run of toy.yaml)",
        f"  skipped {killed}: it has not finished (give its folder and --checkpoint to use it)",
    ]
    assert result.stderr.splitlines() == ["Error: task 'toy' makes its own data; it has no data files to evaluate on"]


@pytest.mark.parametrize(
    "recipe, files, expected",
    [
        (
            "task: translation\ndata: {path: pairs.tsv, validation_size: 2}\n",
            {"pairs.tsv": "Go.\tVe.\nHi.\tHola.\nRun!\n"},
            "{root}/pairs.tsv:3: expected at least 2 tab-separated columns (source column 1, target column 0); got 1",
        ),
        (
            "task: sentiment\ndata: {path: texts.csv, validation_size: 1}\n",
            {"texts.csv": "text,label\ngood film,pos\nbad film\n"},
            "{root}/texts.csv:3: expected 2 columns as in the header; got 1",
        ),
        (
            "task: ner\ndata: {path: train.conll, validation_size: 1}\n",
            {"train.conll": "EU B-ORG\nrejects O\n\nGerman\n"},
            "{root}/train.conll:4: expected at least 2 columns (token column 0, tag column -1); got 1",
        ),
        (
            "task: captioning\ndata: {captions: c.txt, train_split: t.txt, validation_split: v.txt, images: img}\n",
            {"c.txt": "a.jpg#0\ta dog .\nb.jpg a cat\n", "t.txt": "a.jpg\n", "v.txt": "b.jpg\n", "img/": None},
            "{root}/c.txt:2: expected '<image>#<n><TAB><caption>'",
        ),
    ],
    ids=["translation", "sentiment", "ner", "captioning"],
)
def test_a_malformed_data_file_is_reported_before_any_run_folder_is_made(tmp_path, recipe, files, expected):
    for name, text in files.items():
        if name.endswith("/"):
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_text(text)
    with pytest.raises(SeqtasksError) as error:
        Runner.start(_recipe(tmp_path, recipe), tmp_path / "runs", log=pytest.fail)
    assert str(error.value) == expected.format(root=tmp_path)
    assert not (tmp_path / "runs").exists()


@pytest.fixture(scope="module")
def translation_run(run_cache):
    return run_cache.get(TRANSLATION)


@pytest.mark.slow
def test_an_ensemble_of_a_run_with_itself_evaluates_and_exports_as_the_run(run_cache, tmp_path):
    root, run_dir, _ = run_cache.copy(TRANSLATION, tmp_path / "copy")  # eval writes into the run folder
    pairs = root / "pairs.tsv"
    single = seqtasks_command("eval", run_dir, "--data", pairs, "--set", f"export.directory={tmp_path}")
    ensemble = seqtasks_command("eval", "--ensemble", run_dir, run_dir, "--data", pairs)
    assert [line for line in single.output.splitlines() if ": " in line and "bleu" in line] == [
        line for line in ensemble.output.splitlines() if ": " in line and "bleu" in line
    ]
    assert (run_dir / "eval" / "pairs" / "translations.tsv").is_file()
    exported = seqtasks_command("export", "--ensemble", run_dir, run_dir, "--set", f"export.directory={tmp_path}")
    folder = tmp_path / "tiny-ensemble" / "1"
    assert exported.output.splitlines()[-1] == f"SavedModel: {folder}"
    card = (folder / "assets.extra" / "MODEL_CARD.md").read_text()
    assert f"An ensemble of 2 runs: {run_dir.resolve()}, {run_dir.resolve()}." in card
    assert not (folder / "assets.extra" / "metrics.json").exists()  # the first run's are not the ensemble's
    sources = [line.split("\t")[0] for line in (run_dir / "translations.tsv").read_text().splitlines()[:6]]
    ours = serve_in_tensorflow_only(folder, {"validation": sources})["validation"]
    theirs = serve_in_tensorflow_only(root / "saved_models" / "tiny" / "1", {"validation": sources})["validation"]
    assert ours["translation"]["value"] == theirs["translation"]["value"]
    np.testing.assert_allclose(ours["score"]["value"], theirs["score"]["value"], atol=1e-4)


@pytest.mark.slow
def test_runs_whose_vocabularies_differ_are_a_one_line_error(translation_run, run_cache, tmp_path):
    _, run_dir, _ = translation_run
    _, other, _ = run_cache.copy(TRANSLATION, tmp_path / "other")
    lines = (other / "target_vocab.txt").read_text().splitlines()
    lines[7], lines[8] = lines[8], lines[7]
    (other / "target_vocab.txt").write_text("\n".join(lines) + "\n")
    result = seqtasks_command("export", "--ensemble", run_dir, other, "--set", f"export.directory={tmp_path}", expect=2)
    assert result.output.splitlines()[-1] == (
        f"Error: {other}: its target vocabulary differs from {run_dir}'s at entry 7 ({lines[7]!r}, not {lines[8]!r}); "
        "the runs of an ensemble must share their vocabularies"
    )
    result = seqtasks_command("export", run_dir, other, expect=2)
    assert result.output.splitlines()[-1] == "Error: expected one run (give --ensemble to decode with several together); got 2"
    result = seqtasks_command("eval", "--ensemble", run_dir, "--data", "x", expect=2)
    assert result.output.splitlines()[-1] == "Error: --ensemble: expected at least two runs; got 1"
