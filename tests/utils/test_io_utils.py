import errno
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from seqtasks.errors import SeqtasksError
from seqtasks.utils import io_utils
from seqtasks.utils.io_utils import (
    make_run_dir,
    next_version_dir,
    publish_folder,
    publish_version,
    write_json_atomic,
    write_text_atomic,
)
from tests.conftest import REPO


def test_publish_folder_moves_a_complete_folder_into_place(tmp_path):
    destination = publish_folder(lambda folder: open(f"{folder}/a.txt", "w").write("x"), tmp_path / "1")
    assert (destination / "a.txt").read_text() == "x"
    assert stat.S_IMODE(destination.stat().st_mode) & 0o055 == 0o055  # readable by others
    assert [p.name for p in tmp_path.iterdir()] == ["1"]


def test_a_failed_write_leaves_no_folder_and_earlier_versions_intact(tmp_path):
    publish_folder(lambda folder: open(f"{folder}/model.pb", "w").write("v1"), tmp_path / "1")

    def disk_fills(folder):
        open(f"{folder}/model.pb", "w").write("half")
        raise OSError(errno.ENOSPC, "No space left on device")

    target = next_version_dir(tmp_path)
    assert target.name == "2"
    with pytest.raises(SeqtasksError, match="No space left on device.*earlier versions are untouched"):
        publish_folder(disk_fills, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1"]
    assert (tmp_path / "1" / "model.pb").read_text() == "v1"


def test_next_version_counts_integer_folders_only(tmp_path):
    for name in ["1", "3", "tmp", ".5.tmp-x", "07", "\u0661\u0669", "+8"]:  # 07, Arabic-Indic 19, +8: not versions
        (tmp_path / name).mkdir()
    assert next_version_dir(tmp_path).name == "4"
    assert next_version_dir(tmp_path / "absent").name == "1"


def test_write_json_atomic_replaces_the_whole_file(tmp_path):
    path = tmp_path / "metrics.json"
    write_json_atomic(path, {"a": 1})
    write_json_atomic(path, {"b": 2})
    assert path.read_text() == '{\n  "b": 2\n}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_run_dirs_never_collide(tmp_path):
    first = make_run_dir(tmp_path, "toy", "20260101-000000")
    second = make_run_dir(tmp_path, "toy", "20260101-000000")
    assert first != second and first.is_dir() and second.is_dir()
    assert first.parent == tmp_path / "toy"


def test_unwritable_output_folder_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SeqtasksError, match="cannot create the run folder"):
        make_run_dir(blocker, "toy", "now")


# --- write_text_atomic: all or nothing, with the permissions of an ordinary file ---


@pytest.fixture
def umask():
    """Sets the process umask for one test and puts the old one back."""
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_written_file_gets_the_permissions_the_umask_gives_not_mkstemps_0600(tmp_path, umask, mask, mode):
    umask(mask)
    path = tmp_path / "metrics.json"
    write_json_atomic(path, {"a": 1})
    assert stat.S_IMODE(path.stat().st_mode) == mode
    write_text_atomic(path, "again")  # a replaced file too
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert os.umask(mask) == mask  # writing left the umask as it was


def test_the_umask_is_read_without_changing_it(monkeypatch, umask):
    umask(0o027)
    changes = []
    real = os.umask
    monkeypatch.setattr(io_utils.os, "umask", lambda mask: changes.append(mask) or real(mask))
    assert io_utils._umask() == 0o027
    assert changes == []  # Linux shows it in /proc/self/status: no moment without a umask


class Boom(Exception):
    pass


@pytest.mark.parametrize("failure", ["write", "replace", "chmod"])
def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch, failure):
    path = tmp_path / "recipe.yaml"
    path.write_text("old\n")
    text = "new\n" * 1000
    if failure == "write":
        text += "\udc80"  # a lone surrogate at the end: UTF-8 fails after 4000 characters
        expected = UnicodeEncodeError
    else:
        expected = OSError

        def fail(*args, **kwargs):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(io_utils.os, failure, fail)
    with pytest.raises(expected):
        write_text_atomic(path, text)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recipe.yaml"]
    assert path.read_text() == "old\n"


