"""Lets the suite run on mutmut's copy of the package (docs/testing.md).

mutmut wraps every function in a trampoline with `functools.wraps`, which
`inspect.signature` sees through but `inspect.getfullargspec` does not: Keras
reads a layer's constructor arguments with the latter and fails on the bare
`(*args, **kwargs)` of the wrapper.
"""

import inspect
import json
import math
from pathlib import Path

_getfullargspec = inspect.getfullargspec


# The wrapper's name: `_trampoline_wrapper` in mutmut 3.8.0's generated code, `trampoline` in 3.8.1's
# `mutmut.mutation.trampoline`.
_TRAMPOLINES = ("_trampoline_wrapper", "trampoline")


def _getfullargspec_through_trampolines(function):
    if getattr(getattr(function, "__code__", None), "co_name", "") in _TRAMPOLINES and hasattr(function, "__wrapped__"):
        function = inspect.unwrap(function)
    return _getfullargspec(function)


inspect.getfullargspec = _getfullargspec_through_trampolines


def fastest_first(items):
    """Orders a mutant's tests by the durations mutmut measured, fastest first.

    mutmut stops at the first failing test but hands the tests over in the
    arbitrary order of a set: most mutants are killed by a quick unit test, and
    with it first they no longer wait for a `fit` or a layer contract test.
    """
    try:
        durations = json.loads(Path("mutmut-stats.json").read_text())["duration_by_test"]
    except (OSError, ValueError, KeyError):
        return
    items.sort(key=lambda item: durations.get(item.nodeid, math.inf))
