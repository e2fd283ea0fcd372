"""Lets the suite run on mutmut's copy of the package (docs/testing.md).

mutmut wraps every function in a trampoline with `functools.wraps`, which
`inspect.signature` sees through but `inspect.getfullargspec` does not: Keras
reads a layer's constructor arguments with the latter and fails on the bare
`(*args, **kwargs)` of the wrapper.
"""

import inspect

_getfullargspec = inspect.getfullargspec


def _getfullargspec_through_trampolines(function):
    if getattr(getattr(function, "__code__", None), "co_name", "") == "_trampoline_wrapper":
        function = inspect.unwrap(function)
    return _getfullargspec(function)


inspect.getfullargspec = _getfullargspec_through_trampolines
