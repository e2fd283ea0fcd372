"""Writes that never leave a half-written file or folder behind."""

import json
import os
import shutil
import tempfile
from pathlib import Path

from seqtasks.errors import SeqtasksError


def _umask():
    """The process umask, read without changing it where Linux shows it.

    Setting it to read it back opens a moment in which files other threads
    create (TensorFlow writes checkpoints from its own) get no umask at all.
    """
    try:
        with open("/proc/self/status", "rb") as status:  # bytes: the process name may not decode
            for line in status:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def write_text_atomic(path, text):
    """Writes `text` to `path` through a temporary file and a rename."""
    path = Path(path)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        # mkstemp makes the file private; give it the usual permissions.
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_json_atomic(path, data):
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def next_version_dir(root):
    """`root/<n>` for the next integer version, as TensorFlow Serving expects."""
    root = Path(root)
    versions = [int(p.name) for p in root.glob("*") if p.is_dir() and p.name.isdigit()]
    return root / str(max(versions, default=0) + 1)


def publish_folder(write, destination):
    """Calls `write(folder)` on a temporary folder, then renames it to `destination`.

    A failure or a crash while writing leaves `destination` absent (never half
    written) and any earlier version untouched.
    """
    destination = Path(destination)
    try:
        destination.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=destination.parent, prefix=f".{destination.name}.tmp-"))
    except OSError as error:
        raise SeqtasksError(f"{destination.parent}: cannot write the export: {error.strerror}") from None
    previous = None
    try:
        # mkdtemp makes the folder private; servers often run as another user.
        os.chmod(staging, 0o777 & ~_umask())
        write(str(staging))
        if destination.is_dir():  # a resumed run publishes its model again
            previous = Path(tempfile.mkdtemp(dir=destination.parent, prefix=f".{destination.name}.old-"))
            os.replace(destination, previous)
        os.replace(staging, destination)
    except OSError as error:
        _clean_up(staging, previous, destination)
        raise SeqtasksError(
            f"{destination}: writing failed ({error.strerror or error}); nothing was "
            "written there and earlier versions are untouched"
        ) from None
    except BaseException:
        _clean_up(staging, previous, destination)
        raise
    if previous is not None:
        shutil.rmtree(previous, ignore_errors=True)
    return destination


def _clean_up(staging, previous, destination):
    """After a failed publish: removes the staging folder and puts an earlier version back."""
    shutil.rmtree(staging, ignore_errors=True)
    if previous is None:
        return
    if os.path.lexists(destination):  # never moved away, or the new version got there
        shutil.rmtree(previous, ignore_errors=True)
    else:
        try:
            os.replace(previous, destination)
        except OSError:
            pass  # left in .<name>.old-*, not deleted


def make_run_dir(output_dir, name, timestamp):
    """Creates `output_dir/name/timestamp` (with a suffix if it exists)."""
    base = Path(output_dir) / name
    try:
        base.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, 1000):
            run_dir = base / (timestamp if attempt == 1 else f"{timestamp}-{attempt}")
            try:
                run_dir.mkdir()
                return run_dir
            except FileExistsError:
                continue
    except OSError as error:
        raise SeqtasksError(f"{base}: cannot create the run folder: {error.strerror}") from None
    raise SeqtasksError(f"{base}: too many runs started at {timestamp}")
