"""The fast tier's rule, enforced: a test that does slow work without the `slow` marker fails.

Slow work, by definition (docs/testing.md): training (`fit`, `train_on_batch`
of any Keras model), exporting (`tf.saved_model.save`), loading a SavedModel
(`tf.saved_model.load`), starting a process (`subprocess`, `os.fork`,
`os.posix_spawn`, `os.system`, the `os.exec*`/`os.spawn*` families) and the
fixtures that stand for them: the trained-run cache (`run_cache`), a fresh
Python process (`fresh_python`) and a fresh JAX process's environment
(`jax_env`). `tests/conftest.py` loads this plugin; a test that does any of
these while it runs, or while its fixtures are set up or torn down, fails
with a message naming what it did and the marker it lacks. The tiers then
cannot drift: a new test that trains lands in the slow tier or fails.

The guards wrap the Keras and TensorFlow functions once per process, the
first time an unmarked test runs, and watch processes through an audit hook
(`sys.addaudithook`), which sees every way Python starts one. Outside an
unmarked test (collection, the session's own fixtures, slow tests) they do
nothing.
"""

import functools
import sys

import pytest

SLOW_MARKER = "slow"
# The fixtures that train, export or start a process for their test.
SLOW_FIXTURES = {
    "run_cache": "uses the trained-run cache",
    "fresh_python": "starts a fresh Python process",
    "jax_env": "starts a fresh JAX process",
}
# Audit events of starting a process (https://docs.python.org/3/library/audit_events.html).
PROCESS_EVENTS = ("subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec", "os.system")

# The unmarked tests running now, innermost last (a test may run pytest in-process, which runs others).
_running = []
_installed = {"hook": False}


class TierError(pytest.fail.Exception):
    """Raised where an unmarked test does slow work; pytest reports it as the test's failure."""


def violation(nodeid, what):
    """The message of a test that does `what` without the marker."""
    return (
        f"{nodeid} {what} but is not marked `{SLOW_MARKER}`: such a test belongs to the slow tier "
        f"(add @pytest.mark.{SLOW_MARKER}, or `pytestmark = pytest.mark.{SLOW_MARKER}` for its module; "
        "docs/testing.md)"
    )


def _refuse(what):
    if _running:
        raise TierError(violation(_running[-1], what), pytrace=True)


def _audit(event, args):
    if _running and event in PROCESS_EVENTS:
        _refuse(f"starts a process ({event})")


def _guard(owner, name, what):
    """Wraps `owner.name` so that an unmarked test calling it fails; once per function."""
    original = getattr(owner, name)
    if getattr(original, "_tier_guarded", False):
        return

    @functools.wraps(original)
    def guarded(*args, **kwargs):
        _refuse(what)
        return original(*args, **kwargs)

    guarded._tier_guarded = True
    setattr(owner, name, guarded)


def install():
    """Installs the guards in this process (idempotent). Keras and TensorFlow are imported here."""
    if not _installed["hook"]:
        sys.addaudithook(_audit)
        _installed["hook"] = True
    import keras

    for name in ("fit", "train_on_batch"):
        # The backend's trainer defines them; wrap them where they are defined, so every model has them.
        owner = next(cls for cls in keras.Model.__mro__ if name in vars(cls))
        _guard(owner, name, f"trains (`{name}`)")
    try:
        import tensorflow as tf
    except ImportError:  # a backend without TensorFlow installed cannot export or load SavedModels
        return
    _guard(tf.saved_model, "save", "exports a SavedModel (`tf.saved_model.save`)")
    _guard(tf.saved_model, "load", "loads a SavedModel (`tf.saved_model.load`)")


def is_slow(item):
    return item.get_closest_marker(SLOW_MARKER) is not None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """An unmarked test's setup, call and teardown run under the guards."""
    if is_slow(item):
        yield
        return
    install()
    _running.append(item.nodeid)
    try:
        yield
    finally:
        _running.pop()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before any fixture is made: an unmarked test that asks for a slow fixture fails."""
    if is_slow(item):
        return
    for fixture in item.fixturenames:
        if fixture in SLOW_FIXTURES:
            raise TierError(violation(item.nodeid, f"{SLOW_FIXTURES[fixture]} (fixture `{fixture}`)"), pytrace=False)
