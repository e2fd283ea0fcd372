"""Quiet by default: TensorFlow's start-up lines are kept off standard error unless `--verbose` asks for them.

The whole path, a fresh `seqtasks predict` process, is in
tests/inference/test_predict.py; these tests check the parts without TensorFlow.
"""

import os
import sys

import pytest

from seqtasks.utils import quiet


def test_writes_to_file_descriptor_2_inside_the_block_are_dropped(capfd):
    with quiet.silenced_stderr():
        os.write(2, b"I0000 00:00:1.0 port.cc:153] oneDNN custom operations are on.\n")
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"


def test_what_a_failing_block_wrote_is_shown_with_its_exception(capfd):
    with pytest.raises(ImportError, match="^no such library$"):
        with quiet.silenced_stderr():
            os.write(2, b"libcudart.so: cannot open shared object file\n")
            raise ImportError("no such library")
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "libcudart.so: cannot open shared object file\nafter\n"


def test_the_module_is_imported_silently_once_and_keeps_its_own_loader(tmp_path, monkeypatch, capfd):
    name = "seqtasks_noisy_native_library"
    (tmp_path / f"{name}.py").write_text("import os\nos.write(2, b'E0000 failed call to cuInit\\n')\nVALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    for variable in quiet.QUIET_ENVIRONMENT:
        monkeypatch.delenv(variable, raising=False)
    quiet.quiet_tensorflow(name)
    quiet.quiet_tensorflow(name)  # a second call adds no second hook
    hooks = [finder for finder in sys.meta_path if isinstance(finder, quiet._SilentImport)]
    assert [hook.module for hook in hooks] == [name]
    module = __import__(name)
    assert module.VALUE == 7
    assert capfd.readouterr().err == ""
    assert not [finder for finder in sys.meta_path if isinstance(finder, quiet._SilentImport)]
    assert type(module.__loader__).__name__ == "SourceFileLoader" and module.__spec__.loader is module.__loader__
    assert {variable: os.environ[variable] for variable in quiet.QUIET_ENVIRONMENT} == {
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "GRPC_VERBOSITY": "ERROR",
    }
    sys.modules.pop(name)


def test_a_log_level_the_user_set_is_kept(monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    monkeypatch.delenv("GRPC_VERBOSITY", raising=False)
    quiet.quiet_tensorflow("json")  # imported already: no hook
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0" and os.environ["GRPC_VERBOSITY"] == "ERROR"
    assert not [finder for finder in sys.meta_path if isinstance(finder, quiet._SilentImport)]
