import errno
import stat

import pytest

from seqtasks.errors import SeqtasksError
from seqtasks.io_utils import make_run_dir, next_version_dir, publish_folder, write_json_atomic


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
    for name in ["1", "3", "tmp", ".5.tmp-x"]:
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
