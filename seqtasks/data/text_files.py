"""Reading text data files line by line, with errors that name the file and the line."""

import contextlib
import gzip
from pathlib import Path

from seqtasks.errors import SeqtasksError


def _open_bytes(path):
    with open(path, "rb") as handle:
        magic = handle.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")


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
    line. Wrap the loop in `reading(path)` for the file-level errors.
    """
    path = Path(path)
    "".encode(encoding)  # an unknown encoding fails here, before any reading
    with _open_bytes(path) as lines:
        for number, raw in enumerate(lines, start=1):
            try:
                yield number, raw.decode(encoding).rstrip("\r\n")
            except UnicodeDecodeError as error:
                raise SeqtasksError(
                    f"{path}:{number}: not valid {encoding} (byte {error.start + 1} of the line)"
                ) from None
