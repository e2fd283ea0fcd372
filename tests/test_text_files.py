"""Reading data files line by line: plain or gzip, line ends removed, errors naming the file and the line."""

import gzip

import pytest

from seqtasks.data.text_files import numbered_lines, reading
from seqtasks.errors import SeqtasksError


@pytest.mark.parametrize("packed", [False, True])
def test_lines_are_numbered_from_1_and_lose_only_their_line_end(tmp_path, packed):
    content = "first\r\n\n  indented \n\rcarriage\nlast"
    path = tmp_path / "data.txt"
    path.write_bytes(gzip.compress(content.encode()) if packed else content.encode())
    with reading(path):
        assert list(numbered_lines(path)) == [(1, "first"), (2, ""), (3, "  indented "), (4, "\rcarriage"), (5, "last")]


def test_bytes_not_in_the_encoding_name_it_the_file_and_the_line(tmp_path):
    path = tmp_path / "data.txt"
    path.write_bytes("ok\nthé\n".encode("latin-1"))
    assert list(numbered_lines(path, "latin-1")) == [(1, "ok"), (2, "thé")]
    with pytest.raises(SeqtasksError) as error:
        list(numbered_lines(path))
    assert str(error.value) == f"{path}:2: not valid utf-8 (byte 3 of the line)"
    with pytest.raises(SeqtasksError) as error:
        list(numbered_lines(path, "ascii"))
    assert str(error.value) == f"{path}:2: not valid ascii (byte 3 of the line)"


def test_files_that_cannot_be_read_are_named(tmp_path):
    cases = [
        (tmp_path / "absent.txt", "utf-8", "no such data file"),
        (tmp_path, "utf-8", "is a folder, expected a data file"),
        (tmp_path / "absent.txt", "klingon", "unknown text encoding 'klingon'"),
    ]
    for path, encoding, message in cases:
        with pytest.raises(SeqtasksError) as error, reading(path, encoding):
            list(numbered_lines(path, encoding))
        assert str(error.value) == f"{path}: {message}"
    broken = tmp_path / "broken.gz"
    broken.write_bytes(gzip.compress(b"a line\n")[:-8])  # no end of stream
    with pytest.raises(SeqtasksError) as error, reading(broken):
        list(numbered_lines(broken))
    assert str(error.value).startswith(f"{broken}: cannot read: ")
