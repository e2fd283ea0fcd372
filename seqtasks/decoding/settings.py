"""The decoding settings, declared once.

Each `Setting` of `SETTINGS` says its name, dtype, default, bounds, meaning
and which searches read it; the rules between settings are declared with
them (`at_most`, `needs_attention`, a setting that only beam search reads).
Everything else is made from this table:

- the recipe's `model.decoding` (`seqtasks.recipe.schema.DecodingConfig`,
  its bounds and checks) and so `docs/recipe-reference.md`;
- an export's `with_settings` and `with_prefix` inputs, their dtypes and
  in-graph checks (`seqtasks.encoder_decoder.settings_inputs`), and the
  export's own defaults (the recipe's values, kept in the SavedModel);
- `seqtasks predict`'s flags, the keyword check of `seqtasks.load(...)`'s
  `translate` (`problems`), the model card's table, and the page's controls
  with their bounds (`as_json`, served by `seqtasks serve`);
- the search that reads them (`seqtasks.decoding.search`).

A new setting is one `Setting` here and the search code that reads it.
"""

from dataclasses import dataclass

from seqtasks.utils.bounds import MAX_SEED, MAX_VOCAB

# A search holds batch x beam x length hypotheses, and beams much wider than 10 seldom help
# translation (Koehn and Knowles 2017) while costing as much again.
MAX_BEAM_WIDTH = 16
MAX_DECODE_LENGTH = 256
# One exported graph blocks any n-gram size up to this (`beam_search.repeated_ngram_bans`).
MAX_NGRAM_SIZE = 10
# Outputs longer than ten times their source are not translations; `max_length` bounds them anyway.
MAX_LENGTH_FACTOR = 10.0

SEARCHES = ("greedy", "beam", "sampling")
# The setting whose value above 0 samples instead of searching.
SAMPLING_SWITCH = "num_samples"


@dataclass(frozen=True)
class Setting:
    """One decoding setting.

    Args:
        name: its name everywhere (recipe field, signature input, keyword; `--name-with-dashes` as a flag).
        dtype: `"int32"`, `"int64"` or `"float32"`, the signature input's.
        default: the value of a recipe that leaves it out.
        low, high: the bounds, both included.
        label: a few words for a form.
        meaning: what it does, one or two sentences.
        searches: the searches that read it (`SEARCHES`); one that only beam
            search reads must stay at its default when sampling.
        at_most: `(setting, setting_when_sampling)`: also at most the first's
            value, or the second's when sampling.
        needs_attention: a model without attention takes only its default.
    """

    name: str
    dtype: str
    default: float
    low: float
    high: float
    label: str
    meaning: str
    searches: tuple = SEARCHES
    at_most: tuple = ()
    needs_attention: bool = False

    @property
    def integer(self):
        return self.dtype.startswith("int")

    @property
    def python_type(self):
        return int if self.integer else float

    @property
    def beam_only(self):
        return self.searches == ("beam",)

    def high_for(self, attends=True):
        """The upper bound for a model with (or without) attention."""
        return self.default if self.needs_attention and not attends else self.high

    def range_text(self, attends=True):
        note = " (this model has no attention to cover)" if self.needs_attention and not attends else ""
        return f"{self.low}..{self.high_for(attends)}{note}"


SETTINGS = (
    Setting("beam_width", "int32", 1, 1, MAX_BEAM_WIDTH, "Beam width",
            "Hypotheses kept per step; 1 is greedy search.", ("greedy", "beam")),
    Setting("n_best", "int32", 1, 1, MAX_BEAM_WIDTH, "N-best",
            "Hypotheses returned per input, best first (beam search keeps at most beam_width, sampling draws "
            "num_samples); `seqtasks predict --n-best K` shows them.", at_most=("beam_width", SAMPLING_SWITCH)),
    Setting("max_length", "int32", 50, 1, MAX_DECODE_LENGTH, "Max length", "Most tokens a decoded output may have."),
    Setting("length_penalty", "float32", 0.0, 0.0, 10.0, "Length penalty",
            "GNMT length penalty exponent alpha (0: none); the length leaves out the end token, as in GNMT."),
    Setting("coverage_penalty", "float32", 0.0, 0.0, 10.0, "Coverage penalty",
            "GNMT coverage penalty beta (0: none): an ended hypothesis adds beta * sum over source positions of "
            "log(min(attention summed over its steps, 1)), so outputs that leave source words unread rank lower.",
            ("beam",), needs_attention=True),
    Setting("no_repeat_ngram_size", "int32", 0, 0, MAX_NGRAM_SIZE, "No repeated n-grams of",
            "Beam search never repeats an n-gram of this size within an output (0: no blocking).", ("beam",)),
    Setting(SAMPLING_SWITCH, "int32", 0, 0, MAX_BEAM_WIDTH, "Samples (0: search)",
            "Outputs drawn at random per input instead of searching (0: search); they come back best first."),
    Setting("temperature", "float32", 1.0, 0.01, 100.0, "Temperature",
            "Sampling: logits are divided by it (below 1 sharper, above 1 flatter).", ("sampling",)),
    Setting("top_k", "int32", 0, 0, MAX_VOCAB, "Top-k (0: all)",
            "Sampling: draw among the k most probable tokens only (0: all).", ("sampling",)),
    Setting("top_p", "float32", 1.0, 0.01, 1.0, "Top-p",
            "Sampling: draw among the fewest most probable tokens whose probability reaches top_p (nucleus).",
            ("sampling",)),
    Setting("seed", "int64", 0, 0, MAX_SEED, "Seed",
            "Sampling: the same seed gives an input the same samples, in any batch.", ("sampling",)),
    Setting("length_factor", "float32", 0.0, 0.0, MAX_LENGTH_FACTOR, "Length factor (0: none)",
            "An output of a model that reads tokens ends after at most length_factor x (its source's tokens + 1) "
            "tokens, its end token included, as tensorflow/nmt's decoding_length_factor (0: max_length alone)."),
)
NAMES = tuple(setting.name for setting in SETTINGS)
BY_NAME = {setting.name: setting for setting in SETTINGS}
# What exports made before the beam search preferences and sampling existed take.
FIRST_SETTINGS = NAMES[:4]


