"""The state a run resumes from: reading `state.json`, choosing the checkpoint; the room a checkpoint needs."""

import collections
import errno
import json
import locale
import os
import shutil
from pathlib import Path

import keras
import numpy as np
import pytest
from fit_helpers import checkpointed as _checkpointed
from fit_helpers import small_model as _model

from seqtasks.training.checkpoints import TrainingCheckpoints, read_state, restore
from seqtasks.training.position import training_position
from seqtasks.errors import SeqtasksError

_FRESH = (
    "the run cannot resume from it: give the command again with --fresh to start a new run "
    "(this folder is left as it is)"
)


def _damaged(path, problem):
    return f"{path}: damaged training state ({problem}); {_FRESH}"


@pytest.mark.parametrize(
    "text, problem",
    [
        ("[1, 2]", "not a state"),
        ('"step-00000003.weights.h5"', "not a state"),
        ('{"steps": 3}', "not a state"),
        ('{"checkpoint": 3, "steps": 3}', "not a state"),
        ("", "Expecting value: line 1 column 1"),
        ('{\n  "checkpoint": "step-00000003.weights.h5",\n  "steps"', "Expecting ':' delimiter: line 3 column 10"),
    ],
)
def test_a_state_that_is_no_training_state_is_refused_naming_what_is_wrong(tmp_path, text, problem):
    (tmp_path / "state.json").write_text(text)
    with pytest.raises(SeqtasksError) as error:
        read_state(tmp_path)
    assert str(error.value) == _damaged(tmp_path / "state.json", problem)
    assert (tmp_path / "state.json").read_text() == text  # left as it is


def test_a_state_with_bytes_that_are_not_utf8_is_refused_naming_the_byte(tmp_path):
    (tmp_path / "state.json").write_bytes(b'{"checkpoint": "\xff"}')
    with pytest.raises(SeqtasksError) as error:
        read_state(tmp_path)
    assert str(error.value) == _damaged(
        tmp_path / "state.json", "'utf-8' codec can't decode byte 0xff in position 16: invalid start byte"
    )


def test_a_state_that_cannot_be_read_is_refused_with_the_systems_reason(tmp_path, monkeypatch):
    path = tmp_path / "state.json"
    path.write_text('{"checkpoint": "step-00000003.weights.h5"}')
    read_text = Path.read_text

    def failing(self, *args, **kwargs):
        if self == path:
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(self))
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", failing)
    with pytest.raises(SeqtasksError) as error:
        read_state(tmp_path)
    assert str(error.value) == _damaged(path, "Input/output error")


def test_a_state_is_read_as_utf8_whatever_the_locales_encoding(tmp_path):
    # json.dumps writes ASCII, but a state edited by hand may hold any character.
    state = {"checkpoint": "step-00000003.weights.h5", "note": "résumé"}
    (tmp_path / "state.json").write_bytes(json.dumps(state, ensure_ascii=False).encode("utf-8"))
    previous = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # its encoding, ASCII, is what Python reads text in when told none
    try:
        found = read_state(tmp_path)
    finally:
        locale.setlocale(locale.LC_CTYPE, previous)
    assert found == state


def _one_checkpoint(folder):
    """A state naming one checkpoint file whose size and digest were not recorded."""
    (folder / "step-00000003.weights.h5").write_bytes(b"weights")
    (folder / "state.json").write_text(json.dumps({"checkpoint": "step-00000003.weights.h5", "steps": 3}))
    return folder / "step-00000003.weights.h5"


@pytest.mark.parametrize(
    "failure, reason",
    [
        (
            ValueError("Layer 'dense' expected 2 variables, but received 0\nwhile loading the weights"),
            "Layer 'dense' expected 2 variables, but received 0",
        ),
        (RuntimeError(), "RuntimeError"),
        (OSError(), "OSError"),
    ],
    ids=["two-lines", "no-message", "no-message-oserror"],
)
def test_a_checkpoint_that_does_not_load_is_reported_with_the_first_line_of_the_error_or_its_type(
    tmp_path, monkeypatch, failure, reason
):
    path = _one_checkpoint(tmp_path)
    model = _model()

    def load_weights(filepath):
        assert filepath == str(path)
        raise failure

    monkeypatch.setattr(model, "load_weights", load_weights)
    with pytest.raises(SeqtasksError) as error:
        restore(model, tmp_path, log=pytest.fail)
    assert str(error.value) == (
        f"{path}: cannot be loaded ({reason}), and no earlier checkpoint is kept; give the command again with "
        "--fresh to start a new run (this folder is left as it is)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json", "step-00000003.weights.h5"]


