"""Reading text data files line by line, with errors that name the file and the line.

Only regular files are read, and within limits: a device such as /dev/zero
never ends and a FIFO blocks its reader, so both are refused before they are
opened; a data file holds at most MAX_DATA_FILE_BYTES of text (after gzip
decompression) in lines of at most MAX_LINE_BYTES.
"""

import contextlib
import errno
import gzip
import os
import stat
from pathlib import Path

from seqtasks.errors import SeqtasksError

MAX_DATA_FILE_BYTES = 2 * 1024**3
MAX_LINE_BYTES = 1024**2


def describe_size(size):
    """`2 GiB`, `1 MiB`, or `1000 bytes` where no unit divides `size`."""
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} bytes"


def _check_regular(info, path, limit, what):
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not stat.S_ISREG(info.st_mode):
        raise SeqtasksError(f"{path}: not a regular file")
    if info.st_size > limit:
        raise SeqtasksError(
            f"{path}: {info.st_size} bytes, more than the {describe_size(limit)} {what} may have"
        )


def open_regular_file(path, limit, what="a data file"):
    """`path` opened to read bytes, if it is a regular file of at most `limit` bytes.

    Anything else (a device, a FIFO, a socket) is a `SeqtasksError` raised
    before the file is opened; a missing file or a folder raises the
    `OSError` that opening it would. `what` names the file in the message.
    """
    _check_regular(os.stat(path), path, limit, what)
    # Without blocking, in case a FIFO took the file's place since the check.
    handle = os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY), "rb")
    try:
        _check_regular(os.fstat(handle.fileno()), path, limit, what)
        os.set_blocking(handle.fileno(), True)
    except BaseException:
        handle.close()
        raise
    return handle


@contextlib.contextmanager
def _opened(path):
    """The bytes of the data file `path`, decompressed when it is gzip."""
    with open_regular_file(path, MAX_DATA_FILE_BYTES) as handle:
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
        content = data.read(MAX_DATA_FILE_BYTES + 1)
    if len(content) > MAX_DATA_FILE_BYTES:
        raise SeqtasksError(_too_much_text(path))
    return content


def _too_much_text(path):
    return f"{path}: more than {describe_size(MAX_DATA_FILE_BYTES)} of text once decompressed, the limit of a data file"


@contextlib.contextmanager
def reading(path, encoding="utf-8"):
    """Turns the ways opening or reading `path` fails into one-line `SeqtasksError`s."""
    try:
        yield
    except FileNotFoundError:
        raise SeqtasksError(f"{path}: no such data file") from None
    except IsADirectoryError:
        raise SeqtasksError(f"{path}: is a folder, expected a data file") from None
    except LookupError:
        raise SeqtasksError(f"{path}: unknown text encoding {encoding!r}") from None
    except (OSError, EOFError) as error:
        raise SeqtasksError(f"{path}: cannot read: {getattr(error, 'strerror', None) or error}") from None


def numbered_lines(path, encoding="utf-8"):
    """Yields `(line number, line without its end)` of a plain or gzip text file.

    Bytes that are not valid `encoding` are an error naming the file and the
    line, and so is a line of more than MAX_LINE_BYTES. Wrap the loop in
    `reading(path)` for the file-level errors.
    """
    path = Path(path)
    "".encode(encoding)  # an unknown encoding fails here, before any reading
    total = 0
    with _opened(path) as lines:
        # a line of the most bytes comes whole with its end, `\r\n` at most
        for number, raw in enumerate(iter(lambda: lines.readline(MAX_LINE_BYTES + 2), b""), start=1):
            total += len(raw)
            if total > MAX_DATA_FILE_BYTES:
                raise SeqtasksError(_too_much_text(path))
            if len(raw.rstrip(b"\r\n")) > MAX_LINE_BYTES:
                raise SeqtasksError(f"{path}:{number}: line longer than the limit of {describe_size(MAX_LINE_BYTES)}")
            try:
                yield number, raw.decode(encoding).rstrip("\r\n")
            except UnicodeDecodeError as error:
                raise SeqtasksError(
                    f"{path}:{number}: not valid {encoding} (byte {error.start + 1} of the line)"
                ) from None
