"""The decoding settings' declaration (`seqtasks.decoding.settings`): its bounds, checks, messages and form table.

Each expectation is written out here (the bounds of the declaration's table,
the messages word for word), not read back from the code under test.

Every surface of the decoding settings lists exactly the declared ones, with the declared bounds.

`seqtasks/decoding/settings.py` declares them once; the recipe schema and its
reference page, the export's signature inputs and in-graph checks, `predict`'s
flags, the API's check, the model card and the page's controls (served by
`seqtasks serve`) are made from that table. A setting added there shows on
every surface, and none can list a setting or a bound of its own.

The decoding controls from the command line and the Python API: `predict` flags, `with_settings` inputs.
"""

import dataclasses
import re
from types import SimpleNamespace

import pytest

import seqtasks
from seqtasks.decoding.settings import (
    BY_NAME,
    FIRST_SETTINGS,
    NAMES,
    SETTINGS,
    as_json,
    defaults,
    problems,
    relation_problems,
    values_of,
)
from seqtasks.errors import SeqtasksError
from tests.conftest import REPO, seqtasks_command
from tests.support.serving_support import tiny_translation_export


# name: (integer, default, low, high, high without attention, at_most, searches)
TABLE = {
    "beam_width": (True, 1, 1, 16, 16, [], ["greedy", "beam"]),
    "n_best": (True, 1, 1, 16, 16, ["beam_width", "num_samples"], ["greedy", "beam", "sampling"]),
    "max_length": (True, 50, 1, 256, 256, [], ["greedy", "beam", "sampling"]),
    "length_penalty": (False, 0.0, 0.0, 10.0, 10.0, [], ["greedy", "beam", "sampling"]),
    "coverage_penalty": (False, 0.0, 0.0, 10.0, 0.0, [], ["beam"]),
    "no_repeat_ngram_size": (True, 0, 0, 10, 10, [], ["beam"]),
    "num_samples": (True, 0, 0, 16, 16, [], ["greedy", "beam", "sampling"]),
    "temperature": (False, 1.0, 0.01, 100.0, 100.0, [], ["sampling"]),
    "top_k": (True, 0, 0, 1_000_000, 1_000_000, [], ["sampling"]),
    "top_p": (False, 1.0, 0.01, 1.0, 1.0, [], ["sampling"]),
    "seed": (True, 0, 0, 2**32 - 1, 2**32 - 1, [], ["sampling"]),
    "length_factor": (False, 0.0, 0.0, 10.0, 10.0, [], ["greedy", "beam", "sampling"]),
}
DEFAULTS = {
    "beam_width": 1, "n_best": 1, "max_length": 50, "length_penalty": 0.0, "coverage_penalty": 0.0,
    "no_repeat_ngram_size": 0, "num_samples": 0, "temperature": 1.0, "top_k": 0, "top_p": 1.0, "seed": 0,
    "length_factor": 0.0,
}
NO_ATTENTION = " (this model has no attention to cover)"


def _with(**changes):
    return {**DEFAULTS, **changes}


def test_the_table_names_each_setting_once_in_order_with_its_type_and_searches():
    assert NAMES == tuple(TABLE) and [s.name for s in SETTINGS] == list(TABLE)
    for name, (integer, _, _, _, _, _, searches) in TABLE.items():
        setting = BY_NAME[name]
        assert setting.integer is integer and setting.python_type is (int if integer else float), name
        assert setting.beam_only is (searches == ["beam"]), name
    assert BY_NAME["seed"].dtype == "int64" and BY_NAME["beam_width"].dtype == "int32"


def test_defaults_are_each_setting_s_default_of_its_type():
    got = defaults()
    assert got == DEFAULTS
    assert all(type(got[name]) is type(DEFAULTS[name]) for name in DEFAULTS)
    assert got is not defaults()  # a fresh dict each time: a caller may change its copy


