import json
import os

import pytest
import tensorflow as tf

from seqtasks.errors import SeqtasksError
from seqtasks.export import export_saved_model


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


def test_exports_are_numbered_versions_each_serving_its_signature(tmp_path):
    module = Shout()
    first = export_saved_model(module, module.serve, tmp_path, "shout")
    second = export_saved_model(module, module.serve, tmp_path, "shout")
    assert (first.name, second.name) == ("1", "2")
    assert first.parent == tmp_path / "shout"
    assert _serve(second, ["ab", "c d"]) == ["AB", "C D"]
    assert sorted(p.name for p in (tmp_path / "shout").iterdir()) == ["1", "2"]


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
        f"{tmp_path / 'shout' / '1'}: writing failed (No space left on device); nothing was "
        "written there and earlier versions are untouched"
    )
    assert list((tmp_path / "shout").iterdir()) == []


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
