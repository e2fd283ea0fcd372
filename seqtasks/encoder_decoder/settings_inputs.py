"""The `with_settings` and `with_prefix` inputs: the decoding settings per request, made from their declaration.

An export's `serving_default` decodes with the recipe's `model.decoding`; its
`with_settings` signature takes every setting of `seqtasks.decoding.settings`
as a graph input, so they change without exporting again. Each is a `[None]`
tensor, as TensorFlow Serving's row format (`instances`) gives every input a
batch axis: the first value is used and every other must equal it (a
columnar request may send one). The bounds and rules are the declaration's,
checked in the graph, so a request may ask for anything a recipe may. The
export keeps the recipe's values (`DEFAULTS_ATTRIBUTE`), with which
`seqtasks serve` and `seqtasks.load` fill the settings a request leaves out.
"""

import json

from seqtasks.decoding.settings import NAMES, SAMPLING_SWITCH, SETTINGS

# The export's attribute holding the recipe's settings, as JSON: `{name: value}`.
DEFAULTS_ATTRIBUTE = "decoding_defaults"


def settings_specs():
    """The settings' `tf.TensorSpec`s, `[None]` each, in declaration order."""
    import tensorflow as tf

    return [tf.TensorSpec([None], getattr(tf, setting.dtype), name=setting.name) for setting in SETTINGS]


def defaults_variable(decoding):
    """The recipe's settings (`model.decoding`) as a string variable an export keeps: JSON `{name: value}`."""
    import tensorflow as tf

    values = {name: getattr(decoding, name) for name in NAMES}
    return tf.Variable(json.dumps(values, sort_keys=True), trainable=False, dtype=tf.string)


def read_defaults(variable):
    """`{name: value}` of an export's `defaults_variable`."""
    return json.loads(variable.numpy().decode("utf-8"))


def read_settings(*values, attends=True):
    """The settings (declaration order) as checked scalars `{name: value}`; a request breaking a bound or a rule fails
    naming the setting.

    `attends`: whether the model has attention; without it a setting that
    `needs_attention` takes only its default.
    """
    import tensorflow as tf

    values = dict(zip((setting.name for setting in SETTINGS), values, strict=True))
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
        v = {name: value[0] for name, value in values.items()}
    sampling = v[SAMPLING_SWITCH] > 0
    bounds = []
    for setting in SETTINGS:
        value = v[setting.name]
        bounds.append((
            tf.logical_and(value >= setting.low, value <= setting.high_for(attends)),
            f"{setting.name}: expected {setting.range_text(attends)}; got {{}}", (value,),
        ))
        if setting.at_most:
            searched, sampled = setting.at_most
            cap = tf.where(sampling, v[sampled], v[searched])
            bounds.append((
                value <= cap, f"{setting.name}: expected {setting.low}..{{}} ({searched}, or {sampled} when sampling); "
                "got {}", (cap, value),
            ))
        if setting.beam_only:
            bounds.append((
                tf.logical_or(tf.logical_not(sampling), tf.equal(value, setting.default)),
                f"{setting.name}: a beam search preference; expected {setting.default} when sampling "
                f"({SAMPLING_SWITCH} {{}}); got {{}}", (v[SAMPLING_SWITCH], value),
            ))
    asserts = [tf.debugging.Assert(holds, [tf.strings.format(template, args)]) for holds, template, args in bounds]
    with tf.control_dependencies(asserts):
        return {name: tf.identity(value) for name, value in v.items()}