def test_the_upper_bound_is_the_default_where_a_setting_needs_attention_the_model_lacks():
    for name, (_, _, _, high, without, _, _) in TABLE.items():
        setting = BY_NAME[name]
        assert setting.high_for() == high and setting.high_for(True) == high, name
        assert setting.high_for(False) == without, name


def test_range_text_names_both_bounds_and_why_a_setting_is_held_at_its_default():
    assert BY_NAME["coverage_penalty"].range_text() == "0.0..10.0"
    assert BY_NAME["coverage_penalty"].range_text(True) == "0.0..10.0"
    assert BY_NAME["coverage_penalty"].range_text(False) == "0.0..0.0" + NO_ATTENTION
    assert BY_NAME["beam_width"].range_text(False) == "1..16"
    assert BY_NAME["temperature"].range_text() == "0.01..100.0"
    assert BY_NAME["seed"].range_text(False) == "0..4294967295"


def test_values_of_a_mapping_fills_in_the_defaults_and_keeps_the_given_values_as_they_are():
    assert values_of({}) == DEFAULTS
    marker = object()  # a tensor, say: passed through untouched
    got = values_of({"beam_width": 4, "seed": marker})
    assert got == {**DEFAULTS, "beam_width": 4, "seed": marker} and got["seed"] is marker


def test_values_of_an_object_reads_every_setting_and_nothing_else():
    given = {name: index for index, name in enumerate(NAMES)}
    assert values_of(SimpleNamespace(**given, other="ignored")) == given
    with pytest.raises(AttributeError):
        values_of(SimpleNamespace(beam_width=2))  # an object gives them all


def test_values_of_names_the_first_unknown_setting_in_order():
    expected = f"alpha: not a decoding setting; expected some of {list(TABLE)}"
    with pytest.raises(ValueError) as raised:
        values_of({"beam_width": 2, "beam": 3, "alpha": 0.6})
    assert str(raised.value) == expected


def test_defaults_and_the_bounds_themselves_have_no_problems():
    assert problems(dict(DEFAULTS)) == []
    assert problems(dict(DEFAULTS), attends=False) == []
    for name, (integer, _, low, high, without, _, _) in TABLE.items():
        for bound, attends in ((low, True), (high, True), (without, False)):
            values = _with(**{name: bound})
            if name == "n_best":
                values.update(beam_width=bound)
            assert problems(values, attends) == [], (name, bound, attends)
    # A float setting takes an int; a setting that needs attention takes any value in bounds where there is some.
    assert problems(_with(length_penalty=1, coverage_penalty=0.5)) == []


@pytest.mark.parametrize("name, value, message", [
    ("beam_width", 2.0, "beam_width: expected an integer; got 2.0"),
    ("beam_width", True, "beam_width: expected an integer; got True"),
    ("seed", "3", "seed: expected an integer; got '3'"),
    ("length_penalty", "0.6", "length_penalty: expected a number; got '0.6'"),
    ("length_penalty", False, "length_penalty: expected a number; got False"),
    ("top_p", None, "top_p: expected a number; got None"),
    ("max_length", 0, "max_length: expected 1..256; got 0"),
    ("max_length", 257, "max_length: expected 1..256; got 257"),
    ("top_p", 1.5, "top_p: expected 0.01..1.0; got 1.5"),
    ("temperature", 0.001, "temperature: expected 0.01..100.0; got 0.001"),
    ("coverage_penalty", 11.0, "coverage_penalty: expected 0.0..10.0; got 11.0"),
    ("no_repeat_ngram_size", -1, "no_repeat_ngram_size: expected 0..10; got -1"),
])
def test_a_value_of_the_wrong_type_or_out_of_bounds_is_named_with_what_was_expected(name, value, message):
    assert problems(_with(**{name: value})) == [(name, message)]


def test_a_model_without_attention_takes_only_the_default_of_a_setting_that_reads_it():
    message = "coverage_penalty: expected 0.0..0.0" + NO_ATTENTION + "; got 0.5"
    assert problems(_with(coverage_penalty=0.5), attends=False) == [("coverage_penalty", message)]
    assert problems(_with(coverage_penalty=0.5), attends=True) == []


