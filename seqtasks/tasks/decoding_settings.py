"""The `with_settings` signature's inputs: beam width, n-best, maximum length and length penalty per request.

An export's `serving_default` decodes with the recipe's `model.decoding`; its
`with_settings` signature takes the four settings as graph inputs, so they
change without exporting again. Each is a `[None]` tensor, as TensorFlow
Serving's row format (`instances`) gives every input a batch axis: the first
value is used and every other must equal it (a columnar request may send
one). The bounds are the recipe's (`seqtasks.recipe.schema`), so a request
may ask for anything a recipe may.
"""

from seqtasks.recipe.schema import MAX_BEAM_WIDTH, MAX_DECODE_LENGTH, MAX_LENGTH_PENALTY

SETTINGS = ("beam_width", "n_best", "max_length", "length_penalty")
SETTINGS_SIGNATURE = "with_settings"
ATTENTION_SIGNATURE = "attention"

__all__ = [
    "ATTENTION_SIGNATURE", "MAX_BEAM_WIDTH", "MAX_DECODE_LENGTH", "MAX_LENGTH_PENALTY", "SETTINGS",
    "SETTINGS_SIGNATURE", "read_settings", "settings_specs",
]


def settings_specs():
    """The four settings' `tf.TensorSpec`s, `[None]` each, in `SETTINGS` order."""
    import tensorflow as tf

    return [
        tf.TensorSpec([None], tf.int32, name="beam_width"),
        tf.TensorSpec([None], tf.int32, name="n_best"),
        tf.TensorSpec([None], tf.int32, name="max_length"),
        tf.TensorSpec([None], tf.float32, name="length_penalty"),
    ]


def read_settings(beam_width, n_best, max_length, length_penalty):
    """The four settings as checked scalars; a request breaking a bound fails naming the setting."""
    import tensorflow as tf

    values = dict(zip(SETTINGS, (beam_width, n_best, max_length, length_penalty)))
    checks = []
    for name, value in values.items():
        checks.append(tf.debugging.Assert(tf.size(value) > 0, [f"{name}: expected a value; got none"]))
        with tf.control_dependencies(checks[-1:]):
            checks.append(
                tf.debugging.Assert(
                    tf.reduce_all(tf.equal(value, value[0])),
                    [f"{name}: expected one value for the whole request; got several"],
                )
            )
    with tf.control_dependencies(checks):
        width, best, length, penalty = (value[0] for value in values.values())
        bounds = [
            (width >= 1, width <= MAX_BEAM_WIDTH, "beam_width: expected 1..{}; got {}", (MAX_BEAM_WIDTH, width)),
            (best >= 1, best <= width, "n_best: expected 1..beam_width ({}); got {}", (width, best)),
            (length >= 1, length <= MAX_DECODE_LENGTH, "max_length: expected 1..{}; got {}", (MAX_DECODE_LENGTH, length)),
            (penalty >= 0.0, penalty <= MAX_LENGTH_PENALTY, "length_penalty: expected 0..{}; got {}",
             (MAX_LENGTH_PENALTY, penalty)),
        ]
    asserts = [
        tf.debugging.Assert(tf.logical_and(low, high), [tf.strings.format(template, args)])
        for low, high, template, args in bounds
    ]
    with tf.control_dependencies(asserts):
        return tuple(tf.identity(value) for value in (width, best, length, penalty))
