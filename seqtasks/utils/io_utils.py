"""Writes that never leave a half-written file or folder behind."""

import contextlib
import json
import os
import re
import shutil
import socket
import tempfile
import threading
import time
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
    """Writes `text` (UTF-8) to `path` through a temporary file and a rename."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path, data):
    """Writes `data` to `path` through a temporary file and a rename."""
    path = Path(path)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        # mkstemp makes the file private; give it the usual permissions.
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_json_atomic(path, data):
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


_VERSION = re.compile(r"0|[1-9][0-9]*")  # one name per number: not `07`, `+7` or another script's digits


def versions(root):
    """The integer version folders of `root` (`root/1`, `root/2`, ...), as `{number: path}`."""
    root = Path(root)
    if not root.is_dir():
        return {}
    return {int(p.name): p for p in root.iterdir() if _VERSION.fullmatch(p.name) and p.is_dir()}


def next_version_dir(root):
    """`root/<n>` for the next integer version, as TensorFlow Serving expects."""
    return Path(root) / str(max(versions(root), default=0) + 1)


# A staging folder of `publish_version` is named `.tmp-<host>-<pid>-<random>`, so
# a later export can tell one left by a killed process. Any staging folder this
# old is stale too: one of another host (a shared file system), one named as
# earlier seqtasks did (`.<n>.tmp-*`), one whose process id was reused.
STALE_STAGING_SECONDS = 24 * 3600
_STAGING = re.compile(r"^\.tmp-(?P<host>.+)-(?P<pid>[0-9]+)-[^-]+$")
_OLD_STAGING = re.compile(r"^\.[0-9]+\.tmp-[^-]+$")
VERSIONS_LOCK = ".versions.lock"
_VERSION_LOCKS = threading.Lock()


def _host():
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


def _running(pid):
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale_staging(root, now=None):
    """Removes the staging folders in `root` that no export is writing any more; returns their names.

    One is stale when the process that made it on this host has ended (it
    was killed), or when it is older than `STALE_STAGING_SECONDS`. A folder
    that cannot be removed is left.
    """
    now = time.time() if now is None else now
    host, removed = _host(), []
    for path in sorted(Path(root).iterdir()) if Path(root).is_dir() else []:
        match = _STAGING.match(path.name)
        if not match and not _OLD_STAGING.match(path.name):
            continue
        try:
            old = now - path.lstat().st_mtime > STALE_STAGING_SECONDS
        except OSError:
            continue
        ours = match is not None and match["host"] == host
        if old or (ours and not _running(int(match["pid"]))):
            shutil.rmtree(path, ignore_errors=True)
            if not os.path.lexists(path):
                removed.append(path.name)
    return removed


@contextlib.contextmanager
def _versions_locked(root):
    """Holds the lock that orders the publishers of versions in `root`: threads, and processes through `flock`.

    The lock is on the folder itself; where a file system cannot lock a
    folder (NFS), on the file `root/.versions.lock`, which stays. The kernel
    releases it however the process ends, so a killed export blocks nobody.
    """
    with _VERSION_LOCKS:
        try:
            import fcntl
        except ImportError:  # not POSIX: threads only
            yield
            return
        fd = os.open(root, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            os.close(fd)
            fd = os.open(Path(root) / VERSIONS_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
        try:
            yield
        finally:
            os.close(fd)


def publish_version(write, root, unchanged=None, finish=None):
    """Publishes a new integer version `root/<n>` of what `write(folder)` writes; never replaces a version.

    `write` fills a hidden staging folder in `root`. Only then, under a lock
    on `root`, is the number chosen, the next after the highest existing
    version (skipping any name already taken by something else), and the
    folder renamed to it: concurrent publishers get distinct versions, and a
    crash leaves no half-written version. Under the same lock
    `unchanged(newest)`, when given, may say the newest version holds the same
    thing already: then nothing is published. `finish(folder, version)` writes
    what needs the version's final path just before the rename. Staging
    folders that killed publishers left (`remove_stale_staging`) are removed
    first.

    Returns `(folder, True)` for the new version, or `(newest version, False)`.
    """
    root = Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(root)
        staging = Path(tempfile.mkdtemp(dir=root, prefix=f".tmp-{_host()}-{os.getpid()}-"))
    except OSError as error:
        raise SeqtasksError(f"{root}: cannot write the export: {error.strerror}") from None
    try:
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes the folder private; servers often run as another user
        write(str(staging))
        with _versions_locked(root):
            numbers = versions(root)
            if numbers and unchanged is not None and unchanged(numbers[max(numbers)]):
                shutil.rmtree(staging, ignore_errors=True)
                return numbers[max(numbers)], False
            number = max(numbers, default=0) + 1
            while os.path.lexists(root / str(number)):  # a file or link of that name: never replaced
                number += 1
            if finish is not None:
                finish(str(staging), root / str(number))
            os.rename(staging, root / str(number))
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise SeqtasksError(
            f"{root}: writing the new version failed ({error.strerror or error}); no version was added "
            "and earlier versions are untouched"
        ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return root / str(number), True


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