def test_every_type_and_bounds_problem_is_listed_in_order_and_the_rules_between_settings_wait_for_them():
    values = _with(max_length=0, beam_width=2, n_best=5, temperature="hot")
    assert problems(values) == [
        ("max_length", "max_length: expected 1..256; got 0"),
        ("temperature", "temperature: expected a number; got 'hot'"),
    ]
    # In bounds, the rules between settings come next.
    assert problems(_with(beam_width=2, n_best=5)) == [
        ("n_best", "n_best: expected 1..2 (beam_width, or num_samples when sampling); got 5"),
    ]


def test_n_best_is_at_most_the_beam_width_or_the_sample_count_when_sampling():
    assert relation_problems(_with(beam_width=3, n_best=3)) == []
    assert relation_problems(_with(beam_width=3, n_best=4, num_samples=0)) == [
        ("n_best", "n_best: expected 1..3 (beam_width, or num_samples when sampling); got 4"),
    ]
    assert relation_problems(_with(beam_width=1, n_best=2, num_samples=2)) == []
    assert relation_problems(_with(beam_width=4, n_best=2, num_samples=1)) == [
        ("n_best", "n_best: expected 1..1 (beam_width, or num_samples when sampling); got 2"),
    ]


def test_a_beam_search_preference_stays_at_its_default_when_sampling_even_one_sample():
    assert relation_problems(_with(no_repeat_ngram_size=3, coverage_penalty=0.5)) == []
    assert relation_problems(_with(num_samples=1, temperature=0.5, top_k=5, top_p=0.9, seed=7)) == []
    assert relation_problems(_with(num_samples=1, no_repeat_ngram_size=3)) == [
        ("no_repeat_ngram_size",
         "no_repeat_ngram_size: a beam search preference; expected 0 when sampling (num_samples 1); got 3"),
    ]
    assert relation_problems(_with(num_samples=2, n_best=3, coverage_penalty=0.5, no_repeat_ngram_size=2)) == [
        ("n_best", "n_best: expected 1..2 (beam_width, or num_samples when sampling); got 3"),
        ("coverage_penalty",
         "coverage_penalty: a beam search preference; expected 0.0 when sampling (num_samples 2); got 0.5"),
        ("no_repeat_ngram_size",
         "no_repeat_ngram_size: a beam search preference; expected 0 when sampling (num_samples 2); got 2"),
    ]


def _entry(name, attends=True):
    integer, _, low, high, without, at_most, searches = TABLE[name]
    return {"name": name, "label": BY_NAME[name].label, "meaning": BY_NAME[name].meaning, "integer": integer,
            "min": low, "max": high if attends else without, "at_most": at_most, "searches": searches}


def test_as_json_is_the_form_s_table_in_the_declaration_s_order():
    assert as_json() == [_entry(name) for name in TABLE]
    assert as_json(attends=True) == [_entry(name) for name in TABLE]
    assert as_json(attends=False) == [_entry(name, attends=False) for name in TABLE]
    assert as_json(["top_p", "n_best", "beam_width"]) == [_entry("beam_width"), _entry("n_best"), _entry("top_p")]
    assert as_json(["coverage_penalty"], False) == [_entry("coverage_penalty", attends=False)]
    assert as_json([]) == []
    labels = [entry["label"] for entry in as_json()]
    assert labels[0] == "Beam width" and all(label and entry["meaning"] for label, entry in zip(labels, as_json()))