def test_a_model_compiled_without_an_optimizer_gets_the_checkpoints_weights(tmp_path):
    _checkpointed(tmp_path, [(3, 1.5)])
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=None, loss="mse")
    assert model.optimizer is None
    state = restore(model, tmp_path, log=pytest.fail)
    assert state["steps"] == 3 and state["earlier"] == []
    assert [weight.tolist() for weight in model.get_weights()] == [[[1.5]] * 4, [1.5]]


def test_records_that_are_not_checkpoints_are_passed_over_and_the_state_lists_its_earlier_ones_last(tmp_path):
    _checkpointed(tmp_path, [(3, 1.0), (6, 2.0)])
    written = json.loads((tmp_path / "state.json").read_text())
    first = written["earlier"][0]
    assert list(written).index("earlier") < len(written) - 1  # state.json's keys are sorted
    written["earlier"] = [{"steps": 1, "epoch": 0}, 7, first]
    (tmp_path / "state.json").write_text(json.dumps(written))
    model = _model()
    state = restore(model, tmp_path, log=pytest.fail)
    expected = {key: value for key, value in written.items() if key != "earlier"}
    assert state == {**expected, "earlier": [first]}
    assert list(state) == [*expected, "earlier"]
    assert all((weight == 2.0).all() for weight in model.get_weights())


class _Vocabulary(keras.layers.Layer):
    """A layer keeping its words in a string variable: a dtype NumPy has no item size for."""

    def build(self, input_shape):
        self.words = self.add_weight(
            shape=(250_000,), dtype="string", initializer=lambda shape, dtype: np.full(shape, "w"), trainable=False
        )

    def call(self, inputs):
        return inputs


@pytest.mark.parametrize(
    "dtype, needed",
    [
        # 999 * 250 + 250 = 250,000 variables, plus 1 MiB to spare.
        ("float32", "2.0 MB"),  # 4 bytes each
        ("float16", "1.5 MB"),  # 2 bytes each
        ("float64", "3.0 MB"),  # 8 bytes each
        ("string", "2.0 MB"),  # counted as 4 bytes each
    ],
)
def test_the_room_a_first_checkpoint_needs_is_its_variables_item_sizes(tmp_path, monkeypatch, dtype, needed):
    usage = collections.namedtuple("usage", "total used free")
    # 1,050,001 bytes: 1.1 MB, a byte past where one decimal rounds up.
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 1_050_001, 1_050_001))
    callback = TrainingCheckpoints(tmp_path, None, 2, "val_loss", "min", training_position())
    layer = _Vocabulary() if dtype == "string" else keras.layers.Dense(250, dtype=dtype)
    callback.set_model(keras.Sequential([keras.Input((999,)), layer]))
    callback.steps = 3
    with pytest.raises(SeqtasksError) as error:
        callback.save()
    assert str(error.value) == (
        f"{tmp_path / 'step-00000003.weights.h5'}: no space left on the device for the checkpoint (1.1 MB free, "
        f"about {needed} needed); the checkpoints written before it in {tmp_path} are intact"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_kept_steps_are_the_step_checkpoints_numbers_in_order(tmp_path):
    from seqtasks.training.checkpoints import kept_steps, step_file

    assert kept_steps(tmp_path / "absent") == []
    for steps in (120, 7, 1000000000):
        (tmp_path / step_file(steps)).write_bytes(b"")
    (tmp_path / "step-5.weights.h5").write_bytes(b"")  # a name written by hand: one digit
    for other in ("step-0000001x.weights.h5", "step-x0000001.weights.h5", "step-00000003.weights.h5.tmp",
                  "best.weights.h5", "step-.weights.h5"):
        (tmp_path / other).write_bytes(b"")
    assert kept_steps(tmp_path) == [5, 7, 120, 1000000000]
