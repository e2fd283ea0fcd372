"""Opening data files: regular files only, sizes shown in their largest unit, the limits checked again once open."""

import errno
import os
import threading

import pytest

from seqtasks.errors import SeqtasksError
from seqtasks.utils import regular_files


@pytest.mark.parametrize(
    "size, shown", [(2 * 1024**3, "2 GiB"), (1024**2, "1 MiB"), (3 * 1024, "3 KiB"), (1000, "1000 bytes"), (1025, "1025 bytes")]
)
def test_sizes_are_shown_in_the_largest_unit_that_divides_them(size, shown):
    assert regular_files.describe_size(size) == shown


def test_a_folder_raises_the_error_opening_it_would(tmp_path):
    from seqtasks.utils.regular_files import open_regular_file

    with pytest.raises(IsADirectoryError) as error:
        open_regular_file(tmp_path, 10)
    assert (error.value.errno, error.value.strerror, error.value.filename) == (
        errno.EISDIR,
        os.strerror(errno.EISDIR),
        str(tmp_path),
    )


def test_a_regular_file_is_opened_for_blocking_reads(tmp_path):
    from seqtasks.utils.regular_files import open_regular_file

    path = tmp_path / "data.txt"
    path.write_bytes(b"abc")
    with open_regular_file(path, 3) as handle:
        assert os.get_blocking(handle.fileno()) and handle.read() == b"abc"


def test_a_fifo_swapped_in_after_the_check_is_refused_once_open(tmp_path, monkeypatch):
    from seqtasks.utils import regular_files

    regular = tmp_path / "regular.txt"
    regular.write_bytes(b"x")
    swapped = tmp_path / "swapped"
    os.mkfifo(swapped)
    stat = os.stat
    # The first check sees a regular file; the FIFO is what gets opened.
    monkeypatch.setattr(regular_files.os, "stat", lambda path: stat(regular))
    errors = []

    def open_swapped():
        try:
            regular_files.open_regular_file(swapped, 10, "an input file")
        except SeqtasksError as error:
            errors.append(str(error))

    opener = threading.Thread(target=open_swapped, daemon=True)
    opener.start()
    opener.join(5)
    waited = opener.is_alive()
    if waited:  # the open waits for a writer: one comes and goes, so that the thread ends
        os.close(os.open(swapped, os.O_WRONLY | os.O_NONBLOCK))
        opener.join()
    assert not waited, "opening the FIFO waited for a writer"
    assert errors == [f"{swapped}: not a regular file"]


def test_a_file_grown_past_the_limit_after_the_first_check_is_refused_once_open(tmp_path, monkeypatch):
    from seqtasks.utils import regular_files

    small = tmp_path / "small.txt"
    small.write_bytes(b"x")
    grown = tmp_path / "grown.txt"
    grown.write_bytes(b"x" * 11)
    stat = os.stat
    # The first check sees a small file; the file opened has 11 bytes.
    monkeypatch.setattr(regular_files.os, "stat", lambda path: stat(small))
    with pytest.raises(SeqtasksError) as error:
        regular_files.open_regular_file(grown, 10, "an input file")
    assert str(error.value) == f"{grown}: 11 bytes, more than the 10 bytes an input file may have"
