"""`seqtasks.load`'s errors; each task's test file calls it on a trained run and its export."""

import os

import pytest

import seqtasks
from seqtasks.inference.api import SeqtasksModel
from seqtasks.errors import SeqtasksError


def test_a_path_that_is_neither_a_run_folder_nor_an_export_is_named(tmp_path):
    with pytest.raises(SeqtasksError, match=f"^{tmp_path / 'nothing'}: no such run folder or SavedModel$"):
        seqtasks.load(tmp_path / "nothing")
    with pytest.raises(SeqtasksError, match=f"^{tmp_path}: not a SavedModel folder \\(no saved_model.pb\\)$"):
        seqtasks.load(tmp_path)
    with pytest.raises(SeqtasksError, match="checkpoint='best' needs a run folder; an export holds one model$"):
        seqtasks.load(tmp_path, checkpoint="best")


class _Predictor:
    """Answers like a translation export: each text upper-cased, its length as the score."""

    def __init__(self):
        from seqtasks.tasks.table import TASKS

        self.spec = TASKS["translation"]
        self.path = "export/1"
        self.input_name = "text"
        self.batches = []

    def outputs(self, items):
        import numpy as np

        self.batches.append(list(items))
        return {
            "translation": np.array([item.upper().encode() for item in items], object),
            "score": np.array([float(len(item)) for item in items], np.float32),
        }


def test_inputs_go_in_batches_and_one_input_gives_one_result():
    predictor = _Predictor()
    model = SeqtasksModel(predictor)
    results = model.translate(["a", "bb", "ccc", "dddd", "e"], batch_size=2)
    assert [(r.text, r.score) for r in results] == [("A", 1.0), ("BB", 2.0), ("CCC", 3.0), ("DDDD", 4.0), ("E", 1.0)]
    assert predictor.batches == [["a", "bb"], ["ccc", "dddd"], ["e"]]
    assert model.translate("hola").text == "HOLA"
    assert model.translate([]) == []
    assert model.predict(["xy"]) == [{"translation": "XY", "score": 2.0}]
    for bad in (None, 3, ["ok", 4], b"bytes"):
        with pytest.raises(SeqtasksError, match="^expected a string or a list of strings"):
            model.translate(bad)
    with pytest.raises(SeqtasksError, match="^batch_size: expected a positive integer; got 0$"):
        model.translate(["a"], batch_size=0)
    with pytest.raises(SeqtasksError, match=r"^export/1: a translation model has no classify\(\); use predict\(\)$"):
        model.classify("a")


def test_loading_hides_tensorflows_start_up_lines_unless_verbose(tmp_path, monkeypatch):
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    with pytest.raises(SeqtasksError):
        seqtasks.load(tmp_path / "nothing", verbose=True)
    assert "TF_CPP_MIN_LOG_LEVEL" not in os.environ
    with pytest.raises(SeqtasksError):
        seqtasks.load(tmp_path / "nothing")
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "3"
