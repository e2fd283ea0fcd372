"""Writes that never leave a half-written file or folder behind."""

import json
import os
import shutil
import tempfile
from pathlib import Path

from seqtasks.errors import SeqtasksError


def _umask():
    mask = os.umask(0)
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
    try:
        # mkdtemp makes the folder private; servers often run as another user.
        os.chmod(staging, 0o777 & ~_umask())
        write(str(staging))
        previous = None
        if destination.is_dir():  # a resumed run publishes its model again
            previous = Path(tempfile.mkdtemp(dir=destination.parent, prefix=f".{destination.name}.old-"))
            os.replace(destination, previous)
        os.replace(staging, destination)
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise SeqtasksError(
            f"{destination}: writing failed ({error.strerror or error}); nothing was "
            "written there and earlier versions are untouched"
        ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return destination


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
