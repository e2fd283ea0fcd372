"""Reading data files line by line: plain or gzip, line ends removed, errors naming the file and the line."""

import contextlib
import gzip
import io
import os
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from seqtasks.cli import main
from seqtasks.data.captions import read_coco_captions, read_flickr_tokens, read_split_list
from seqtasks.data.conll import read_conll
from seqtasks.data.labelled_text import read_label_files, read_label_first_tsv, read_label_folders, read_labelled_csv
from seqtasks.data.parallel_corpus import read_parallel_tsv
from seqtasks.data.text_files import numbered_lines, reading
from seqtasks.errors import RecipeError, SeqtasksError
from seqtasks.inference.predict import read_inputs
from seqtasks.recipe import load_recipe, loader as recipe_loader
from seqtasks.utils import regular_files
from seqtasks.utils.regular_files import MAX_DATA_FILE_BYTES, MAX_LINE_BYTES


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


# --- only regular files, within limits: a device or a FIFO is refused before it is opened ---


@pytest.fixture
def small_limits(monkeypatch):
    """Limits small enough that a reader which ignored a device's kind would still stop at once."""
    monkeypatch.setattr(regular_files, "MAX_DATA_FILE_BYTES", 4096)
    monkeypatch.setattr(regular_files, "MAX_LINE_BYTES", 1024)
    monkeypatch.setattr(recipe_loader, "MAX_RECIPE_BYTES", 1024)