def test_an_interrupt_while_writing_leaves_no_temporary_file(tmp_path, monkeypatch):
    real = os.replace

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(io_utils.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_text_atomic(tmp_path / "a.json", "{}")
    monkeypatch.setattr(io_utils.os, "replace", real)
    assert list(tmp_path.iterdir()) == []


# --- publish_folder: the staging folder never stays, an earlier version always does ---


def model(text):
    """A writer of a one-file export."""
    return lambda folder: Path(folder, "model.pb").write_text(text)


def test_a_published_folder_gets_the_umasks_permissions(tmp_path, umask):
    umask(0o022)
    destination = publish_folder(lambda folder: None, tmp_path / "1")
    assert stat.S_IMODE(destination.stat().st_mode) == 0o755
    umask(0o077)
    assert stat.S_IMODE(publish_folder(lambda folder: None, tmp_path / "2").stat().st_mode) == 0o700


@pytest.mark.parametrize("error", [ValueError("bad shape"), KeyboardInterrupt(), Boom("x")])
def test_a_failure_that_is_not_an_os_error_removes_the_staging_folder_and_propagates(tmp_path, error):
    publish_folder(model("v1"), tmp_path / "1")

    def export(folder):
        Path(folder, "model.pb").write_text("half")
        os.mkdir(f"{folder}/variables")
        raise error

    with pytest.raises(type(error)) as raised:
        publish_folder(export, tmp_path / "1")
    assert raised.value is error  # not wrapped: it is a bug, not the user's disk
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1"]
    assert (tmp_path / "1" / "model.pb").read_text() == "v1"


def test_republishing_replaces_the_earlier_version_and_leaves_nothing_else(tmp_path):
    publish_folder(model("v1"), tmp_path / "1")
    publish_folder(model("v2"), tmp_path / "1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1"]
    assert [p.name for p in (tmp_path / "1").iterdir()] == ["model.pb"]
    assert (tmp_path / "1" / "model.pb").read_text() == "v2"


@pytest.mark.parametrize("failing_call", [1, 2])
def test_a_failed_rename_while_republishing_keeps_the_earlier_version(tmp_path, monkeypatch, failing_call):
    """Republishing renames the old version aside (call 1), then the new one into place (call 2)."""
    publish_folder(model("v1"), tmp_path / "1")
    real, calls = os.replace, []

    def replace(source, target):
        calls.append((source, target))
        if len(calls) == failing_call:
            raise OSError(5, "Input/output error")
        return real(source, target)

    monkeypatch.setattr(io_utils.os, "replace", replace)
    with pytest.raises(SeqtasksError) as raised:
        publish_folder(model("v2"), tmp_path / "1")
    monkeypatch.setattr(io_utils.os, "replace", real)
    assert str(raised.value) == (
        f"{tmp_path / '1'}: writing failed (Input/output error); nothing was written there "
        "and earlier versions are untouched"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1"]
    assert (tmp_path / "1" / "model.pb").read_text() == "v1"


def test_a_folder_that_cannot_be_created_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(SeqtasksError) as raised:
        publish_folder(lambda folder: None, tmp_path / "file" / "models" / "1")
    assert str(raised.value) == f"{tmp_path / 'file' / 'models'}: cannot write the export: Not a directory"


def test_publishing_creates_missing_parent_folders(tmp_path):
    destination = publish_folder(model("v1"), tmp_path / "exports" / "toy" / "1")
    assert destination == tmp_path / "exports" / "toy" / "1"
    assert (destination / "model.pb").read_text() == "v1"
    assert [p.name for p in (tmp_path / "exports" / "toy").iterdir()] == ["1"]


def test_the_export_is_written_in_a_hidden_folder_beside_its_destination(tmp_path):
    """Beside it, so the final rename stays on one file system; hidden, so no server takes it for a version."""
    seen = []

    def write(folder):
        seen.append(Path(folder))
        assert sorted(p.name for p in tmp_path.iterdir()) == [Path(folder).name]
        Path(folder, "model.pb").write_text("v1")

    publish_folder(write, tmp_path / "1")
    (staging,) = seen
    assert staging.parent == tmp_path
    assert staging.name.startswith(".1.tmp-")
    assert not staging.exists()


def test_republishing_sets_the_earlier_version_aside_beside_it_while_renaming(tmp_path, monkeypatch):
    publish_folder(model("v1"), tmp_path / "1")
    real, moves = os.replace, []

    def replace(source, target):
        moves.append((Path(source), Path(target)))
        return real(source, target)

    monkeypatch.setattr(io_utils.os, "replace", replace)
    publish_folder(model("v2"), tmp_path / "1")
    (aside, old), (staging, new) = moves
    assert (aside, new) == (tmp_path / "1", tmp_path / "1")
    assert old.parent == tmp_path and old.name.startswith(".1.old-")
    assert staging.parent == tmp_path and staging.name.startswith(".1.tmp-")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1"]


def test_an_earlier_version_that_cannot_be_put_back_is_kept_aside_not_deleted(tmp_path, monkeypatch):
    """The new version's rename fails (call 2), and so does moving the old one back (call 3)."""
    publish_folder(model("v1"), tmp_path / "1")
    real, calls = os.replace, []

    def replace(source, target):
        calls.append((source, target))
        if len(calls) >= 2:
            raise OSError(5, "Input/output error")
        return real(source, target)

    monkeypatch.setattr(io_utils.os, "replace", replace)
    with pytest.raises(SeqtasksError) as raised:
        publish_folder(model("v2"), tmp_path / "1")
    monkeypatch.setattr(io_utils.os, "replace", real)
    assert len(calls) == 3
    assert str(raised.value) == (
        f"{tmp_path / '1'}: writing failed (Input/output error); nothing was written there "
        "and earlier versions are untouched"
    )
    (kept,) = list(tmp_path.iterdir())  # the staging folder is gone
    assert kept.name.startswith(".1.old-")
    assert (kept / "model.pb").read_text() == "v1"


@pytest.mark.parametrize("failing_call", [1, 2])
def test_an_interrupt_while_republishing_keeps_the_earlier_version_and_propagates(tmp_path, monkeypatch, failing_call):
    publish_folder(model("v1"), tmp_path / "1")
    real, calls = os.replace, []
    interrupt = KeyboardInterrupt()

    def replace(source, target):
        calls.append((source, target))
        if len(calls) == failing_call:
            raise interrupt
        return real(source, target)

    monkeypatch.setattr(io_utils.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt) as raised:
        publish_folder(model("v2"), tmp_path / "1")
    monkeypatch.setattr(io_utils.os, "replace", real)
    assert raised.value is interrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1"]
    assert [p.name for p in (tmp_path / "1").iterdir()] == ["model.pb"]
    assert (tmp_path / "1" / "model.pb").read_text() == "v1"


def _undeletable(monkeypatch, name):
    """Makes `os.<name>` (unlink or rmdir) fail, as on a busy network file system; returns the undo."""
    real = getattr(os, name)

    def refuse(*args, **kwargs):
        raise OSError(errno.EBUSY, "Device or resource busy")

    monkeypatch.setattr(os, name, refuse)
    return lambda: monkeypatch.setattr(os, name, real)


def test_an_earlier_version_that_cannot_be_deleted_does_not_fail_the_publish(tmp_path, monkeypatch):
    publish_folder(model("v1"), tmp_path / "1")
    undo = _undeletable(monkeypatch, "unlink")
    destination = publish_folder(model("v2"), tmp_path / "1")
    undo()
    assert destination == tmp_path / "1"
    assert (destination / "model.pb").read_text() == "v2"
    (old,) = [p for p in tmp_path.iterdir() if p.name != "1"]
    assert old.name.startswith(".1.old-")
    assert (old / "model.pb").read_text() == "v1"


def test_a_staging_folder_that_cannot_be_deleted_does_not_hide_the_write_error(tmp_path, monkeypatch):
    def disk_fills(folder):
        Path(folder, "model.pb").write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")

    undo = _undeletable(monkeypatch, "unlink")
    with pytest.raises(SeqtasksError) as raised:
        publish_folder(disk_fills, tmp_path / "1")
    undo()
    assert str(raised.value) == (
        f"{tmp_path / '1'}: writing failed (No space left on device); nothing was written there "
        "and earlier versions are untouched"
    )
    assert not (tmp_path / "1").exists()


def test_an_empty_aside_folder_that_cannot_be_deleted_does_not_hide_the_rename_error(tmp_path, monkeypatch):
    """Setting the earlier version aside fails (call 1): the empty folder made for it cannot be removed either."""
    publish_folder(model("v1"), tmp_path / "1")
    real = os.replace

    def replace(source, target):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(io_utils.os, "replace", replace)
    undo = _undeletable(monkeypatch, "rmdir")
    with pytest.raises(SeqtasksError) as raised:
        publish_folder(model("v2"), tmp_path / "1")
    undo()
    monkeypatch.setattr(io_utils.os, "replace", real)
    assert str(raised.value) == (
        f"{tmp_path / '1'}: writing failed (Input/output error); nothing was written there "
        "and earlier versions are untouched"
    )
    assert (tmp_path / "1" / "model.pb").read_text() == "v1"


# --- make_run_dir: the timestamp, then -2, -3, ... up to -999 ---


def test_run_dirs_are_the_timestamp_then_numbered_from_2(tmp_path):
    made = [make_run_dir(tmp_path / "runs", "toy", "20260101-000000") for _ in range(3)]
    base = tmp_path / "runs" / "toy"
    assert made == [base / "20260101-000000", base / "20260101-000000-2", base / "20260101-000000-3"]
    assert all(path.is_dir() for path in made)
    assert make_run_dir(tmp_path / "runs", "toy", "later") == base / "later"


def test_a_run_dir_is_made_inside_missing_and_existing_folders(tmp_path):
    assert make_run_dir(tmp_path / "a" / "b", "toy", "t") == tmp_path / "a" / "b" / "toy" / "t"
    (tmp_path / "c" / "toy").mkdir(parents=True)
    assert make_run_dir(tmp_path / "c", "toy", "t") == tmp_path / "c" / "toy" / "t"


def test_the_999th_run_of_a_second_is_the_last(tmp_path):
    base = tmp_path / "toy"
    base.mkdir()
    (base / "t").mkdir()
    for attempt in range(2, 999):
        (base / f"t-{attempt}").mkdir()
    assert make_run_dir(tmp_path, "toy", "t") == base / "t-999"
    with pytest.raises(SeqtasksError) as raised:
        make_run_dir(tmp_path, "toy", "t")
    assert str(raised.value) == f"{base}: too many runs started at t"
    assert not (base / "t-1000").exists() and not (base / "t-0").exists() and not (base / "t-1").exists()


def test_an_output_folder_that_is_a_file_is_named_in_the_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SeqtasksError) as raised:
        make_run_dir(blocker, "toy", "now")
    assert str(raised.value) == f"{blocker / 'toy'}: cannot create the run folder: Not a directory"


@pytest.mark.slow
@pytest.mark.core
def test_text_is_written_as_utf8_whatever_the_locale(tmp_path):
    from tests.conftest import run_python

    path = tmp_path / "out.txt"
    code = f"from seqtasks.utils.io_utils import write_text_atomic; write_text_atomic({str(path)!r}, 'caf\\xe9 \\u2615')"
    result = run_python(code, env={"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}, timeout=60)
    assert result.returncode == 0, result.stderr
    assert path.read_bytes() == "café ☕".encode("utf-8")


# --- _umask where /proc does not show it: set a private mask for a moment and put it back ---


@pytest.mark.parametrize(
    "status",
    [
        None,  # no /proc (macOS, a sandbox): open fails
        "Name:\tpython\nPid:\t1\n",  # an old kernel: no Umask line
        "Name:\tpython\nUmask:\n",  # no value
        "Name:\tpython\nUmask:\tzz\n",  # not octal
    ],
)
def test_the_umask_without_proc_is_read_by_setting_a_private_one_for_a_moment(monkeypatch, umask, status):
    import io

    umask(0o027)

    def fake_open(path, *args, **kwargs):
        assert path == "/proc/self/status"
        if status is None:
            raise FileNotFoundError(2, "No such file or directory")
        return io.BytesIO(status.encode())

    changes = []
    real = os.umask
    monkeypatch.setattr(io_utils, "open", fake_open, raising=False)
    monkeypatch.setattr(io_utils.os, "umask", lambda mask: changes.append(mask) or real(mask))
    assert io_utils._umask() == 0o027
    assert changes == [0o077, 0o027]  # never wider than private while it is changed
    monkeypatch.undo()
    assert os.umask(0o027) == 0o027


def test_the_umask_line_is_read_as_octal(monkeypatch):
    import io

    monkeypatch.setattr(io_utils, "open", lambda *a, **k: io.BytesIO(b"Name:\tx\nUmask:\t0027\nState:\tR\n"), raising=False)
    monkeypatch.setattr(io_utils.os, "umask", lambda mask: pytest.fail("the umask was changed"))
    assert io_utils._umask() == 0o027


# --- write_text_atomic: the temporary file sits beside the target, hidden ---


def test_the_temporary_file_is_hidden_beside_the_target(tmp_path, monkeypatch):
    real, moves = os.replace, []
    monkeypatch.setattr(io_utils.os, "replace", lambda source, target: moves.append((source, target)) or real(source, target))
    write_text_atomic(tmp_path / "metrics.json", "{}")
    ((source, target),) = moves
    assert Path(target) == tmp_path / "metrics.json"
    assert Path(source).parent == tmp_path
    assert Path(source).name.startswith(".metrics.json.") and Path(source).name.endswith(".tmp")
    assert (tmp_path / "metrics.json").read_text() == "{}"


def test_an_interrupt_just_after_the_rename_leaves_the_new_file(tmp_path, monkeypatch):
    """The rename happened, then Ctrl-C arrived: the temporary file is already gone, the interrupt still propagates."""
    real = os.replace

    def replaced_then_interrupted(source, target):
        real(source, target)
        raise KeyboardInterrupt

    monkeypatch.setattr(io_utils.os, "replace", replaced_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_text_atomic(tmp_path / "a.json", "{}")
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]
    assert (tmp_path / "a.json").read_text() == "{}"


def test_json_is_written_sorted_indented_and_ending_with_a_newline(tmp_path):
    path = tmp_path / "m.json"
    write_json_atomic(path, {"b": 1, "a": [1, {"d": None, "c": "é"}]})
    assert path.read_text(encoding="utf-8") == (
        '{\n  "a": [\n    1,\n    {\n      "c": "\\u00e9",\n      "d": null\n    }\n  ],\n  "b": 1\n}\n'
    )


def test_next_version_ignores_files_with_numeric_names(tmp_path):
    (tmp_path / "2").mkdir()
    (tmp_path / "99").write_text("")
    (tmp_path / "10").mkdir()
    assert next_version_dir(tmp_path) == tmp_path / "11"
    assert next_version_dir(str(tmp_path / "none")) == tmp_path / "none" / "1"


@pytest.mark.slow
@pytest.mark.core
def test_the_umask_is_read_without_changing_it_whatever_the_process_name(umask):
    from tests.conftest import run_python

    umask(0o022)
    code = (
        "import ctypes, os\n"
        "ctypes.CDLL(None).prctl(15, b'caf\\xc3\\xa9', 0, 0, 0)  # PR_SET_NAME\n"
        "from seqtasks.utils import io_utils\n"
        "changes, real = [], os.umask\n"
        "os.umask = lambda mask: changes.append(mask) or real(mask)\n"
        "print(oct(io_utils._umask()), changes)\n"
    )
    result = run_python(code, timeout=60)
    assert result.stdout == "0o22 []\n", result.stderr



# --- publish_version: a number is taken only under a lock, once the folder is complete; none is replaced ---


def _note(text, seconds=0.0):
    """A writer of a one-file version that takes `seconds` to write it."""

    def write(folder):
        time.sleep(seconds)
        Path(folder, "note.txt").write_text(text)

    return write


@pytest.mark.parametrize("threads_lock", [True, False], ids=["threads-and-flock", "flock-alone"])
def test_concurrent_publishers_get_distinct_versions_and_replace_nothing(tmp_path, monkeypatch, threads_lock):
    """Eight exports at once, as eight `seqtasks export` would; `flock-alone` leaves only the lock processes share."""
    import contextlib
    import threading

    if not threads_lock:
        monkeypatch.setattr(io_utils, "_VERSION_LOCKS", contextlib.nullcontext())
    rename = os.rename

    def slow_rename(source, target):  # a slow file system: without the lock, several would take one number
        time.sleep(0.005)
        rename(source, target)

    monkeypatch.setattr(io_utils.os, "rename", slow_rename)
    for name in ["1", "2"]:
        publish_version(_note(f"old {name}"), tmp_path)
    (tmp_path / "4").write_text("a file, not a version")
    start, results = threading.Barrier(8), {}

    def publish(index):
        start.wait()
        results[index] = publish_version(_note(f"new {index}", 0.01), tmp_path)

    workers = [threading.Thread(target=publish, args=(index,)) for index in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(int(folder.name) for folder, new in results.values()) == [3, 5, 6, 7, 8, 9, 10, 11]
    assert all(new for _, new in results.values())
    assert {index: (folder / "note.txt").read_text() for index, (folder, _) in results.items()} == {
        index: f"new {index}" for index in range(8)
    }
    assert [(tmp_path / name / "note.txt").read_text() for name in ["1", "2"]] == ["old 1", "old 2"]
    assert (tmp_path / "4").read_text() == "a file, not a version"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["1", "2", "3", "4", *map(str, range(5, 12))])


def test_the_version_is_chosen_after_writing_so_a_version_published_meanwhile_is_kept(tmp_path):
    def slow_write(folder):
        publish_version(_note("published meanwhile"), tmp_path)  # another export finishes first
        Path(folder, "note.txt").write_text("slow")

    assert publish_version(slow_write, tmp_path) == (tmp_path / "2", True)
    assert (tmp_path / "1" / "note.txt").read_text() == "published meanwhile"
    assert (tmp_path / "2" / "note.txt").read_text() == "slow"


def test_an_unchanged_export_adds_no_version_and_finish_sees_the_final_folder(tmp_path):
    seen = []
    publish_version(_note("v1"), tmp_path, finish=lambda folder, version: seen.append(version))
    same = lambda newest: (newest / "note.txt").read_text() == "v1"  # noqa: E731
    assert publish_version(_note("v1"), tmp_path, unchanged=same) == (tmp_path / "1", False)
    assert publish_version(_note("v2"), tmp_path, unchanged=lambda newest: False) == (tmp_path / "2", True)
    assert seen == [tmp_path / "1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1", "2"]  # the unchanged one's staging folder is gone


def test_a_failed_version_write_names_the_folder_and_leaves_nothing(tmp_path):
    publish_version(_note("v1"), tmp_path)

    def disk_fills(folder):
        Path(folder, "note.txt").write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(SeqtasksError) as raised:
        publish_version(disk_fills, tmp_path)
    assert str(raised.value) == (
        f"{tmp_path}: writing the new version failed (No space left on device); no version was added "
        "and earlier versions are untouched"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1"]


# --- staging folders that killed exports left are removed by the next one ---


def test_stale_staging_folders_are_removed_and_live_or_recent_ones_kept(tmp_path):
    host = io_utils._host()
    dead_pid = 99_999_999  # above any pid_max: no such process
    names = {
        f".tmp-{host}-{dead_pid}-ab12cd_e": True,  # this host, its process gone
        f".tmp-{host}-{os.getpid()}-xy98zw_q": False,  # this host, its process alive
        f".tmp-{host}-{os.getpid()}-old12345": True,  # ... but a day old: the process id was reused
        f".tmp-other-host-{dead_pid}-aaaa1111": False,  # another host: only when old
        ".tmp-old-host-1-bbbb2222": True,  # another host, old
        ".3.tmp-k2j3h4g5": False,  # named as earlier versions did: only when old
        ".4.tmp-a1b2c3d4": True,
        ".5.old-a1b2c3d4": False,  # an earlier version set aside: never removed
        "6": False,
    }
    day_and_more = time.time() - io_utils.STALE_STAGING_SECONDS - 60
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "saved_model.pb").write_text("x")
    for name in [f".tmp-{host}-{os.getpid()}-old12345", ".tmp-old-host-1-bbbb2222", ".4.tmp-a1b2c3d4", ".5.old-a1b2c3d4"]:
        os.utime(tmp_path / name, (day_and_more, day_and_more))
    assert io_utils.remove_stale_staging(tmp_path) == sorted(name for name, stale in names.items() if stale)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(name for name, stale in names.items() if not stale)


@pytest.mark.slow
def test_the_staging_folder_of_a_killed_export_is_removed_by_the_next_export(tmp_path):
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from seqtasks.utils.io_utils import publish_version\n"
        "def write(folder):\n"
        "    Path(folder, 'saved_model.pb').write_text('half')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "publish_version(write, sys.argv[1])\n"
    )
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, timeout=60, cwd=REPO)
    assert result.returncode == -signal.SIGKILL, result.stderr
    (left,) = tmp_path.iterdir()
    assert left.name.startswith(f".tmp-{io_utils._host()}-")
    assert publish_version(_note("v1"), tmp_path) == (tmp_path / "1", True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1"]


# --- publish_version: where the staging folder is made, and what a failure leaves ---


def test_publishing_a_version_creates_missing_parent_folders(tmp_path):
    root = tmp_path / "exports" / "toy"
    assert publish_version(_note("v1"), root) == (root / "1", True)
    assert (root / "1" / "note.txt").read_text() == "v1"
    assert [p.name for p in root.iterdir()] == ["1"]


def test_a_version_is_written_in_a_hidden_folder_in_root_named_for_this_host_and_process(tmp_path, monkeypatch):
    """In root, so the rename stays on one file system; named so that `remove_stale_staging` knows whose it is."""
    seen = []

    def write(folder):
        seen.append(Path(folder))
        assert [p.name for p in tmp_path.iterdir()] == [Path(folder).name]
        Path(folder, "note.txt").write_text("v1")

    monkeypatch.setattr(io_utils.socket, "gethostname", lambda: "Büro-PC/1.lan")
    assert publish_version(write, tmp_path) == (tmp_path / "1", True)
    (staging,) = seen
    assert staging.parent == tmp_path
    assert staging.name.startswith(f".tmp-B_ro_PC_1.lan-{os.getpid()}-")  # no `/`, `-` or non-ASCII from the name
    assert not staging.exists()


def test_a_host_without_a_name_names_its_staging_folders_host(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(io_utils.socket, "gethostname", lambda: "")
    publish_version(lambda folder: seen.append(Path(folder).name), tmp_path)
    (name,) = seen
    assert name.startswith(f".tmp-host-{os.getpid()}-")


@pytest.mark.parametrize("mask, mode", [(0o022, 0o755), (0o077, 0o700), (0o002, 0o775)])
def test_a_published_version_gets_the_umasks_permissions(tmp_path, umask, mask, mode):
    umask(mask)
    folder, new = publish_version(_note("v1"), tmp_path)
    assert new and stat.S_IMODE(folder.stat().st_mode) == mode


def test_a_version_root_that_cannot_be_created_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(SeqtasksError) as raised:
        publish_version(_note("v1"), tmp_path / "file" / "models")
    assert str(raised.value) == f"{tmp_path / 'file' / 'models'}: cannot write the export: Not a directory"


@pytest.mark.parametrize("error", [ValueError("bad shape"), KeyboardInterrupt(), Boom("x")])
def test_a_version_write_failing_otherwise_than_os_error_removes_the_staging_folder_and_propagates(tmp_path, error):
    publish_version(_note("v1"), tmp_path)

    def export(folder):
        Path(folder, "note.txt").write_text("half")
        os.mkdir(f"{folder}/variables")
        raise error

    with pytest.raises(type(error)) as raised:
        publish_version(export, tmp_path)
    assert raised.value is error  # not wrapped: it is a bug, not the user's disk
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1"]
    assert (tmp_path / "1" / "note.txt").read_text() == "v1"


def _staging_left(root):
    """The one staging folder in `root`."""
    (left,) = [p for p in root.iterdir() if p.name.startswith(f".tmp-{io_utils._host()}-{os.getpid()}-")]
    return left


def test_a_version_staging_folder_that_cannot_be_deleted_does_not_hide_the_write_error(tmp_path, monkeypatch):
    def disk_fills(folder):
        Path(folder, "note.txt").write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")

    undo = _undeletable(monkeypatch, "unlink")
    with pytest.raises(SeqtasksError) as raised:
        publish_version(disk_fills, tmp_path)
    undo()
    assert str(raised.value) == (
        f"{tmp_path}: writing the new version failed (No space left on device); no version was added "
        "and earlier versions are untouched"
    )
    assert not (tmp_path / "1").exists()
    assert (_staging_left(tmp_path) / "note.txt").read_text() == "half"


@pytest.mark.parametrize("error", [KeyboardInterrupt(), Boom("x")])
def test_a_version_staging_folder_that_cannot_be_deleted_does_not_hide_another_error(tmp_path, monkeypatch, error):
    def export(folder):
        Path(folder, "note.txt").write_text("half")
        raise error

    undo = _undeletable(monkeypatch, "unlink")
    with pytest.raises(type(error)) as raised:
        publish_version(export, tmp_path)
    undo()
    assert raised.value is error
    assert not (tmp_path / "1").exists()
    assert (_staging_left(tmp_path) / "note.txt").read_text() == "half"


def test_an_unchanged_export_whose_staging_folder_cannot_be_deleted_still_adds_no_version(tmp_path, monkeypatch):
    publish_version(_note("v1"), tmp_path)
    undo = _undeletable(monkeypatch, "unlink")
    same = lambda newest: (newest / "note.txt").read_text() == "v1"  # noqa: E731
    assert publish_version(_note("v1"), tmp_path, unchanged=same) == (tmp_path / "1", False)
    undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["1", _staging_left(tmp_path).name])


# --- remove_stale_staging: `now`, the day's boundary, and folders it cannot look at or remove ---


def test_staging_folders_are_stale_only_when_more_than_a_day_older_than_now(tmp_path):
    made = 1_700_000_000  # whole seconds: the file system keeps them exactly
    for name in [".tmp-other-host-7-aaaa1111", ".3.tmp-k2j3h4g5"]:
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (made, made))
    assert io_utils.remove_stale_staging(tmp_path, now=made + io_utils.STALE_STAGING_SECONDS) == []
    assert io_utils.remove_stale_staging(tmp_path, now=made + io_utils.STALE_STAGING_SECONDS + 1) == [
        ".3.tmp-k2j3h4g5",
        ".tmp-other-host-7-aaaa1111",
    ]
    assert list(tmp_path.iterdir()) == []


def test_a_fresh_staging_folder_is_stale_for_a_now_a_day_later(tmp_path):
    (tmp_path / ".tmp-other-host-7-aaaa1111").mkdir()
    assert io_utils.remove_stale_staging(tmp_path, now=time.time() + io_utils.STALE_STAGING_SECONDS + 60) == [
        ".tmp-other-host-7-aaaa1111"
    ]


def test_a_missing_root_has_no_stale_staging_folders(tmp_path):
    assert io_utils.remove_stale_staging(tmp_path / "absent") == []
    assert not (tmp_path / "absent").exists()


def test_a_staging_folder_removed_meanwhile_is_skipped_and_the_others_still_removed(tmp_path, monkeypatch):
    """Another export removes `.tmp-a-...` between the listing and the look at its age."""
    import pathlib
    import shutil

    old = time.time() - io_utils.STALE_STAGING_SECONDS - 60
    for name in [".tmp-a-host-7-aaaa1111", ".tmp-b-host-7-bbbb2222"]:
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (old, old))
    real = pathlib.Path.lstat

    def lstat(path):
        if path.name == ".tmp-a-host-7-aaaa1111":
            shutil.rmtree(path)
        return real(path)

    monkeypatch.setattr(pathlib.Path, "lstat", lstat)
    assert io_utils.remove_stale_staging(tmp_path) == [".tmp-b-host-7-bbbb2222"]
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_a_stale_staging_folder_that_cannot_be_deleted_is_left_and_the_export_goes_on(tmp_path, monkeypatch):
    dead = f".tmp-{io_utils._host()}-99999999-ab12cd_e"  # above any pid_max: no such process
    (tmp_path / dead).mkdir()
    (tmp_path / dead / "saved_model.pb").write_text("half")
    undo = _undeletable(monkeypatch, "unlink")
    assert publish_version(_note("v1"), tmp_path) == (tmp_path / "1", True)
    undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["1", dead])
    assert (tmp_path / dead / "saved_model.pb").read_text() == "half"