def test_a_sampling_call_leaves_out_the_export_s_beam_preferences_and_keeps_every_other_value():
    from seqtasks.decoding.settings import filled, samples

    own = {**defaults(), "beam_width": 5, "length_penalty": 1.0, "no_repeat_ngram_size": 3, "coverage_penalty": 0.2}
    beam_only = {setting.name for setting in SETTINGS if setting.beam_only}
    assert {"no_repeat_ngram_size", "coverage_penalty"} <= beam_only
    assert filled({}, own) == own and filled({"beam_width": 2}, own) == {**own, "beam_width": 2}
    sampled = filled({"num_samples": 4, "n_best": 2}, own)
    assert sampled == {**own, "num_samples": 4, "n_best": 2, **{name: BY_NAME[name].default for name in beam_only}}
    assert problems(sampled) == []
    # A preference the call names is kept, and still refused.
    named = filled({"num_samples": 4, "n_best": 1, "no_repeat_ngram_size": 3}, own)
    assert named["no_repeat_ngram_size"] == 3 and named["coverage_penalty"] == 0.0
    assert problems(named)[0][0] == "no_repeat_ngram_size"
    # Only a number above 0 samples; anything else is left for the checks to name.
    for switch in (0, -1, True, "2", None, [3]):
        assert not samples(switch) and filled({"num_samples": switch}, own)["no_repeat_ngram_size"] == 3
    assert samples(1) and samples(0.5)


INT32 = [setting for setting in SETTINGS if setting.dtype == "int32"]


def _outside(setting):
    """A value just below and one just above the setting's bounds."""
    step = 1 if setting.integer else 0.005
    return setting.low - step, setting.high + step


def _valid(name, value):
    """Every setting at its default but `name` at `value`, with what its relations need to hold."""
    values = {**defaults(), name: value}
    if name == "n_best":
        values["beam_width"] = min(max(values["beam_width"], value), BY_NAME["beam_width"].high)
    return values


def test_the_recipe_schema_is_the_declaration():
    from seqtasks.recipe.schema import DecodingConfig

    fields = dataclasses.fields(DecodingConfig)
    assert tuple(field.name for field in fields) == NAMES
    for field, setting in zip(fields, SETTINGS):
        assert field.type is setting.python_type
        assert field.default == setting.default
        assert (field.metadata["min"], field.metadata["max"]) == (setting.low, setting.high)
        assert field.metadata["doc"] == setting.meaning


def test_the_recipe_reference_lists_every_setting_with_its_bounds():
    page = (REPO / "docs" / "recipe-reference.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `model\.decoding\.(\w+)` \| (\w+) \(>= ([^,]+), <= ([^)]+)\) \| `([^`]+)` \|", page, re.M)
    translation = {name: row for name, *row in rows}  # the same rows for every encoder-decoder task
    assert tuple(translation) == NAMES
    for setting in SETTINGS:
        kind, low, high, default = translation[setting.name]
        assert kind == ("integer" if setting.integer else "number")
        assert (low, high, default) == (str(setting.low), str(setting.high), str(setting.default))


def test_the_signature_inputs_are_the_declared_names_and_dtypes():
    from seqtasks.encoder_decoder.settings_inputs import settings_specs

    specs = settings_specs()
    assert tuple(spec.name for spec in specs) == NAMES
    assert [spec.dtype.name for spec in specs] == [setting.dtype for setting in SETTINGS]
    assert all(spec.shape.as_list() == [None] for spec in specs)


def _read_in_graph(values, attends=True):
    import tensorflow as tf

    from seqtasks.encoder_decoder.settings_inputs import read_settings

    tensors = [tf.constant([values[s.name]], s.dtype) for s in SETTINGS]
    return {name: value.numpy() for name, value in read_settings(*tensors, attends=attends).items()}


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
def test_the_graph_and_the_api_take_the_bounds_and_refuse_what_is_beyond(setting):
    import tensorflow as tf

    for value in (setting.low, setting.high):
        assert problems(_valid(setting.name, value)) == []
        read = _read_in_graph(_valid(setting.name, value))
        assert read[setting.name] == pytest.approx(value)
    for value in _outside(setting):
        message = f"{setting.name}: expected {setting.low}..{setting.high}; got "
        (found,) = problems(_valid(setting.name, value))
        assert found[0] == setting.name and found[1].startswith(message)
        with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(message)):
            _read_in_graph(_valid(setting.name, value))