def defaults():
    """`{name: default}` of every setting."""
    return {setting.name: setting.default for setting in SETTINGS}


def samples(switch):
    """Whether a value of `SAMPLING_SWITCH` asks for sampling (a number above 0; anything else is checked later)."""
    return isinstance(switch, (int, float)) and not isinstance(switch, bool) and switch > 0


def filled(given, own):
    """The settings a call decodes with: those `given`, and `own` (an export's values) for those it leaves out.

    A beam search preference the call leaves out takes its default when the
    call samples, for sampling reads none: an export whose recipe blocks
    repeated n-grams still samples when asked to, and a preference a
    sampling call names is still an error (`problems`).
    """
    values = {**own, **given}
    if samples(values.get(SAMPLING_SWITCH, 0)):
        for setting in SETTINGS:
            if setting.beam_only and setting.name in values and setting.name not in given:
                values[setting.name] = setting.default
    return values


def values_of(settings):
    """Every setting's value: `settings` is a mapping of some of them (the rest take their defaults) or an object
    with every one as an attribute (a recipe's `model.decoding`)."""
    if hasattr(settings, "keys"):
        unknown = sorted(set(settings) - set(NAMES))
        if unknown:
            raise ValueError(f"{unknown[0]}: not a decoding setting; expected some of {list(NAMES)}")
        return {**defaults(), **settings}
    return {name: getattr(settings, name) for name in NAMES}


def problems(values, attends=True):
    """What is wrong with `values` (every setting's), as `(name, message)` pairs, each message naming the setting.

    Types and bounds first; the rules between settings only once every
    value is a number in its bounds.
    """
    found = []
    for setting in SETTINGS:
        value = values[setting.name]
        number = isinstance(value, int) or (not setting.integer and isinstance(value, float))
        if isinstance(value, bool) or not number:
            kind = "an integer" if setting.integer else "a number"
            found.append((setting.name, f"{setting.name}: expected {kind}; got {value!r}"))
        elif not setting.low <= value <= setting.high_for(attends):
            found.append((setting.name, f"{setting.name}: expected {setting.range_text(attends)}; got {value}"))
    return found or relation_problems(values)


def relation_problems(values):
    """The rules between settings broken by `values`, as `(name, message)` pairs."""
    found = []
    sampling = values[SAMPLING_SWITCH] > 0
    for setting in SETTINGS:
        value = values[setting.name]
        if setting.at_most:
            searched, sampled = setting.at_most
            cap = values[sampled] if sampling else values[searched]
            if value > cap:
                found.append((setting.name, f"{setting.name}: expected {setting.low}..{cap} "
                              f"({searched}, or {sampled} when sampling); got {value}"))
        if setting.beam_only and sampling and value != setting.default:
            found.append((setting.name, f"{setting.name}: a beam search preference; expected {setting.default} when "
                          f"sampling ({SAMPLING_SWITCH} {values[SAMPLING_SWITCH]}); got {value}"))
    return found


def as_json(names=NAMES, attends=True):
    """The settings `names` as a form shows them: name, label, meaning, integer, min, max, at_most, searches."""
    return [
        {"name": s.name, "label": s.label, "meaning": s.meaning, "integer": s.integer, "min": s.low,
         "max": s.high_for(attends), "at_most": list(s.at_most), "searches": list(s.searches)}
        for s in SETTINGS
        if s.name in names
    ]