# --- _running: whether the process of a staging folder lives, asked without signalling it ---


@pytest.mark.slow
@pytest.mark.core
def test_the_process_of_a_live_staging_folder_is_not_signalled(tmp_path):
    """Only the signal 0 check: any real signal (SIGHUP ends most processes) would harm another export."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGHUP, signal.SIG_DFL); print(); time.sleep(60)"],
        stdout=subprocess.PIPE,
    )
    try:
        child.stdout.readline()  # its signal handlers are set
        name = f".tmp-{io_utils._host()}-{child.pid}-ab12cd_e"
        (tmp_path / name).mkdir()
        assert io_utils.remove_stale_staging(tmp_path) == []
        assert [p.name for p in tmp_path.iterdir()] == [name]
    finally:
        child.terminate()  # a signal sent before would be delivered first: it is the lower number
        child.wait(timeout=60)
        child.stdout.close()
    assert child.returncode == -signal.SIGTERM


def test_a_staging_folder_of_another_users_live_process_is_kept(tmp_path, monkeypatch):
    calls = []

    def kill(pid, signal_number):  # what the kernel answers about a process of another user
        calls.append((pid, signal_number))
        raise PermissionError(errno.EPERM, "Operation not permitted")

    name = f".tmp-{io_utils._host()}-4242-ab12cd_e"
    (tmp_path / name).mkdir()
    monkeypatch.setattr(io_utils.os, "kill", kill)
    assert io_utils.remove_stale_staging(tmp_path) == []
    assert calls == [(4242, 0)]
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_a_stale_staging_folder_that_cannot_be_deleted_is_not_reported_removed(tmp_path, monkeypatch):
    dead = f".tmp-{io_utils._host()}-99999999-ab12cd_e"
    gone = f".tmp-{io_utils._host()}-99999998-ab12cd_e"
    for name in (dead, gone):
        (tmp_path / name).mkdir()
    (tmp_path / dead / "saved_model.pb").write_text("half")
    undo = _undeletable(monkeypatch, "unlink")
    assert io_utils.remove_stale_staging(tmp_path) == [gone]
    undo()
    assert [p.name for p in tmp_path.iterdir()] == [dead]