@pytest.mark.parametrize("setting", INT32, ids=lambda s: s.name)
@pytest.mark.parametrize("value", [2**31 - 1, 2**31])
def test_the_int32_settings_at_the_edge_of_their_dtype_are_refused_by_name(setting, value):
    from seqtasks.recipe import load_recipe
    from seqtasks.recipe.loader import RecipeError

    expected = f"{setting.name}: expected {setting.low}..{setting.high}; got {value}"
    assert problems(_valid(setting.name, value)) == [(setting.name, expected)]
    with pytest.raises(RecipeError, match=re.escape(f"model.decoding.{setting.name}: expected at most {setting.high}; "
                                                    f"got {value}")):
        load_recipe(REPO / "recipes" / "toy.yaml", [f"model.decoding.{setting.name}={value}"])
    if value < 2**31:  # the largest an int32 input holds reaches the graph's check
        import tensorflow as tf

        with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(expected)):
            _read_in_graph(_valid(setting.name, value))


@pytest.mark.parametrize("value, answer", [(2**31 - 1, None), (2**31, "is out of the int32 range")])
def test_a_served_request_reads_an_int32_setting_up_to_its_dtype_s_edge(value, answer):
    from seqtasks.serving.limits import Limits
    from seqtasks.serving.requests import BadRequest, read_predict

    inputs = {"text": ("string", [None]), **{s.name: (s.dtype, [None]) for s in SETTINGS}}
    signatures = {"with_settings": {"inputs": inputs, "defaults": defaults()}}
    for setting in INT32:
        body = {"signature_name": "with_settings", "instances": [{"text": "Hola.", setting.name: value}]}
        if answer is None:
            _, columns, _ = read_predict(body, signatures, Limits())
            assert columns[setting.name] == [value]  # on to the graph, which names the bound (above)
        else:
            with pytest.raises(BadRequest, match=re.escape(f"{setting.name}[0]: '{value}' {answer}")):
                read_predict(body, signatures, Limits())


def test_the_relations_are_checked_alike_in_python_and_in_the_graph():
    import tensorflow as tf

    cases = [
        ({"beam_width": 2, "n_best": 3}, "n_best: expected 1..2 (beam_width, or num_samples when sampling); got 3"),
        ({"num_samples": 2, "n_best": 3}, "n_best: expected 1..2 (beam_width, or num_samples when sampling); got 3"),
        ({"num_samples": 2, "no_repeat_ngram_size": 2},
         "no_repeat_ngram_size: a beam search preference; expected 0 when sampling (num_samples 2); got 2"),
    ]
    for values, message in cases:
        assert [found for _, found in problems({**defaults(), **values})] == [message]
        with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(message)):
            _read_in_graph({**defaults(), **values})
    assert problems({**defaults(), "num_samples": 4, "n_best": 4, "beam_width": 1}) == []
    no_attention = "coverage_penalty: expected 0.0..0.0 (this model has no attention to cover); got 0.5"
    assert problems({**defaults(), "coverage_penalty": 0.5}, attends=False) == [("coverage_penalty", no_attention)]
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(no_attention)):
        _read_in_graph({**defaults(), "coverage_penalty": 0.5}, attends=False)


def test_predict_has_one_flag_per_setting_with_its_type():
    from seqtasks.cli import predict

    options = {param.name: param for param in predict.params if param.name in NAMES}
    # n_best is `--n-best`, which also says how many lines to print.
    assert set(options) == set(NAMES)
    for name, param in options.items():
        assert param.opts == ["--" + name.replace("_", "-")]
        if name != "n_best":
            assert param.type.name == ("integer" if BY_NAME[name].integer else "float")
            assert f"{BY_NAME[name].low}..{BY_NAME[name].high}" in param.help


