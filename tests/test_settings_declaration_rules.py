"""The decoding settings' declaration (`seqtasks.decoding.settings`): its bounds, checks, messages and form table.

Each expectation is written out here (the bounds of the declaration's table,
the messages word for word), not read back from the code under test.
"""

from types import SimpleNamespace

import pytest

from seqtasks.decoding.settings import (
    BY_NAME,
    NAMES,
    SETTINGS,
    as_json,
    defaults,
    problems,
    relation_problems,
    values_of,
)

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
