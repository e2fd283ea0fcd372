"""Every surface of the decoding settings lists exactly the declared ones, with the declared bounds.

`seqtasks/decoding/settings.py` declares them once; the recipe schema and its
reference page, the export's signature inputs and in-graph checks, `predict`'s
flags, the API's check, the model card and the page's controls (served by
`seqtasks serve`) are made from that table. A setting added there shows on
every surface, and none can list a setting or a bound of its own.
"""

import dataclasses
import re
from types import SimpleNamespace

import pytest
from conftest import REPO

from seqtasks.decoding.settings import BY_NAME, NAMES, SETTINGS, as_json, defaults, problems, values_of

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
    recipe = SimpleNamespace(model=SimpleNamespace(decoding=decoding))
    lines = _decoding(recipe, {"signatures": ["serving_default", "with_settings"]})
    rows = [line for line in lines if line.startswith("| `")]
    assert [re.match(r"\| `(\w+)`", row)[1] for row in rows] == list(NAMES)
    for row, setting in zip(rows, SETTINGS):
        value = getattr(decoding, setting.name)
        assert row == f"| `{setting.name}` | {setting.dtype} | {value} | {setting.low}..{setting.high} | {setting.meaning} |"
    assert _decoding(recipe, {"signatures": ["serving_default"]}) == []


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