def test_the_model_card_tables_every_setting_with_the_export_s_value_and_bounds():
    from seqtasks.export.model_card import _decoding

    decoding = SimpleNamespace(**{**defaults(), "beam_width": 5, "length_penalty": 0.6})
    recipe = SimpleNamespace(task="translation", model=SimpleNamespace(decoding=decoding))
    lines = _decoding(recipe, {"signatures": ["serving_default", "with_settings"]})
    rows = [line for line in lines if line.startswith("| `")]
    assert [re.match(r"\| `(\w+)`", row)[1] for row in rows] == list(NAMES)
    for row, setting in zip(rows, SETTINGS):
        value = getattr(decoding, setting.name)
        assert row == f"| `{setting.name}` | {setting.dtype} | {value} | {setting.low}..{setting.high} | {setting.meaning} |"
    assert _decoding(recipe, {"signatures": ["serving_default"]}) == []
    # A task that does not decode has no settings to table (its model section has no `decoding`).
    assert _decoding(SimpleNamespace(task="ner", model=SimpleNamespace()), {"signatures": ["with_settings"]}) == []


def test_the_server_serves_the_page_s_controls_from_the_declaration():
    from seqtasks.serving.app import _describe

    def described(accepted, signatures):
        model = SimpleNamespace(
            settings_accepted=lambda: accepted, decoding_defaults=lambda: {**defaults(), "beam_width": 4},
            task="translation", input_name="text", label_names=lambda: None,
        )
        served = SimpleNamespace(name="m", version=1, model=model, signatures=dict.fromkeys(signatures))
        return _describe(served, SimpleNamespace(as_json=lambda: {}))

    listing = described(NAMES, ["serving_default", "with_settings", "attention"])
    assert listing["settings"] == {**defaults(), "beam_width": 4}
    assert listing["setting_fields"] == as_json(NAMES)
    assert [field["name"] for field in listing["setting_fields"]] == list(NAMES)
    for field, setting in zip(listing["setting_fields"], SETTINGS):
        assert (field["min"], field["max"], field["integer"]) == (setting.low, setting.high, setting.integer)
        assert field["label"] == setting.label and field["meaning"] == setting.meaning
    older = described(NAMES[:4], ["serving_default", "with_settings"])  # four settings, no attention
    assert [field["name"] for field in older["setting_fields"]] == list(NAMES[:4])
    assert described(NAMES, ["serving_default"])["setting_fields"] is None
    no_attention = described(NAMES, ["serving_default", "with_settings"])["setting_fields"]
    assert next(f for f in no_attention if f["name"] == "coverage_penalty")["max"] == 0.0


def test_the_page_draws_the_served_controls_and_declares_none_of_its_own():
    script = (REPO / "seqtasks" / "serving" / "static" / "app.js").read_text(encoding="utf-8")
    code = re.sub(r"//.*", "", script)
    assert "setting_fields" in code
    # It shows an n-best list and names the default beam; it declares no setting, label or bound.
    assert {name for name in NAMES if re.search(rf"\b{name}\b", code)} <= {"n_best", "beam_width"}
    for setting in SETTINGS:
        assert setting.label not in code
    assert not re.search(r"\b(max|min): \d", code)


def test_an_export_s_defaults_survive_the_variable_it_keeps_them_in():
    from seqtasks.encoder_decoder.settings_inputs import defaults_variable, read_defaults

    decoding = SimpleNamespace(**{**defaults(), "beam_width": 5, "length_penalty": 0.6, "seed": 2**32 - 1})
    assert read_defaults(defaults_variable(decoding)) == values_of(decoding)


@pytest.fixture(scope="module")
def export(run_cache):
    return tiny_translation_export(run_cache)[0]


@pytest.fixture(scope="module")
def model(export):
    return seqtasks.load(export)


