"""Opening files to read only when they are regular files within a size limit.

A device such as /dev/zero never ends and a FIFO blocks its reader, so both
are refused before they are opened.
"""

import contextlib
import errno
import os
import stat

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
def reading_errors(path, missing, expected, error_type=SeqtasksError):
    """Turns the ways opening or reading `path` fails into one-line `error_type`s.

    A missing file is "no such `missing`", a folder "is a folder, expected
    `expected`", any other `OSError` (or a gzip stream cut short) "cannot read".
    """
    try:
        yield
    except FileNotFoundError:
        raise error_type(f"{path}: no such {missing}") from None
    except IsADirectoryError:
        raise error_type(f"{path}: is a folder, expected {expected}") from None
    except (OSError, EOFError) as error:
        raise error_type(f"{path}: cannot read: {getattr(error, 'strerror', None) or error}") from None
