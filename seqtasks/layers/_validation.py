"""Argument checks and initializer cloning shared by the seqtasks layers (not public).

Error messages follow the keras-hub style: what was expected, then
`Received: name=value`.
"""

import numbers

import keras


def check_positive_int(value, name):
    # `bool` subclasses `int`: without the explicit test `units=True` would pass as 1.
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"Expected a positive integer. Received: {name}={value!r}")


def check_optional_positive_int(value, name):
    if value is not None:
        check_positive_int(value, name)


def check_choice(value, choices, name):
    if value not in choices:
        # The choices in their declared order, so the message is the same in every run.
        options = ", ".join(repr(choice) for choice in choices)
        raise ValueError(f"Expected one of {{{options}}}. Received: {name}={value!r}")


def check_rate(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value < 1.0:
        raise ValueError(f"Expected a rate in [0, 1). Received: {name}={value!r}")


def clone_initializer(initializer):
    """A fresh copy of `initializer`, for one weight or sublayer.

    A Keras 3 initializer without a seed picks one when constructed and then
    returns the same values at every call, so an object shared by two weights
    of one shape would initialise them identically. A copy made from the
    config draws its own seed (an integer seed, set on purpose, is kept).
    """
    initializer = keras.initializers.get(initializer)
    if not isinstance(initializer, keras.initializers.Initializer):
        return initializer
    # A `SeedGenerator` seed already gives new values at each call; copies
    # would restart it and repeat the first draw.
    if isinstance(getattr(initializer, "seed", None), keras.random.SeedGenerator):
        return initializer
    return initializer.__class__.from_config(initializer.get_config())
