"""The `with_settings` signature's inputs: the decoding settings per request.

An export's `serving_default` decodes with the recipe's `model.decoding`; its
`with_settings` signature takes the settings as graph inputs, so they change
without exporting again: beam width, n-best, maximum length and length
penalty (since issue 31), the beam search preferences (coverage penalty,
n-gram blocking) and sampling (number of samples, temperature, top-k, top-p,
seed). Each is a `[None]` tensor, as TensorFlow Serving's row format
(`instances`) gives every input a batch axis: the first value is used and
every other must equal it (a columnar request may send one). The bounds are
the recipe's (`seqtasks.recipe.schema`), so a request may ask for anything a
recipe may; `seqtasks serve` fills the settings a request leaves out with the
recipe's, so clients written for the first four keep working.
"""

from seqtasks.recipe.schema import (
    MAX_BEAM_WIDTH,
    MAX_COVERAGE_PENALTY,
    MAX_DECODE_LENGTH,
    MAX_LENGTH_PENALTY,
    MAX_NGRAM_SIZE,
    MAX_SEED,
    MAX_TEMPERATURE,
    MAX_VOCAB,
)

SETTINGS = (
    "beam_width", "n_best", "max_length", "length_penalty", "coverage_penalty", "no_repeat_ngram_size",
    "num_samples", "temperature", "top_k", "top_p", "seed",
)
# The settings of exports made before the preferences and sampling existed.
FIRST_SETTINGS = SETTINGS[:4]
_TYPES = {
    "beam_width": "int32", "n_best": "int32", "max_length": "int32", "length_penalty": "float32",
    "coverage_penalty": "float32", "no_repeat_ngram_size": "int32", "num_samples": "int32",
    "temperature": "float32", "top_k": "int32", "top_p": "float32", "seed": "int64",
}
SETTINGS_SIGNATURE = "with_settings"
ATTENTION_SIGNATURE = "attention"
SCORE_SIGNATURE = "score"
PREFIX_SIGNATURE = "with_prefix"

__all__ = [
    "ATTENTION_SIGNATURE", "FIRST_SETTINGS", "PREFIX_SIGNATURE", "SCORE_SIGNATURE", "MAX_BEAM_WIDTH", "MAX_DECODE_LENGTH", "MAX_LENGTH_PENALTY", "SETTINGS",
    "SETTINGS_SIGNATURE", "read_settings", "settings_specs",
]


def settings_specs():
    """The settings' `tf.TensorSpec`s, `[None]` each, in `SETTINGS` order (the seed is int64: 0..2**32-1)."""
    import tensorflow as tf

    return [tf.TensorSpec([None], getattr(tf, _TYPES[name]), name=name) for name in SETTINGS]


def read_settings(*values, attends=True):
    """The settings (`SETTINGS` order) as checked scalars; a request breaking a bound fails naming the setting.

    `attends`: whether the model has attention, without which a coverage
    penalty is refused. The beam search preferences are refused with sampling,
    as in a recipe.
    """
    import tensorflow as tf

    values = dict(zip(SETTINGS, values, strict=True))
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
        width, best, samples = v["beam_width"], v["n_best"], v["num_samples"]
        most = tf.where(samples > 0, samples, width)
        bounds = [
            (width >= 1, width <= MAX_BEAM_WIDTH, "beam_width: expected 1..{}; got {}", (MAX_BEAM_WIDTH, width)),
            (best >= 1, best <= most, "n_best: expected 1..{} (beam_width, or num_samples when sampling); got {}",
             (most, best)),
            (v["max_length"] >= 1, v["max_length"] <= MAX_DECODE_LENGTH, "max_length: expected 1..{}; got {}",
             (MAX_DECODE_LENGTH, v["max_length"])),
        ]
        for name, low, high in (
            ("length_penalty", 0.0, MAX_LENGTH_PENALTY),
            ("coverage_penalty", 0.0, MAX_COVERAGE_PENALTY if attends else 0.0),
            ("no_repeat_ngram_size", 0, MAX_NGRAM_SIZE),
            ("num_samples", 0, MAX_BEAM_WIDTH),
            ("temperature", 0.01, MAX_TEMPERATURE),
            ("top_k", 0, MAX_VOCAB),
            ("top_p", 0.01, 1.0),
            ("seed", 0, MAX_SEED),
        ):
            value = v[name]
            note = " (this model has no attention to cover)" if name == "coverage_penalty" and not attends else ""
            bounds.append((value >= low, value <= high, f"{name}: expected {low}..{high}{note}; got {{}}", (value,)))
        for name in ("coverage_penalty", "no_repeat_ngram_size"):
            bounds.append((
                tf.logical_or(samples <= 0, tf.equal(v[name], 0)), True,
                f"{name}: a beam search preference; expected 0 when sampling (num_samples {{}}); got {{}}",
                (samples, v[name]),
            ))
    asserts = [
        tf.debugging.Assert(tf.logical_and(low, high), [tf.strings.format(template, args)])
        for low, high, template, args in bounds
    ]
    with tf.control_dependencies(asserts):
        return tuple(tf.identity(value) for value in v.values())
