"""Keeps TensorFlow's start-up log lines off a command's standard error, unless the user asks for them.

TensorFlow's native libraries log while they load (oneDNN, CUDA, CPU
features) before their logging reads `TF_CPP_MIN_LOG_LEVEL`, so that variable
alone does not silence them: the import itself runs with file descriptor 2
pointed at a temporary file, which is shown only if the import fails.
"""

import contextlib
import importlib.abc
import importlib.util
import os
import sys
import tempfile

# Set only where the user has not: TensorFlow's C++ logging (3: errors that
# matter reach Python as exceptions), gRPC's (multi-worker runs).
QUIET_ENVIRONMENT = {"TF_CPP_MIN_LOG_LEVEL": "3", "GRPC_VERBOSITY": "ERROR"}


def quiet_tensorflow(module="tensorflow"):
    """Before `module` (TensorFlow) is imported: sets `QUIET_ENVIRONMENT` and makes its import silent.

    Does nothing to the import when `module` is imported already.
    """
    for name, value in QUIET_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    if module not in sys.modules and not any(
        isinstance(finder, _SilentImport) and finder.module == module for finder in sys.meta_path
    ):
        sys.meta_path.insert(0, _SilentImport(module))


@contextlib.contextmanager
def silenced_stderr():
    """Points file descriptor 2 at a temporary file; if the block fails, what it caught is written to stderr."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no standard error to silence
        yield
        return
    failed = False
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if failed:
                caught.seek(0)
                sys.stderr.write(caught.read().decode("utf-8", "replace"))


@contextlib.contextmanager
def dropped_native_stderr():
    """Points file descriptor 2 at the null device for the block: native libraries' chatter is dropped.

    For a model call: libjpeg writes warnings and errors about a damaged
    image straight to the process's stderr (`Bogus Huffman table
    definition`) before TensorFlow raises the error that names the image.
    Python's own `sys.stderr` writes go the same way meanwhile, so the block
    should only run the call.
    """
    try:
        saved = os.dup(2)
    except OSError:  # no standard error to silence
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


class _SilentImport(importlib.abc.MetaPathFinder):
    """Finds `module` as the other finders would and loads it with standard error silenced; once."""

    def __init__(self, module):
        self.module = module

    def find_spec(self, fullname, path, target=None):
        if fullname != self.module:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _SilentLoader(spec.loader)
        return spec


class _SilentLoader(importlib.abc.Loader):
    """Runs another loader's `exec_module` with standard error silenced; the module keeps that loader."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader
        with silenced_stderr():
            self.loader.exec_module(module)
