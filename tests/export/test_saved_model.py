import json
import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from seqtasks.errors import SeqtasksError
from seqtasks.export.saved_model import (
    describe_signature,
    export_saved_model,
    module_signatures,
    saved_model_folder,
    unchanged_export,
    weights_sha256,
)


class Shout(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(self, texts):
        return {"text": tf.strings.upper(texts)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def whisper(self, texts):
        return {"text": tf.strings.lower(texts)}


def _serve(folder, texts):
    loaded = tf.saved_model.load(str(folder))
    outputs = loaded.signatures["serving_default"](tf.constant(texts))
    return [t.decode() for t in outputs["text"].numpy()]


@pytest.mark.slow
@pytest.mark.core
def test_exports_are_numbered_versions_each_serving_its_signature(tmp_path):
    module = Shout()
    first = export_saved_model(module, module.serve, tmp_path, "shout")
    second = export_saved_model(module, module.serve, tmp_path, "shout")
    assert (first.name, second.name) == ("1", "2")
    assert first.parent == tmp_path / "shout"
    assert _serve(second, ["ab", "c d"]) == ["AB", "C D"]
    assert sorted(p.name for p in (tmp_path / "shout").iterdir()) == ["1", "2"]


@pytest.mark.slow
@pytest.mark.core
def test_the_signature_given_is_the_one_served_not_whichever_the_module_has_first(tmp_path):
    module = Shout()
    folder = export_saved_model(module, module.whisper, tmp_path, "whisper")
    assert _serve(folder, ["AbC"]) == ["abc"]


def test_a_tensorflow_file_error_becomes_an_error_naming_the_folder_and_leaves_nothing(tmp_path, monkeypatch):
    def full_disk(*args, **kwargs):
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device\nmore detail")

    monkeypatch.setattr(tf.saved_model, "save", full_disk)
    module = Shout()
    with pytest.raises(SeqtasksError) as error:
        export_saved_model(module, module.serve, tmp_path, "shout")
    assert str(error.value) == (
        f"{tmp_path / 'shout'}: writing the new version failed (No space left on device); no version was "
        "added and earlier versions are untouched"
    )
    assert list((tmp_path / "shout").iterdir()) == []


@pytest.mark.slow
@pytest.mark.core
def test_a_worker_that_is_not_the_chief_saves_to_a_folder_it_removes_and_publishes_nothing(tmp_path, monkeypatch):
    cluster = {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(cluster))
    saved = []
    real_save = tf.saved_model.save

    def save(module, folder, signatures):
        saved.append(folder)
        real_save(module, folder, signatures=signatures)
        assert os.path.isfile(os.path.join(folder, "saved_model.pb"))

    monkeypatch.setattr(tf.saved_model, "save", save)
    module = Shout()
    assert export_saved_model(module, module.serve, tmp_path, "shout") is None
    assert len(saved) == 1 and not os.path.exists(saved[0])
    # A folder left in the temporary directory by a crash says whose it is.
    assert os.path.basename(saved[0]).startswith("seqtasks-worker-export-")
    assert not (tmp_path / "shout").exists()


def test_a_worker_whose_save_fails_reports_that_failure_not_the_clean_up(tmp_path, monkeypatch):
    import shutil

    cluster = {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(cluster))

    def save(module, folder, signatures):
        shutil.rmtree(folder)
        raise OSError("No space left on device")

    monkeypatch.setattr(tf.saved_model, "save", save)
    module = Shout()
    with pytest.raises(OSError, match="^No space left on device$"):
        export_saved_model(module, module.serve, tmp_path, "shout")


# --- what a version carries, and the same weights are not exported twice ---


def _stub_save(monkeypatch, saves):
    """Replaces the SavedModel writer by one that writes a marker: these tests are about the folders."""

    def save(module, folder, signatures):
        saves.append(folder)
        Path(folder, "saved_model.pb").write_text("graph")

    monkeypatch.setattr(tf.saved_model, "save", save)


def _extras(weights, recipe="task: toy\n"):
    return {
        "weights.sha256": weights_sha256(weights) + "\n",
        "recipe.yaml": recipe,
        "MODEL_CARD.md": lambda version: f"load {version}\n",
    }


def test_a_version_carries_its_files_and_the_same_weights_and_recipe_are_not_exported_again(tmp_path, monkeypatch):
    saves, logged = [], []
    _stub_save(monkeypatch, saves)
    module = Shout()
    weights = [np.arange(6, dtype="float32").reshape(2, 3)]

    def export(extras, force=False):
        return export_saved_model(module, module.serve, tmp_path, "shout", extras, force, logged.append)

    first = export(_extras(weights))
    extra = first / "assets.extra"
    assert sorted(p.name for p in extra.iterdir()) == ["MODEL_CARD.md", "recipe.yaml", "weights.sha256"]
    assert (extra / "MODEL_CARD.md").read_text() == f"load {tmp_path / 'shout' / '1'}\n"  # the final folder
    assert (extra / "recipe.yaml").read_text() == "task: toy\n"

    assert export(_extras([w.copy() for w in weights])) == first
    assert logged == [
        f"{first} has these weights and this recipe already: nothing exported (--force exports a new version anyway)"
    ]
    assert len(saves) == 1  # not even written to a staging folder
    assert export(_extras(weights), force=True) == tmp_path / "shout" / "2"
    assert export(_extras(weights, "task: toy\nseed: 2\n")) == tmp_path / "shout" / "3"
    assert export(_extras([weights[0] + 1], "task: toy\nseed: 2\n")) == tmp_path / "shout" / "4"
    assert export({}) == tmp_path / "shout" / "5"  # no weights hash: nothing to compare
    assert len(logged) == 1 and len(saves) == 5
    assert sorted(p.name for p in (tmp_path / "shout").iterdir()) == ["1", "2", "3", "4", "5"]


def test_the_identity_is_checked_again_under_the_lock_for_an_export_that_finished_meanwhile(tmp_path, monkeypatch):
    """Two exports of the same weights at once: the second to finish adds nothing."""
    logged, module = [], Shout()
    weights = [np.ones(3, "float32")]
    real_save = []

    def save(module_, folder, signatures):
        if not real_save:  # the first export's writing: the other one finishes meanwhile
            real_save.append(folder)
            export_saved_model(module, module.serve, tmp_path, "shout", _extras(weights), log=logged.append)
        Path(folder, "saved_model.pb").write_text("graph")

    monkeypatch.setattr(tf.saved_model, "save", save)
    assert export_saved_model(module, module.serve, tmp_path, "shout", _extras(weights), log=logged.append) == (
        tmp_path / "shout" / "1"
    )
    assert len(logged) == 1 and logged[0].startswith(f"{tmp_path / 'shout' / '1'} has these weights")
    assert sorted(p.name for p in (tmp_path / "shout").iterdir()) == ["1"]


def test_the_chief_of_a_multi_worker_run_always_saves_as_its_workers_do(tmp_path, monkeypatch):
    """Every worker takes part in saving distributed variables: the chief alone may not skip it."""
    cluster = {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 0}}
    saves, logged, module = [], [], Shout()
    _stub_save(monkeypatch, saves)
    weights = [np.ones(3, "float32")]
    assert export_saved_model(module, module.serve, tmp_path, "shout", _extras(weights)) == tmp_path / "shout" / "1"
    monkeypatch.setenv("TF_CONFIG", json.dumps(cluster))
    second = export_saved_model(module, module.serve, tmp_path, "shout", _extras(weights), log=logged.append)
    assert second == tmp_path / "shout" / "2" and len(saves) == 2 and logged == []


def test_a_cluster_of_one_worker_skips_an_unchanged_export_and_one_of_two_never_does(tmp_path, monkeypatch):
    saves, logged, module = [], [], Shout()
    _stub_save(monkeypatch, saves)
    weights = [np.ones(3, "float32")]
    first = export_saved_model(module, module.serve, tmp_path, "shout", _extras(weights))
    alone = {"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(alone))
    assert unchanged_export(tmp_path, "shout", _extras(weights)) == first
    assert export_saved_model(module, module.serve, tmp_path, "shout", _extras(weights), log=logged.append) == first
    assert len(saves) == 1 and len(logged) == 1
    pair = {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(pair))
    assert unchanged_export(tmp_path, "shout", _extras(weights), logged.append) is None
    assert len(logged) == 1


def test_a_version_without_the_identity_files_an_older_export_is_not_the_same(tmp_path, monkeypatch):
    saves, logged, module = [], [], Shout()
    _stub_save(monkeypatch, saves)
    weights = [np.ones(3, "float32")]
    first = export_saved_model(module, module.serve, tmp_path, "shout")
    assert not (first / "assets.extra").exists()
    assert unchanged_export(tmp_path, "shout", _extras(weights), logged.append) is None
    second = export_saved_model(module, module.serve, tmp_path, "shout", _extras(weights), log=logged.append)
    assert second == tmp_path / "shout" / "2" and len(saves) == 2 and logged == []


@pytest.fixture
def ascii_locale():
    """A locale whose default text encoding is ASCII, as a C or POSIX locale without UTF-8 mode has."""
    import locale
    import sys

    if sys.flags.utf8_mode:
        pytest.skip("Python's UTF-8 mode makes UTF-8 every file's default encoding")
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


def test_the_audit_files_are_utf8_whatever_the_locale(tmp_path, monkeypatch, ascii_locale):
    saves, logged, module = [], [], Shout()
    _stub_save(monkeypatch, saves)
    weights = [np.ones(3, "float32")]
    recipe = "task: toy\ndescription: Übersetzung → English\n"
    first = export_saved_model(module, module.serve, tmp_path, "shout", _extras(weights, recipe))
    assert (first / "assets.extra" / "recipe.yaml").read_bytes() == recipe.encode("utf-8")
    assert export_saved_model(module, module.serve, tmp_path, "shout", _extras(weights, recipe), log=logged.append) == (
        first
    )
    assert len(saves) == 1 and len(logged) == 1


def test_the_weights_hash_changes_with_any_value_dtype_shape_or_order():
    a, b = np.arange(4, dtype="float32"), np.zeros((2, 2), "float32")
    base = weights_sha256([a, b])
    assert weights_sha256([a.copy(), b.copy()]) == base
    assert weights_sha256([tf.Variable(a), tf.Variable(b)]) == base
    changed = [
        [a + np.float32(1e-7), b],
        [a.astype("float64"), b],
        [a.reshape(2, 2), b],
        [b, a],
        [a],
    ]
    assert len({weights_sha256(weights) for weights in changed} | {base}) == len(changed) + 1


class Tokenize(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve(self, text):
        import tensorflow_text

        return {"text": tensorflow_text.normalize_utf8(text, "NFKC"), "length": tf.strings.length(text)}


def test_the_signature_description_names_inputs_outputs_and_the_operations_core_tensorflow_lacks():
    assert describe_signature(Tokenize().serve) == {
        "inputs": {"text": {"dtype": "string", "shape": [None]}},
        "outputs": {"length": {"dtype": "int32", "shape": [None]}, "text": {"dtype": "string", "shape": [None]}},
        "custom_ops": ["NormalizeUTF8"],
    }
    assert describe_signature(Shout().serve)["custom_ops"] == []


# --- a base path names its newest version, as TensorFlow Serving reads it ---


def test_a_base_path_names_its_highest_version_that_holds_a_saved_model(tmp_path):
    for name in ["1", "2", "9", "10", "11", ".12", "13.tmp"]:
        (tmp_path / name).mkdir()
        if name != "11":  # being written, or broken: no saved_model.pb
            (tmp_path / name / "saved_model.pb").write_text("")
    (tmp_path / "99").write_text("a file")
    assert saved_model_folder(tmp_path) == tmp_path / "10"  # 10 > 9: numbers, not names
    assert saved_model_folder(tmp_path / "2") == tmp_path / "2"
    assert saved_model_folder(str(tmp_path / "9")) == tmp_path / "9"
    for folder in [tmp_path / "11", tmp_path / "missing", tmp_path / "13.tmp" / "x"]:
        with pytest.raises(SeqtasksError) as raised:
            saved_model_folder(folder)
        assert str(raised.value) == f"{folder}: not a SavedModel folder (no saved_model.pb)"


@pytest.mark.slow
@pytest.mark.core
def test_a_dict_of_signatures_is_exported_under_their_names(tmp_path):
    module = Shout()
    folder = export_saved_model(module, {"serving_default": module.serve, "quiet": module.whisper}, tmp_path, "both")
    loaded = tf.saved_model.load(str(folder))
    assert sorted(loaded.signatures) == ["quiet", "serving_default"]


@pytest.mark.slow
@pytest.mark.core
def test_the_servability_check_refuses_an_export_that_calls_python(tmp_path):
    from tests.conftest import serve_in_tensorflow_only

    class Python(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            return {"out": tf.py_function(lambda values: values, [text], tf.string)}

    module = Python()
    folder = export_saved_model(module, module.serve, tmp_path, "python")
    with pytest.raises(AssertionError, match=r"ops TensorFlow Serving lacks: \['EagerPyFunc'\]"):
        serve_in_tensorflow_only(folder, {"rows": ["a"]})


def test_a_module_s_signatures_are_its_own_list_or_its_serve_as_serving_default():
    class Plain(tf.Module):
        def serve(self, x):
            return x

    class Several(Plain):
        def serving_signatures(self):
            return {"serving_default": self.serve, "other": self.serve}

    plain, several = Plain(), Several()
    assert module_signatures(plain) == {"serving_default": plain.serve}
    assert module_signatures(several) == {"serving_default": several.serve, "other": several.serve}


class Counted(tf.Module):
    """Counts its traces: a Python side effect runs once per trace, never per call."""

    def __init__(self):
        super().__init__()
        self.traces = 0

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(self, texts):
        self.traces += 1
        return {"text": tf.strings.upper(texts)}


def _library_functions(folder):
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((Path(folder) / "saved_model.pb").read_bytes())
    return [function.signature.name for function in saved.meta_graphs[0].graph_def.library.function]


@pytest.mark.slow
@pytest.mark.core
def test_a_signature_described_before_the_export_is_traced_once_and_saved_once(tmp_path):
    from seqtasks.export.saved_model import traced_for_saving

    module = Counted()
    assert describe_signature(module.serve)["outputs"] == {"text": {"dtype": "string", "shape": [None]}}
    assert traced_for_saving(module.serve) is traced_for_saving(module.serve)
    folder = export_saved_model(module, module.serve, tmp_path, "counted")
    assert module.traces == 1
    assert sum(name.startswith("__inference_serve_") for name in _library_functions(folder)) == 1
    assert _serve(folder, ["ab"]) == ["AB"]

    plain = Counted()
    plain.serve.get_concrete_function()  # outside a save: the save traces it again, and keeps both
    tf.saved_model.save(plain, str(tmp_path / "plain"), signatures=plain.serve.get_concrete_function())
    assert plain.traces == 2
    assert sum(name.startswith("__inference_serve_") for name in _library_functions(tmp_path / "plain")) == 2
