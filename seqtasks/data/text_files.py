"""Reading text data files line by line, with errors that name the file and the line.

Only regular files are read, and within the limits of `seqtasks.utils.regular_files`:
a data file holds at most MAX_DATA_FILE_BYTES of text (after gzip
decompression) in lines of at most MAX_LINE_BYTES.
"""

import contextlib
import gzip
from pathlib import Path

from seqtasks.utils import regular_files
from seqtasks.errors import SeqtasksError
from seqtasks.utils.regular_files import describe_size, open_regular_file


@contextlib.contextmanager
def _opened(path):
    """The bytes of the data file `path`, decompressed when it is gzip."""
    with open_regular_file(path, regular_files.MAX_DATA_FILE_BYTES) as handle:
        packed = handle.read(2) == b"\x1f\x8b"
        handle.seek(0)
        if not packed:
            yield handle
            return
        with gzip.GzipFile(fileobj=handle, mode="rb") as data:
            yield data


def read_data_bytes(path):
    """The whole content of a plain or gzip data file, decompressed; at most MAX_DATA_FILE_BYTES."""
    with _opened(path) as data:
        content = data.read(regular_files.MAX_DATA_FILE_BYTES + 1)
    if len(content) > regular_files.MAX_DATA_FILE_BYTES:
        raise SeqtasksError(_too_much_text(path))
    return content


def _too_much_text(path):
    return f"{path}: more than {describe_size(regular_files.MAX_DATA_FILE_BYTES)} of text, the limit of a data file (a gzip file counts decompressed)"


@contextlib.contextmanager
def reading(path, encoding="utf-8"):
    """Turns the ways opening or reading `path` fails into one-line `SeqtasksError`s."""
    try:
        with regular_files.reading_errors(path, "data file", "a data file"):
            yield
    except LookupError:
        raise SeqtasksError(f"{path}: unknown text encoding {encoding!r}") from None


def numbered_lines(path, encoding="utf-8"):
    """Yields `(line number, line without its end)` of a plain or gzip text file.

    Bytes that are not valid `encoding` are an error naming the file and the
    line, and so is a line of more than MAX_LINE_BYTES. Wrap the loop in
    `reading(path)` for the file-level errors.
    """
    path = Path(path)
    "".encode(encoding)  # an unknown encoding fails here, before any reading
    with _opened(path) as lines:
        yield from stream_lines(lines, path, encoding)


def stream_lines(stream, name, encoding="utf-8"):
    """`numbered_lines` of a binary stream (standard input), within the same limits; `name` starts the errors."""
    total = 0
    # a line of the most bytes comes whole with its end, `\r\n` at most
    for number, raw in enumerate(iter(lambda: stream.readline(regular_files.MAX_LINE_BYTES + 2), b""), start=1):
        total += len(raw)
        if total > regular_files.MAX_DATA_FILE_BYTES:
            raise SeqtasksError(_too_much_text(name))
        if len(raw.rstrip(b"\r\n")) > regular_files.MAX_LINE_BYTES:
            raise SeqtasksError(f"{name}:{number}: line longer than the limit of {describe_size(regular_files.MAX_LINE_BYTES)}")
        try:
            yield number, raw.decode(encoding).rstrip("\r\n")
        except UnicodeDecodeError as error:
            raise SeqtasksError(f"{name}:{number}: not valid {encoding} (byte {error.start + 1} of the line)") from None