@pytest.mark.slow
def test_predict_flags_sample_as_the_api_does(export, model):
    result = seqtasks_command(
        "predict", export, "Tengo hambre.", "--num-samples", 3, "--n-best", 3, "--seed", 5, "--temperature", 1.5
    )
    expected = model.translate("Tengo hambre.", num_samples=3, n_best=3, seed=5, temperature=1.5).n_best
    assert result.stdout.splitlines() == [f"{score:.4f}\t{text}" for text, score in expected]
    blocked = seqtasks_command("predict", export, "Tengo hambre.", "--no-repeat-ngram-size", 1)
    words = blocked.stdout.strip().split()
    assert len(words) == len(set(words))  # no word twice


@pytest.mark.slow
def test_predict_flags_out_of_bounds_are_one_line_errors(export):
    result = seqtasks_command("predict", export, "Hola.", "--beam-width", 99, expect=2)
    assert result.output.strip().splitlines()[-1].startswith("Error: ")
    assert "beam_width: expected 1..16; got 99" in result.output and "Traceback" not in result.output
    result = seqtasks_command("predict", export, "Hola.", "--top-p", 0, expect=2)
    assert "top_p: expected 0.01..1.0; got 0" in result.output


@pytest.mark.slow
def test_the_api_sends_what_the_export_takes_and_names_what_an_older_export_lacks(model, monkeypatch):
    assert model.settings_accepted() == NAMES
    assert set(model.decoding_defaults()) == set(NAMES)
    signatures = model.signatures()
    older = {**signatures["with_settings"], "inputs": {
        key: value for key, value in signatures["with_settings"]["inputs"].items() if key not in NAMES[4:]}}
    monkeypatch.setattr(model, "signatures", lambda: {**signatures, "with_settings": older})
    assert model.settings_accepted() == FIRST_SETTINGS
    with pytest.raises(SeqtasksError) as error:
        model.translate("Hola.", top_k=5)
    assert str(error.value) == (
        f"top_k: this export takes only the settings {list(FIRST_SETTINGS)} (it was made before the others "
        "existed; export it again to add them)"
    )


@pytest.mark.slow
def test_a_prefix_starts_every_translation_and_its_own_start_gives_it_back(model, export):
    source = "Tengo hambre."
    plain = model.translate(source, n_best=2, beam_width=3)
    first_word = plain.text.split()[0]
    again = model.translate(source, prefix=first_word, n_best=2, beam_width=3)
    assert again.text == plain.text  # the best translation starts so already
    # The tiny model writes lower case (data.lower_case).
    forced = model.translate([source, "Hola."], prefix=["nobody", "nobody knows"])
    assert forced[0].text.startswith("nobody") and forced[1].text.startswith("nobody knows")
    with pytest.raises(SeqtasksError, match=r"^prefix: expected a string, or one per input \(2\)$"):
        model.translate([source, "Hola."], prefix=["a"])
    result = seqtasks_command("predict", export, "--json", source, "--beam-width", 3)
    assert plain.text in result.stdout
    result = seqtasks_command("predict", export, source, "Hola.", "--prefix", "nobody")
    assert result.stdout.splitlines() == [t.text for t in model.translate([source, "Hola."], prefix="nobody")]


@pytest.mark.slow
def test_the_export_keeps_its_own_settings_and_needs_no_recipe_file(model, tmp_path):
    import shutil

    from seqtasks.export.saved_model import AUDIT_FOLDER

    recipe = model.recipe().model.decoding
    assert model.decoding_defaults() == {name: getattr(recipe, name) for name in NAMES}
    copy = shutil.copytree(model.path, tmp_path / "export")  # the version folder
    (copy / AUDIT_FOLDER / "recipe.yaml").unlink()
    alone = seqtasks.load(copy)
    assert alone.recipe() is None
    assert alone.decoding_defaults() == model.decoding_defaults()
    # A call that sends one setting gets the rest from the export: the same as sending them all.
    assert alone.translate("Tengo hambre.", n_best=1).text == model.translate(
        "Tengo hambre.", **{**model.decoding_defaults(), "n_best": 1}).text