@contextlib.contextmanager
def fifo(path):
    """A FIFO at `path`. Should a reader open it, a writer comes and goes so the reader sees an empty file: no hang."""
    os.mkfifo(path)
    done = threading.Event()

    def release_readers():
        while not done.wait(0.05):
            with contextlib.suppress(OSError):  # ENXIO: no reader is waiting
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))

    thread = threading.Thread(target=release_readers, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        done.set()
        thread.join()


def error_of(read, path):
    with pytest.raises(SeqtasksError) as error:
        read(path)
    return str(error.value)


READERS = {
    "recipe": load_recipe,
    "parallel": lambda path: read_parallel_tsv(path, 1, 0),
    "conll": read_conll,
    "csv": read_labelled_csv,
    "tsv": read_label_first_tsv,
    "flickr": read_flickr_tokens,
    "split": read_split_list,
    "coco": read_coco_captions,
    "predict --input": read_inputs,
}


@pytest.mark.parametrize("read", list(READERS.values()), ids=list(READERS))
def test_every_reader_refuses_the_zero_device(tmp_path, read, small_limits):
    assert error_of(read, Path("/dev/zero")) == "/dev/zero: not a regular file"
    (tmp_path / "zero.tsv").symlink_to("/dev/zero")  # under an innocent name
    assert error_of(read, tmp_path / "zero.tsv") == f"{tmp_path / 'zero.tsv'}: not a regular file"


@pytest.mark.parametrize("read", list(READERS.values()), ids=list(READERS))
def test_every_reader_refuses_a_fifo_without_waiting_for_a_writer(tmp_path, read, small_limits):
    with fifo(tmp_path / "data.txt") as path:
        assert error_of(read, path) == f"{path}: not a regular file"


def test_a_recipe_that_is_not_a_regular_file_is_a_recipe_error(small_limits):
    with pytest.raises(RecipeError):
        load_recipe("/dev/zero")


def test_the_label_readers_refuse_a_fifo_among_their_files(tmp_path, small_limits):
    (tmp_path / "pos").mkdir()
    (tmp_path / "pos" / "a.txt").write_text("good\n")
    with fifo(tmp_path / "pos" / "b.txt") as path:
        assert error_of(lambda folder: read_label_folders(folder, ["pos"]), tmp_path) == f"{path}: not a regular file"
    (tmp_path / "rt.pos").write_text("good\n")
    with fifo(tmp_path / "rt.neg") as path:
        assert error_of(lambda prefix: read_label_files(prefix, ["pos", "neg"]), tmp_path / "rt") == (
            f"{path}: not a regular file"
        )


def test_predict_input_from_the_zero_device_exits_2_before_loading_a_model(tmp_path, small_limits):
    result = CliRunner().invoke(main, ["predict", str(tmp_path), "--input", "/dev/zero"])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == ["Error: /dev/zero: not a regular file"]


def test_files_above_the_size_limits_are_refused_unread(tmp_path):
    assert (MAX_DATA_FILE_BYTES, MAX_LINE_BYTES, recipe_loader.MAX_RECIPE_BYTES) == (2 * 1024**3, 1024**2, 1024**2)
    path = tmp_path / "big.txt"
    with path.open("wb") as handle:
        handle.truncate(MAX_DATA_FILE_BYTES + 1)  # sparse: nothing is written
    expected = f"{path}: 2147483649 bytes, more than the 2 GiB a data file may have"
    for read in (READERS["parallel"], read_coco_captions, read_inputs):
        assert error_of(read, path) == expected
    with path.open("wb") as handle:
        handle.truncate(1024**2 + 1)
    assert error_of(load_recipe, path) == f"{path}: 1048577 bytes, more than the 1 MiB a recipe file may have"


def test_a_recipe_at_its_size_limit_is_read(tmp_path, monkeypatch):
    path = tmp_path / "r.yaml"
    path.write_text("task: toy\n")
    monkeypatch.setattr(recipe_loader, "MAX_RECIPE_BYTES", 10)
    assert load_recipe(path).task == "toy"
    monkeypatch.setattr(recipe_loader, "MAX_RECIPE_BYTES", 9)
    assert error_of(load_recipe, path) == f"{path}: 10 bytes, more than the 9 bytes a recipe file may have"


def test_a_recipe_at_its_size_limit_is_read_to_its_last_byte(tmp_path, monkeypatch):
    path = tmp_path / "r.yaml"
    path.write_text("task: toy\nseed: 12345")  # no line end: the last byte is a digit of the seed
    monkeypatch.setattr(recipe_loader, "MAX_RECIPE_BYTES", 21)
    assert load_recipe(path).seed == 12345


def test_the_size_limit_counts_gzip_files_decompressed(tmp_path, monkeypatch):
    monkeypatch.setattr(regular_files, "MAX_DATA_FILE_BYTES", 100)
    path = tmp_path / "lines.txt.gz"
    path.write_bytes(gzip.compress(b"a\n" * 50))
    assert len(list(numbered_lines(path))) == 50
    path.write_bytes(gzip.compress(b"a\n" * 50 + b"b"))
    assert path.stat().st_size < 100
    with pytest.raises(SeqtasksError) as error, reading(path):
        list(numbered_lines(path))
    assert str(error.value) == f"{path}: more than 100 bytes of text, the limit of a data file (a gzip file counts decompressed)"
    path.write_bytes(gzip.compress(b'{"images": []}' + b" " * 86))
    with pytest.raises(SeqtasksError) as error:  # 100 bytes: read, and found wanting
        read_coco_captions(path)
    assert str(error.value) == f"{path}: expected a JSON object with 'images' and 'annotations' lists"
    path.write_bytes(gzip.compress(b'{"images": []}' + b" " * 87))
    assert error_of(read_coco_captions, path) == (
        f"{path}: more than 100 bytes of text, the limit of a data file (a gzip file counts decompressed)"
    )


def test_a_gzip_file_past_the_size_limit_is_decompressed_no_further_than_one_byte_past_it(tmp_path, monkeypatch):
    monkeypatch.setattr(regular_files, "MAX_DATA_FILE_BYTES", 100)
    path = tmp_path / "captions.json.gz"
    # 101 bytes, then a broken end (no end-of-stream marker) that a reader going further would fail on
    path.write_bytes(gzip.compress(b" " * 101)[:-8])
    assert error_of(read_coco_captions, path) == (
        f"{path}: more than 100 bytes of text, the limit of a data file (a gzip file counts decompressed)"
    )


def test_a_line_above_the_line_limit_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(regular_files, "MAX_LINE_BYTES", 8)
    path = tmp_path / "lines.txt"
    path.write_bytes(b"12345678\r\n12345678")  # at the limit, with and without a line end
    assert list(numbered_lines(path)) == [(1, "12345678"), (2, "12345678")]
    for content, number in ((b"12345678\n123456789\n", 2), (b"123456789\r\n", 1), (b"123456789", 1)):
        path.write_bytes(content)
        assert error_of(lambda p: list(numbered_lines(p)), path) == f"{path}:{number}: line longer than the limit of 8 bytes"


def test_a_long_line_is_read_only_up_to_the_line_limit(tmp_path, monkeypatch):
    """A line is read in pieces of at most the limit and a line end: the file's size limit is not reached yet."""
    monkeypatch.setattr(regular_files, "MAX_DATA_FILE_BYTES", 100)
    monkeypatch.setattr(regular_files, "MAX_LINE_BYTES", 98)
    path = tmp_path / "lines.txt.gz"
    path.write_bytes(gzip.compress(b"a" * 101))  # one line of 101 bytes, past both limits
    assert error_of(lambda p: list(numbered_lines(p)), path) == f"{path}:1: line longer than the limit of 98 bytes"


def _stdin(monkeypatch, stream):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(stream, encoding="utf-8"))


def test_predict_input_from_standard_input_keeps_blank_lines_and_loses_line_ends(monkeypatch):
    _stdin(monkeypatch, io.BytesIO(b"Hola.\r\n\n  \nAdi\xc3\xb3s"))
    assert read_inputs("-") == ["Hola.", "", "  ", "Adiós"]


def test_predict_input_from_standard_input_has_the_data_file_limits(monkeypatch, small_limits):
    with open("/dev/zero", "rb") as zero:  # `--input - < /dev/zero`: a line that never ends
        _stdin(monkeypatch, zero)
        assert error_of(read_inputs, "-") == "standard input:1: line longer than the limit of 1 KiB"
    _stdin(monkeypatch, io.BytesIO(b"a\n" * 2048 + b"b\n"))
    assert error_of(read_inputs, "-") == "standard input: more than 4 KiB of text, the limit of a data file (a gzip file counts decompressed)"
    _stdin(monkeypatch, io.BytesIO(b"fine\nbad \xff\n"))
    assert error_of(read_inputs, "-") == "standard input:2: not valid utf-8 (byte 5 of the line)"
