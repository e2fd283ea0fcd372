import dataclasses
import re
import textwrap
import typing

import pytest

from seqtasks.cli import builtin_recipes
from seqtasks.decoding.settings import MAX_BEAM_WIDTH, MAX_DECODE_LENGTH
from seqtasks.errors import RecipeError
from seqtasks.recipe import dump_recipe, load_recipe
from seqtasks.recipe.schema import Seq2SeqModelConfig, TrainingConfig
from tests.conftest import REPO


def write(tmp_path, text, name="x.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def error_of(path, overrides=()):
    with pytest.raises(RecipeError) as error:
        load_recipe(path, overrides)
    return str(error.value)


def test_defaults_fill_what_the_recipe_leaves_out(tmp_path):
    recipe = load_recipe(write(tmp_path, "task: toy\ntraining:\n  epochs: 3\n"))
    assert recipe.name == "x"
    assert recipe.training == dataclasses.replace(TrainingConfig(), epochs=3)
    assert recipe.model == Seq2SeqModelConfig()


def test_precedence_defaults_recipe_then_set(tmp_path):
    path = write(tmp_path, "task: toy\ntraining:\n  epochs: 3\n  batch_size: 16\n")
    recipe = load_recipe(path, ["training.epochs=5", "model.attention.type=bahdanau", "name=other"])
    assert recipe.training.epochs == 5  # --set beats the recipe
    assert recipe.training.batch_size == 16  # the recipe beats the default
    assert recipe.training.learning_rate == TrainingConfig().learning_rate
    assert recipe.model.attention.type == "bahdanau"
    assert recipe.name == "other"


def test_set_parses_yaml_scalars_and_lists(tmp_path):
    path = write(tmp_path, "task: toy\n")
    recipe = load_recipe(
        path,
        ["training.learning_rate=2e-3", "model.encoder.bidirectional=true", "distribute.strategy=mirrored", "distribute.devices=[/cpu:0]"],
    )
    assert recipe.training.learning_rate == 0.002
    assert recipe.model.encoder.bidirectional is True
    assert recipe.distribute.devices == ["/cpu:0"]


def test_exponent_floats_without_a_dot_are_numbers(tmp_path):
    recipe = load_recipe(write(tmp_path, "task: toy\ntraining:\n  learning_rate: 3e-4\n"))
    assert recipe.training.learning_rate == 3e-4


def test_data_paths_resolve_against_the_recipe_folder_or_the_current_one(tmp_path, monkeypatch):
    folder = tmp_path / "recipes"
    folder.mkdir()
    path = write(folder, "task: translation\ndata:\n  path: ../data/pairs.tsv\n")
    assert load_recipe(path).data.path == str(tmp_path / "data" / "pairs.tsv")
    monkeypatch.chdir(tmp_path)
    assert load_recipe(path, ["data.path=mine.tsv"]).data.path == str(tmp_path / "mine.tsv")
    assert load_recipe(path, ["data.path=/abs/pairs.tsv"]).data.path == "/abs/pairs.tsv"
    # A recipe given by a relative path still gives absolute data paths, which a
    # run folder's merged recipe keeps wherever it is loaded from.
    assert load_recipe("recipes/x.yaml").data.path == str(tmp_path / "data" / "pairs.tsv")


def test_the_export_directory_resolves_like_data_paths_and_defaults_to_saved_models_here(tmp_path, monkeypatch):
    folder = tmp_path / "recipes"
    folder.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    plain = write(folder, "task: toy\n")
    assert load_recipe(plain).export.directory == str(work / "saved_models")
    placed = write(folder, "task: toy\nexport:\n  directory: ../exports\n", name="placed.yaml")
    assert load_recipe(placed).export.directory == str(tmp_path / "exports")
    assert load_recipe(placed, ["export.directory=mine"]).export.directory == str(work / "mine")
    # The merged recipe of a run folder keeps the folder it resolved to, wherever it is loaded from.
    saved = write(tmp_path, dump_recipe(load_recipe(plain)), name="merged.yaml")
    monkeypatch.chdir(tmp_path)
    assert load_recipe(saved).export.directory == str(work / "saved_models")


def test_translation_needs_a_data_path(tmp_path):
    assert "x.yaml: data.path: required: the file of sentence pairs" in error_of(
        write(tmp_path, "task: translation\n")
    )


def test_dumped_recipe_loads_back_equal(tmp_path):
    recipe = load_recipe(write(tmp_path, "task: toy\n"), ["model.encoder.num_layers=2"])
    again = load_recipe(write(tmp_path, dump_recipe(recipe), name="dumped.yaml"))
    assert dataclasses.replace(again, name=recipe.name) == recipe


@pytest.mark.parametrize("name, path", sorted(builtin_recipes().items()))
def test_builtin_recipes_load(name, path):
    recipe = load_recipe(path)
    assert recipe.name == name
    assert recipe.description


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "task: toy\nmodel:\n  attention:\n    score: dott\n",
            "x.yaml: model.attention.score: expected one of dot, general, concat; got 'dott' (line 4)",
        ),
        (
            "task: toy\nmodel:\n  encoder:\n    unitz: 3\n",
            "x.yaml: model.encoder.unitz: unknown key; expected one of cell_type, units, num_layers, "
            "bidirectional, merge_mode, residual, dropout (did you mean 'units'?) (line 4)",
        ),
        ("task: toy\ntraining:\n  epochs: three\n", "x.yaml: training.epochs: expected an integer; got 'three' (line 3)"),
        ("task: toy\ntraining:\n  epochs: 2.5\n", "x.yaml: training.epochs: expected an integer; got 2.5"),
        ("task: toy\ntraining:\n  learning_rate: 1e-3x\n", "training.learning_rate: expected a number; got '1e-3x'"),
        ("task: toy\ntraining:\n  batch_size: -4\n", "x.yaml: training.batch_size: expected at least 1; got -4"),
        ("task: toy\nmodel:\n  encoder:\n    dropout: 1.5\n", "model.encoder.dropout: expected less than 1.0; got 1.5"),
        ("task: toy\nexport:\n  enabled: yes please\n", "export.enabled: expected true or false; got 'yes please'"),
        ("task: toy\nmodel: 3\n", "x.yaml: model: expected a mapping; got 3 (line 2)"),
        ("task: toyy\n", "x.yaml: task: expected one of toy, translation, sentiment, ner, captioning; got 'toyy' (line 1)"),
        ("data: {}\n", "x.yaml: task: missing; expected one of toy, translation, sentiment, ner"),
        (
            "task: sentiment\ndata:\n  path: a.csv\n  labels: [a, b]\n  label_names: [x]\n",
            "x.yaml: data.label_names: expected one name per entry of data.labels (2); got 1 (line 5)",
        ),
        ("task: sentiment\ndata:\n  format: lines\n  path: x\n", "data.labels: required for the 'lines' format"),
        ("task: sentiment\ndata:\n  format: xml\n", "data.format: expected one of csv, tsv, folders, lines; got 'xml'"),
        ("task: ner\n", "x.yaml: data.path: required: the CoNLL training file"),
        (
            "task: toy\ntraining:\n  monitor: val_accuracy\n",
            "x.yaml: training.monitor: expected one of val_loss, val_token_accuracy for task toy; "
            "got 'val_accuracy' (line 3)",
        ),
        ("task: ner\ndata:\n  path: x\n  scheme: iobes\n", "data.scheme: expected one of iob1, iob2; got 'iobes' (line 4)"),
        ("task: ner\ndata:\n  path: x\nmodel:\n  output: hmm\n", "model.output: expected one of crf, softmax; got 'hmm'"),
        ("task: toy\nname: ../escape\n", "x.yaml: name: expected letters, digits"),
        ("- task\n- toy\n", "x.yaml: expected a mapping of sections at the top level; got a list"),
        ("task: toy\ndata:\n  min_length: 9\n  max_length: 4\n", "data.min_length: must not exceed max_length (4); got 9"),
        (
            "task: toy\nmodel:\n  encoder: {units: 32}\n  decoder: {units: 64}\n  attention: {score: dot}\n",
            "model.attention.score: 'dot' needs encoder outputs (32) of the size of decoder.units (64)",
        ),
        (
            "task: toy\nmodel:\n  encoder: {units: 32, num_layers: 2}\n  bridge: copy\n",
            "model.bridge: 'copy' needs encoder and decoder of the same cell type",
        ),
        ("task: toy\ntraining:\n  epochs: [1\n", "x.yaml: invalid YAML"),
    ],
)
def test_bad_recipes_name_the_file_and_the_field(tmp_path, text, expected):
    assert expected in error_of(write(tmp_path, text))


def test_python_tags_are_refused(tmp_path):
    path = write(tmp_path, "task: !!python/object/apply:os.system ['echo pwned']\n")
    message = error_of(path)
    assert message.startswith(f"{path}: invalid YAML")


@pytest.mark.parametrize(
    "override, expected",
    [
        (
            "model.attention.scor=dot",
            "--set model.attention.scor: unknown key model.attention.scor; expected one of type, score, "
            "units, normalize, scale (did you mean 'score'?)",
        ),
        ("training.epochs=0", "--set training.epochs: expected at least 1; got 0"),
        ("training.epochs", "--set 'training.epochs': expected KEY=VALUE"),
        ("training.epochs.x=1", "--set training.epochs.x: training.epochs is a value, not a section"),
        ("data.train_sise=3", "--set data.train_sise: unknown key data.train_sise; expected one of train_size"),
        ("distribute.strategy=tpuu", "--set distribute.strategy: expected one of auto, one_device, mirrored"),
    ],
)
def test_bad_overrides_name_the_flag_and_the_field(tmp_path, override, expected):
    assert expected in error_of(write(tmp_path, "task: toy\n"), [override])


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda tmp: tmp / "missing.yaml", "missing.yaml: no such recipe file"),
        (lambda tmp: tmp, "is a folder, expected a recipe file"),
        (lambda tmp: (tmp / "latin1.yaml").write_bytes(b"task: toy\n# caf\xe9\n") and tmp / "latin1.yaml", "not UTF-8 text"),
    ],
)
def test_unreadable_recipe_files(tmp_path, make, expected):
    assert expected in error_of(make(tmp_path))


# --- YAML aliases: a "billion laughs" bomb is refused before anything walks it ---


def alias_bomb(form, levels):
    """`a0` holds two values; each further anchor holds nine aliases of the one before (9**levels values)."""
    lines = ["task: toy", "a0: &a0 {x: 1, y: 1}" if form == "mapping" else "a0: &a0 [lol, lol]"]
    for level in range(1, levels):
        if form == "mapping":
            items = ", ".join(f"k{i}: *a{level - 1}" for i in range(9))
            lines.append(f"a{level}: &a{level} {{{items}}}")
        else:
            lines.append(f"a{level}: &a{level} [{', '.join(f'*a{level - 1}' for _ in range(9))}]")
    return "\n".join(lines) + "\n"


@pytest.fixture
def walk_guard():
    """Stops a test after 5 s, so a loader that walks the expanded aliases fails instead of eating gigabytes."""
    import signal

    def stop(signum, frame):
        raise AssertionError("the loader walked the aliases' expansion (still busy after 5 s)")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, 5)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("form", ["mapping", "list"])
@pytest.mark.parametrize("levels", [5, 10])
def test_alias_bombs_are_refused_with_the_line_where_they_grow_too_big(tmp_path, walk_guard, form, levels):
    # Counted as nodes: a0 has 5 (mapping) or 3 (list), a1 55 or 28, a2 505 or 253, a3 4546 or 2278;
    # a4 repeats a3 nine times (40914 or 20502 values), past the limit of 10000: line 6.
    path = write(tmp_path, alias_bomb(form, levels))
    assert error_of(path) == (
        f"{path}: YAML aliases expand to more than 10000 values (line 6); write the values out instead"
    )


def test_the_alias_limit_counts_every_aliased_value(tmp_path, monkeypatch):
    from seqtasks.recipe import loader

    monkeypatch.setattr(loader, "MAX_ALIASED_VALUES", 10)
    text = (
        "task: sentiment\n"
        "description: &d hi\n"
        "data:\n"
        "  path: x.csv\n"
        "  labels: &l [a, b, c, d]\n"  # a list node and 4 scalars: 5 values
        "  label_names: *l\n"  # 5 aliased
        "distribute: {strategy: mirrored, devices: *l}\n"  # 10 aliased: at the limit
    )
    recipe = load_recipe(write(tmp_path, text))
    assert recipe.data.label_names == recipe.distribute.devices == ["a", "b", "c", "d"]
    path = write(tmp_path, text + "name: *d\n")  # 11
    assert error_of(path) == (
        f"{path}: YAML aliases expand to more than 10 values (line 1); write the values out instead"
    )


@pytest.mark.parametrize("value", ["&a {b: *a}", "&a [*a]", "&a {b: [1, {c: *a}]}"])
def test_an_alias_inside_its_own_anchor_is_refused(tmp_path, walk_guard, value):
    path = write(tmp_path, f"task: toy\nmodel: {value}\n")
    assert error_of(path) == f"{path}: a YAML alias refers to a value that contains it (line 2)"


def test_small_aliases_still_work_and_errors_through_them_name_the_anchored_line(tmp_path):
    text = "task: toy\nmodel:\n  encoder: &rnn {cell_type: gru, units: 32}\n  decoder: *rnn\n"
    recipe = load_recipe(write(tmp_path, text))
    assert (recipe.model.decoder.cell_type, recipe.model.decoder.units) == ("gru", 32)
    path = write(tmp_path, text.replace("gru", "rnn"))
    assert error_of(path) == f"{path}: model.decoder.cell_type: expected one of lstm, gru; got 'rnn' (line 3)"


def test_aliases_in_set_values_are_checked_too(tmp_path, monkeypatch):
    from seqtasks.recipe import loader

    monkeypatch.setattr(loader, "MAX_ALIASED_VALUES", 3)
    path = write(tmp_path, "task: toy\n")
    assert load_recipe(path, ["distribute.devices=[&d x, *d, *d, *d]", "distribute.strategy=mirrored"])
    assert error_of(path, ["distribute.devices=[&d x, *d, *d, *d, *d]"]) == (
        "--set distribute.devices: YAML aliases expand to more than 3 values (line 1); write the values out instead"
    )


@pytest.mark.parametrize(
    "value", ["[" * 500 + "]" * 500, "{a: " * 500 + "1" + "}" * 500], ids=["lists (1 KB)", "mappings"]
)
def test_deeply_nested_yaml_is_an_error_not_a_crash(tmp_path, value):
    """500 levels overflowed Python's stack in the composer (a RecursionError caught or not, by the stack in use)."""
    path = write(tmp_path, f"task: toy\ndata: {value}\n")
    assert error_of(path) == f"{path}: YAML nested more than 32 levels deep (line 2); a recipe needs at most 4"
    assert error_of(write(tmp_path, "task: toy\n", "base.yaml"), [f"data={value}"]) == (
        "--set data: YAML nested more than 32 levels deep (line 1); a recipe needs at most 4"
    )


def test_block_mappings_nested_deeply_name_the_line_of_the_level_too_many(tmp_path):
    path = write(tmp_path, "task: toy\ndata:\n" + "".join("  " * depth + "a:\n" for depth in range(1, 500)))
    # the top-level mapping is level 1, data's value (from line 3) level 2: line 34 starts level 33
    assert error_of(path) == f"{path}: YAML nested more than 32 levels deep (line 34); a recipe needs at most 4"


def test_nesting_up_to_the_limit_is_read(tmp_path, monkeypatch):
    from seqtasks.recipe import loader

    path = write(tmp_path, "task: toy\nx: [[[]]]\n")  # 4 levels
    assert error_of(path).startswith(f"{path}: x: unknown key")
    monkeypatch.setattr(loader, "MAX_NESTING", 3)
    assert error_of(path) == f"{path}: YAML nested more than 3 levels deep (line 2); a recipe needs at most 4"


def test_nesting_counts_the_levels_open_at_once_not_every_mapping_and_list(tmp_path, monkeypatch):
    from seqtasks.recipe import loader

    monkeypatch.setattr(loader, "MAX_NESTING", 3)
    path = write(tmp_path, "task: toy\nx: [[], [], [], []]\n")  # a mapping and 5 lists, 3 levels at most
    assert error_of(path).startswith(f"{path}: x: unknown key")
    path = write(tmp_path, "task: toy\nx: [[], [[]]]\n")  # 4 levels, after a closed one
    assert error_of(path) == f"{path}: YAML nested more than 3 levels deep (line 2); a recipe needs at most 4"


@pytest.mark.parametrize(
    "value, shown",
    [
        ("1" + "0" * 5000, f"{'1' + '0' * 39!r}... (5001 characters) as int"),  # 40 characters quoted
        ("2001-13-40", "'2001-13-40' as timestamp"),
        ("!!int abc", "'abc' as int"),
        ("!!float x", "'x' as float"),
        ("!!bool maybe", "'maybe' as bool"),
        ("!!timestamp x", "'x' as timestamp"),
    ],
    ids=["5001 digits", "no such date", "!!int", "!!float", "!!bool", "!!timestamp"],
)
def test_a_scalar_its_tag_cannot_read_is_invalid_yaml_not_a_traceback(tmp_path, value, shown):
    path = write(tmp_path, f"task: toy\nseed: {value}\n")
    assert error_of(path) == f"{path}: invalid YAML: cannot read {shown} (line 2)"


def test_with_set_a_scalar_yaml_cannot_read_is_taken_as_text(tmp_path):
    path = write(tmp_path, "task: toy\n")
    assert load_recipe(path, ["description=2001-13-40"]).description == "2001-13-40"
    assert error_of(path, ["seed=2001-13-40"]) == "--set seed: expected an integer; got '2001-13-40'"


@pytest.mark.parametrize("value, shown", [("[toy]", "a list"), ("{toy: 1}", "a mapping"), ("true", "true"), ("3", "3")])
def test_a_task_that_is_not_a_name_is_refused(tmp_path, value, shown):
    path = write(tmp_path, f"task: {value}\n")
    assert error_of(path) == (
        f"{path}: task: expected one of toy, translation, sentiment, ner, captioning; got {shown} (line 1)"
    )
    assert error_of(path, ["training.epochs=2"]).endswith(f"got {shown} (line 1)")


# --- types: YAML booleans are not numbers, numbers must be finite ---


@pytest.mark.parametrize(
    "section, key, value, expected",
    [
        ("training", "epochs", "true", "expected an integer; got true"),
        ("training", "early_stopping_patience", "false", "expected an integer; got false"),  # Optional[int]
        ("training", "learning_rate", "true", "expected a number; got true"),
        ("training", "max_minutes", "false", "expected a number; got false"),  # Optional[float]
        ("training", "optimizer", "true", "expected one of adam, adamw, sgd, rmsprop; got true"),
        ("training", "monitor", "1", "expected a string; got 1"),
        ("export", "enabled", "1", "expected true or false; got 1"),
        ("distribute", "devices", "[gpu, 1]", "expected a list of strings; got a list"),
        ("training", "learning_rate", ".nan", "expected a finite number; got nan"),
        ("training", "clipnorm", ".inf", "expected a finite number; got inf"),
        ("model", "decoding", "{length_penalty: .inf}", None),
        ("seed", None, "true", "expected an integer; got true"),
    ],
)
def test_values_of_the_wrong_type_are_refused(tmp_path, section, key, value, expected):
    if key is None:
        path = write(tmp_path, f"task: toy\n{section}: {value}\n")
        assert error_of(path) == f"{path}: {section}: {expected} (line 2)"
    elif expected is None:
        path = write(tmp_path, f"task: toy\n{section}:\n  {key}: {value}\n")
        assert error_of(path) == f"{path}: model.decoding.length_penalty: expected a finite number; got inf (line 3)"
    else:
        path = write(tmp_path, f"task: toy\n{section}:\n  {key}: {value}\n")
        assert error_of(path) == f"{path}: {section}.{key}: {expected} (line 3)"


def test_a_list_of_integers_refuses_booleans(tmp_path):
    data = "data: {captions: c, images: i, train_split: t, validation_split: v}"
    path = write(tmp_path, f"task: captioning\n{data}\nmodel:\n  backbone:\n    filters: [8, true]\n")
    assert error_of(path) == f"{path}: model.backbone.filters: expected a list of integers; got a list (line 5)"


def test_an_integer_too_big_for_a_float_is_not_a_crash(tmp_path):
    path = write(tmp_path, f"task: toy\ntraining:\n  learning_rate: {10**400}\n")
    assert error_of(path) == f"{path}: training.learning_rate: expected a finite number; got {10**400} (line 3)"


# --- bounds: every bound the schema declares, on both sides ---


def _bounded_fields():
    import math
    import typing

    from seqtasks.recipe.schema import Recipe
    from seqtasks.tasks.table import TASKS

    def fields(cls, prefix):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            if dataclasses.is_dataclass(hint):
                yield from fields(hint, f"{prefix}{f.name}.")
            elif {"min", "max", "below"} & set(f.metadata):
                is_list = typing.get_origin(hint) is list
                yield f"{prefix}{f.name}", float in typing.get_args(hint) or hint is float, is_list, f.metadata

    rows = []
    for task, entry in TASKS.items():
        for dotted, is_float, is_list, bounds in [
            *fields(Recipe, ""), *fields(entry.data_config, "data."), *fields(entry.model_config, "model.")
        ]:
            if task != "toy" and not dotted.startswith(("data.", "model.")):
                continue  # the common sections once
            cases = []  # (value, None: loads, or the message)
            if "min" in bounds:
                low = bounds["min"]
                below_low = math.nextafter(low, -math.inf) if is_float else low - 1
                cases += [(low, None), (below_low, f"expected at least {low}; got {below_low}")]
            if "max" in bounds:
                high = bounds["max"]
                above = math.nextafter(high, math.inf) if is_float else high + 1
                cases += [(high, None), (above, f"expected at most {high}; got {above}")]
            if "below" in bounds:
                end = bounds["below"]
                assert is_float
                cases += [(math.nextafter(end, -math.inf), None), (end, f"expected less than {end}; got {end}")]
            if is_list:  # the bounds hold for each entry
                cases = [([value], message and message.replace("expected ", "expected entries of ")) for value, message in cases]
            rows += [pytest.param(task, dotted, value, message, id=f"{task}-{dotted}={value}") for value, message in cases]
    return rows


# A recipe of each task that the bounds alone can break: the cross-field checks
# hold at every bound (lengths from 1 to the most, columns apart from each other,
# the widest beam for any n_best, the most checkpoints to average).
WIDEST_BEAM = {"decoding": {"beam_width": MAX_BEAM_WIDTH}}
MOST_KEPT = {"keep_checkpoints": 1000}
BASES = {
    "toy": {"task": "toy", "data": {"min_length": 1, "max_length": 10_000}, "model": WIDEST_BEAM,
            "training": MOST_KEPT},
    "translation": {"task": "translation", "data": {"path": "p.tsv", "target_column": 2}, "model": WIDEST_BEAM,
                    "training": MOST_KEPT},
    "sentiment": {"task": "sentiment", "data": {"path": "t.csv"}, "training": MOST_KEPT},
    "ner": {"task": "ner", "data": {"path": "t.conll"}, "training": MOST_KEPT},
    "captioning": {
        "task": "captioning",
        "data": {"captions": "c.txt", "images": "i", "train_split": "t.txt", "validation_split": "v.txt"},
        "model": WIDEST_BEAM,
        "training": MOST_KEPT,
    },
}


@pytest.mark.parametrize("task, dotted, value, message", _bounded_fields())
def test_every_bound_holds_on_both_sides_in_files_and_set(tmp_path, task, dotted, value, message):
    import copy
    import re

    import yaml

    raw = copy.deepcopy(BASES[task])
    node = raw
    *parents, leaf = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    path = write(tmp_path, yaml.safe_dump(raw, sort_keys=False))
    set_path = write(tmp_path, yaml.safe_dump(BASES[task], sort_keys=False), name="base.yaml")
    if message is None:
        got = load_recipe(path)
        for part in dotted.split("."):
            got = getattr(got, part)
        assert got == value and type(got) is type(value)
        got = load_recipe(set_path, [f"{dotted}={value!r}"])
        for part in dotted.split("."):
            got = getattr(got, part)
        assert got == value
    else:
        assert re.fullmatch(re.escape(f"{path}: {dotted}: {message}") + r" \(line \d+\)", error_of(path))
        assert error_of(set_path, [f"{dotted}={value!r}"]) == f"--set {dotted}: {message}"


def test_bounds_named_in_the_brief(tmp_path):
    """The two kinds of upper bound, spelled out: `below` (dropout) is exclusive, `max` (num_symbols) inclusive."""
    path = write(tmp_path, "task: toy\nmodel:\n  encoder:\n    dropout: 0.999\n")
    assert load_recipe(path).model.encoder.dropout == 0.999
    path = write(tmp_path, "task: toy\nmodel:\n  encoder:\n    dropout: 1.0\n")
    assert error_of(path) == f"{path}: model.encoder.dropout: expected less than 1.0; got 1.0 (line 4)"
    assert error_of(path, ["model.encoder.dropout=1"]) == "--set model.encoder.dropout: expected less than 1.0; got 1.0"
    assert load_recipe(path, ["model.encoder.dropout=0"]).model.encoder.dropout == 0.0
    path = write(tmp_path, "task: toy\ndata:\n  num_symbols: 10\n")
    assert load_recipe(path).data.num_symbols == 10
    path = write(tmp_path, "task: toy\ndata:\n  num_symbols: 11\n")
    assert error_of(path) == f"{path}: data.num_symbols: expected at most 10; got 11 (line 3)"
    assert error_of(path, ["data.num_symbols=1"]) == "--set data.num_symbols: expected at least 2; got 1"
    assert error_of(path, ["data.num_symbols=true"]) == "--set data.num_symbols: expected an integer; got true"


# --- every cross-field check: its exact message, the field it names and the line ---

CAPTIONS = "data: {captions: c, images: i, train_split: t, validation_split: v}\n"


@pytest.mark.parametrize(
    "text, expected",
    [
        # Seq2SeqModelConfig: 'dot' scores need encoder outputs of the decoder's size
        (
            "task: toy\nmodel:\n  encoder: {units: 32}\n  decoder: {units: 64}\n  attention: {score: dot}\n",
            "model.attention.score: 'dot' needs encoder outputs (32) of the size of decoder.units (64); "
            "use 'general' or 'concat' (line 5)",
        ),
        (
            "task: toy\nmodel:\n  encoder: {units: 32, bidirectional: true, merge_mode: sum}\n"
            "  decoder: {units: 64}\n  attention: {score: dot}\n",
            "model.attention.score: 'dot' needs encoder outputs (32) of the size of decoder.units (64); "
            "use 'general' or 'concat' (line 5)",
        ),
        (
            "task: toy\nmodel:\n  encoder: {units: 64, bidirectional: true}\n  decoder: {units: 64}\n"
            "  attention: {score: dot}\n",
            "model.attention.score: 'dot' needs encoder outputs (128) of the size of decoder.units (64); "
            "use 'general' or 'concat' (line 5)",
        ),
        # ... and 'copy' bridges encoder and decoder of the same shape
        (
            "task: toy\nmodel:\n  encoder: {units: 32, num_layers: 2}\n  bridge: copy\n",
            "model.bridge: 'copy' needs encoder and decoder of the same cell type and number of layers, "
            "and encoder state size (32) equal to decoder.units (128); use 'dense' (line 4)",
        ),
        (
            "task: toy\nmodel:\n  encoder: {units: 64, num_layers: 2}\n  decoder: {units: 64}\n  bridge: copy\n",
            "model.bridge: 'copy' needs encoder and decoder of the same cell type and number of layers, "
            "and encoder state size (64) equal to decoder.units (64); use 'dense' (line 5)",
        ),
        (
            "task: toy\nmodel:\n  encoder: {units: 64, cell_type: gru}\n  decoder: {units: 64}\n  bridge: copy\n",
            "model.bridge: 'copy' needs encoder and decoder of the same cell type and number of layers, "
            "and encoder state size (64) equal to decoder.units (64); use 'dense' (line 5)",
        ),
        (
            "task: toy\nmodel:\n  encoder: {units: 32, bidirectional: true}\n  decoder: {units: 32}\n  bridge: copy\n",
            "model.bridge: 'copy' needs encoder and decoder of the same cell type and number of layers, "
            "and encoder state size (64) equal to decoder.units (32); use 'dense' (line 5)",
        ),
        (  # both problems: the attention's is reported first
            "task: toy\nmodel:\n  encoder: {units: 32}\n  decoder: {units: 64}\n  attention: {score: dot}\n"
            "  bridge: copy\n",
            "model.attention.score: 'dot' needs encoder outputs (32) of the size of decoder.units (64); "
            "use 'general' or 'concat' (line 5)",
        ),
        # ... with attention type 'none' the source reaches the decoder through the bridge or summary_input
        (
            "task: toy\nmodel:\n  attention:\n    type: none\n  bridge: none\n",
            "model.bridge: with attention type 'none' the decoder sees the source only through the bridge "
            "or decoder.summary_input; use 'dense' or 'copy' (line 5)",
        ),
        (
            "task: toy\nmodel:\n  attention:\n    type: none\n  decoder:\n    placement: before\n",
            "model.decoder.placement: attention type 'none' has no attention to place; leave it 'after' (line 6)",
        ),
        (
            "task: translation\ndata: {path: p.tsv}\nmodel:\n  decoder:\n    summary_input: true\n",
            "model.decoder.summary_input: feeds the encoder's final state in place of attention; "
            "needs attention.type 'none' (line 5)",
        ),
        # DecoderConfig
        (
            "task: toy\nmodel:\n  decoder:\n    placement: before\n    input_feeding: true\n",
            "model.decoder.input_feeding: placement 'before' feeds the context into the cell; set it false (line 5)",
        ),
        (
            "task: toy\nmodel:\n  decoder:\n    units: 32\n    combine: residual\n    output_size: 64\n",
            "model.decoder.output_size: combine 'residual' adds the context to the state: must be units (32) (line 6)",
        ),
        (
            "task: toy\nmodel:\n  decoder:\n    deep_output: maxout\n    combine: residual\n",
            "model.decoder.combine: deep_output 'maxout' replaces combine; leave it 'tanh' (line 5)",
        ),
        (
            "task: toy\nmodel:\n  decoder:\n    deep_output: linear\n    combine: linear\n",
            "model.decoder.combine: deep_output 'linear' replaces combine; leave it 'tanh' (line 5)",
        ),
        # DistributeConfig
        (
            "task: toy\ndistribute:\n  devices: [/gpu:0]\n",
            "distribute.devices: only for 'one_device' and 'mirrored'; strategy is 'auto' (line 3)",
        ),
        (
            "task: toy\ndistribute: {strategy: multi_worker, devices: [a]}\n",
            "distribute.devices: only for 'one_device' and 'mirrored'; strategy is 'multi_worker' (line 2)",
        ),
        (
            "task: toy\ndistribute: {strategy: tpu, devices: [a]}\n",
            "distribute.devices: only for 'one_device' and 'mirrored'; strategy is 'tpu' (line 2)",
        ),
        # EvaluationConfig (entries below 1 are refused by the bounds first)
        (
            "task: toy\nevaluation:\n  length_buckets: []\n",
            "evaluation.length_buckets: expected increasing positive lengths, such as [5, 10, 20]; got [] (line 3)",
        ),
        (
            "task: toy\nevaluation:\n  length_buckets: [5, 5]\n",
            "evaluation.length_buckets: expected increasing positive lengths, such as [5, 10, 20]; got [5, 5] (line 3)",
        ),
        (
            "task: toy\nevaluation:\n  length_buckets: [10, 5]\n",
            "evaluation.length_buckets: expected increasing positive lengths, such as [5, 10, 20]; got [10, 5] (line 3)",
        ),
        (
            "task: toy\nevaluation:\n  length_buckets: [5, 10, 8]\n",
            "evaluation.length_buckets: expected increasing positive lengths, such as [5, 10, 20]; got [5, 10, 8] (line 3)",
        ),
        (
            "task: toy\nevaluation:\n  length_buckets: [0, 5]\n",
            "evaluation.length_buckets: expected entries of at least 1; got 0 (line 3)",
        ),
        # ToyDataConfig
        ("task: toy\ndata:\n  min_length: 9\n  max_length: 4\n", "data.min_length: must not exceed max_length (4); got 9 (line 3)"),
        ("task: toy\ndata:\n  min_length: 11\n", "data.min_length: must not exceed max_length (10); got 11 (line 3)"),
        # TranslationDataConfig
        ("task: translation\n", "data.path: required: the file of sentence pairs"),
        ("task: translation\ndata:\n  target_column: 1\n", "data.path: required: the file of sentence pairs"),
        (
            "task: translation\ndata:\n  path: p.tsv\n  target_column: 1\n",
            "data.target_column: must differ from source_column (1) (line 4)",
        ),
        (
            "task: translation\ndata:\n  path: p.tsv\n  source_column: 3\n  target_column: 3\n",
            "data.target_column: must differ from source_column (3) (line 5)",
        ),
        # TextClassificationDataConfig
        ("task: sentiment\n", "data.path: required: the labelled training data"),
        ("task: sentiment\ndata:\n  format: lines\n", "data.path: required: the labelled training data"),
        (
            "task: sentiment\ndata:\n  path: t\n  format: lines\n",
            "data.labels: required for the 'lines' format: the file name suffixes, e.g. [neg, pos]",
        ),
        (
            "task: sentiment\ndata:\n  path: t\n  label_names: [x]\n",
            "data.label_names: expected one name per entry of data.labels (0); got 1 (line 4)",
        ),
        (
            "task: sentiment\ndata:\n  path: t\n  labels: [a, b, a]\n  label_names: [x, y]\n",
            "data.label_names: expected one name per entry of data.labels (3); got 2 (line 5)",
        ),
        ("task: sentiment\ndata:\n  path: t\n  labels: [a, b, a]\n", "data.labels: contains a label twice (line 4)"),
        (
            "task: sentiment\ndata:\n  path: t\n  format: lines\n  labels: [neg, neg]\n",
            "data.labels: contains a label twice (line 5)",
        ),
        # TextClassifierModelConfig, and its check across the model and data sections
        (
            "task: sentiment\ndata: {path: t}\nmodel:\n  self_attention: luong\n",
            "model.self_attention: needs pooling 'attention', 'max' or 'structured': 'last' reads the "
            "encoder's final states, which the block does not change (line 4)",
        ),
        (
            "task: sentiment\ndata: {path: t}\nmodel:\n  word_vectors:\n    path: glove.txt\n",
            "model.word_vectors.path: pretrained vectors are of words: set data.tokenizer to 'words' (line 5)",
        ),
        # TaggingDataConfig
        ("task: ner\n", "data.path: required: the CoNLL training file"),
        ("task: ner\ndata:\n  path: t\n  tag_column: 0\n", "data.tag_column: must differ from token_column (0) (line 4)"),
        (
            "task: ner\ndata:\n  path: t\n  token_column: 2\n  tag_column: 2\n",
            "data.tag_column: must differ from token_column (2) (line 5)",
        ),
        # CaptioningDataConfig
        ("task: captioning\n", "data.captions: required: the caption file"),
        ("task: captioning\ndata: {captions: c}\n", "data.images: required: the folder of images"),
        (
            "task: captioning\ndata: {captions: c, images: i}\n",
            "data.train_split: required for the 'flickr' format: a list of image names",
        ),
        (
            "task: captioning\ndata: {captions: c, images: i, validation_split: v}\n",
            "data.train_split: required for the 'flickr' format: a list of image names",
        ),
        (
            "task: captioning\ndata: {captions: c, images: i, train_split: t}\n",
            "data.validation_split: required for the 'flickr' format: a list of image names",
        ),
        (
            "task: captioning\ndata: {captions: c, images: i, validation_captions: v}\n",
            "data.train_split: required for the 'flickr' format: a list of image names",
        ),
        (
            "task: captioning\ndata: {format: coco, captions: c, images: i}\n",
            "data.validation_captions: required for the 'coco' format: the validation captions JSON",
        ),
        # BackboneConfig
        (
            f"task: captioning\n{CAPTIONS}model:\n  backbone: {{fine_tune_from: block3}}\n",
            "model.backbone.fine_tune_from: only for a 'file' or 'application' backbone; the 'cnn' trains "
            "entirely (line 4)",
        ),
        (
            f"task: captioning\n{CAPTIONS}model:\n  backbone: {{fine_tune_from: block3, filters: []}}\n",
            "model.backbone.fine_tune_from: only for a 'file' or 'application' backbone; the 'cnn' trains "
            "entirely (line 4)",
        ),
        (
            f"task: captioning\n{CAPTIONS}model:\n  backbone: {{type: file}}\n",
            "model.backbone.path: required for a 'file' backbone: the .keras model",
        ),
        (
            f"task: captioning\n{CAPTIONS}model:\n  backbone: {{filters: []}}\n",
            "model.backbone.filters: expected a list of positive filter counts; got [] (line 4)",
        ),
        (
            f"task: captioning\n{CAPTIONS}model:\n  backbone:\n    filters: [4, 0]\n",
            "model.backbone.filters: expected a list of positive filter counts; got [4, 0] (line 5)",
        ),
        (
            f"task: captioning\n{CAPTIONS}model:\n  backbone:\n    filters: [-1, 8]\n",
            "model.backbone.filters: expected a list of positive filter counts; got [-1, 8] (line 5)",
        ),
        # PairAugmentConfig, TokenAugmentConfig
        (
            "task: translation\ndata:\n  path: p\n  augment: {lower_case: 0.5, upper_case: 0.3, title_case: 0.3}\n",
            "data.augment.lower_case: lower_case + upper_case + title_case are shares of one draw: expected at most "
            "1 in all; got 1.1 (line 4)",
        ),
        (
            "task: translation\ndata:\n  path: p\n  augment:\n    conjunctions: [y]\n",
            "data.augment.conjunctions: expected two words, the source's and the target's; got ['y'] (line 5)",
        ),
        (
            "task: translation\ndata:\n  path: p\n  augment:\n    conjunctions: [y, ' and']\n",
            "data.augment.conjunctions: expected two words, the source's and the target's; got ['y', ' and'] (line 5)",
        ),
        (
            "task: ner\ndata:\n  path: t\n  augment: {lower_case: 0.75, upper_case: 0.5}\n",
            "data.augment.lower_case: lower_case + upper_case are shares of one draw: expected at most 1 in all; "
            "got 1.25 (line 4)",
        ),
        # CaptionerModelConfig
        (
            f"task: captioning\n{CAPTIONS}model:\n  attention: {{type: luong, score: dot}}\n",
            "model.attention.score: 'dot' needs grid features of the decoder's size; use 'general' or 'concat' "
            "(line 4)",
        ),
        (
            f"task: captioning\n{CAPTIONS}model:\n  attention:\n    type: none\n",
            "model.attention.type: captioning attends over the image grid; use 'bahdanau' or 'luong' (line 5)",
        ),
        (
            f"task: captioning\n{CAPTIONS}model:\n  ensemble: 2\n  backbone: {{type: file, path: b.keras, "
            "fine_tune_from: block3}\n",
            "model.ensemble: the members cannot share a fine-tuned backbone stage (backbone.fine_tune_from); "
            "expected 1 or no fine_tune_from (line 4)",
        ),
    ],
)
def test_each_cross_field_check_names_the_field_and_says_why(tmp_path, text, expected):
    path = write(tmp_path, text)
    assert error_of(path) == f"{path}: {expected}"


@pytest.mark.parametrize(
    "text, dotted, value",
    [
        ("task: toy\nmodel:\n  encoder: {units: 32, bidirectional: true}\n  decoder: {units: 64}\n  attention: {score: dot}\n", "model.attention.score", "dot"),
        ("task: toy\nmodel:\n  encoder: {units: 32}\n  decoder: {units: 64}\n  attention: {type: bahdanau, score: dot}\n", "model.attention.score", "dot"),
        ("task: toy\nmodel:\n  encoder: {units: 32}\n  decoder: {units: 64}\n", "model.attention.score", "general"),
        ("task: toy\nmodel:\n  encoder: {units: 64, cell_type: gru, num_layers: 2}\n  decoder: {units: 64, cell_type: gru, num_layers: 2}\n  bridge: copy\n", "model.bridge", "copy"),
        ("task: toy\nmodel:\n  encoder: {units: 32, bidirectional: true, merge_mode: sum}\n  decoder: {units: 64}\n  bridge: copy\n", "model.bridge", "copy"),
        ("task: toy\ndistribute: {strategy: one_device, devices: [/cpu:0]}\n", "distribute.devices", ["/cpu:0"]),
        ("task: toy\ndistribute: {strategy: mirrored, devices: [a, b]}\n", "distribute.devices", ["a", "b"]),
        ("task: toy\ndistribute: {strategy: tpu, devices: []}\n", "distribute.strategy", "tpu"),
        ("task: toy\ndata: {min_length: 4, max_length: 4}\n", "data.min_length", 4),
        ("task: translation\ndata: {path: p, source_column: 0, target_column: 1}\n", "data.target_column", 1),
        ("task: sentiment\ndata: {path: t, labels: [a, b], label_names: [x, y]}\n", "data.label_names", ["x", "y"]),
        ("task: sentiment\ndata: {path: t, format: lines, labels: [neg, pos]}\n", "data.labels", ["neg", "pos"]),
        ("task: ner\ndata: {path: t, token_column: 0, tag_column: -1}\n", "data.tag_column", -1),
        ("task: ner\ndata: {path: t, token_column: 1, tag_column: 0}\n", "data.tag_column", 0),
        ("task: captioning\ndata: {format: coco, captions: c, images: i, validation_captions: v}\n", "data.format", "coco"),
        (f"task: captioning\n{CAPTIONS}model:\n  backbone: {{type: application, fine_tune_from: block3}}\n", "model.backbone.fine_tune_from", "block3"),
        (f"task: captioning\n{CAPTIONS}model:\n  backbone: {{type: file, path: m.keras, fine_tune_from: b, filters: []}}\n", "model.backbone.filters", []),
        (f"task: captioning\n{CAPTIONS}model:\n  backbone: {{filters: [1]}}\n", "model.backbone.filters", [1]),
        (f"task: captioning\n{CAPTIONS}model:\n  attention: {{type: bahdanau, score: dot}}\n", "model.attention.score", "dot"),
        # attention type 'none' with a bridge or summary_input; placement and input_feeding; combine and the output
        ("task: toy\nmodel:\n  attention: {type: none}\n  bridge: dense\n", "model.bridge", "dense"),
        ("task: toy\nmodel:\n  attention: {type: none}\n  bridge: copy\n  decoder: {placement: after}\n", "model.bridge", "copy"),
        ("task: toy\nmodel:\n  attention: {type: none}\n  bridge: none\n  decoder: {summary_input: true}\n", "model.bridge", "none"),
        ("task: toy\nmodel:\n  attention: {type: none}\n  decoder: {summary_input: true}\n", "model.decoder.summary_input", True),
        ("task: translation\ndata: {path: p}\nmodel:\n  attention: {type: bahdanau}\n  decoder: {summary_input: false}\n", "model.attention.type", "bahdanau"),
        ("task: toy\nmodel:\n  decoder: {placement: before, input_feeding: false}\n", "model.decoder.input_feeding", False),
        ("task: toy\nmodel:\n  decoder: {placement: before}\n", "model.decoder.placement", "before"),
        ("task: toy\nmodel:\n  decoder: {placement: after, input_feeding: true}\n", "model.decoder.input_feeding", True),
        ("task: toy\nmodel:\n  decoder: {units: 32, combine: residual, output_size: 32}\n", "model.decoder.output_size", 32),
        ("task: toy\nmodel:\n  decoder: {combine: residual}\n", "model.decoder.combine", "residual"),
        ("task: toy\nmodel:\n  decoder: {units: 32, output_size: 64}\n", "model.decoder.output_size", 64),
        ("task: toy\nmodel:\n  decoder: {deep_output: maxout, combine: tanh}\n", "model.decoder.deep_output", "maxout"),
        ("task: toy\nevaluation: {length_buckets: [1]}\n", "evaluation.length_buckets", [1]),
        ("task: toy\nevaluation: {length_buckets: [1, 2, 10000]}\n", "evaluation.length_buckets", [1, 2, 10000]),
        ("task: sentiment\ndata: {path: t}\nmodel: {self_attention: luong, pooling: attention}\n", "model.pooling", "attention"),
        ("task: sentiment\ndata: {path: t}\nmodel: {self_attention: bahdanau, pooling: max}\n", "model.pooling", "max"),
        ("task: sentiment\ndata: {path: t}\nmodel: {self_attention: luong, pooling: structured}\n", "model.pooling", "structured"),
        ("task: sentiment\ndata: {path: t, tokenizer: words}\nmodel:\n  word_vectors: {path: /v/glove.txt}\n", "model.word_vectors.path", "/v/glove.txt"),
        ("task: translation\ndata:\n  path: p\n  augment: {lower_case: 0.5, upper_case: 0.25, title_case: 0.25}\n",
         "data.augment.title_case", 0.25),
        ("task: translation\ndata:\n  path: p\n  augment: {conjunctions: [y, and]}\n", "data.augment.conjunctions",
         ["y", "and"]),
        ("task: ner\ndata:\n  path: t\n  augment: {lower_case: 0.5, upper_case: 0.5}\n", "data.augment.upper_case", 0.5),
        (f"task: captioning\n{CAPTIONS}model:\n  attention: {{type: bahdanau}}\n", "model.attention.type", "bahdanau"),
    ],
)
def test_what_the_cross_field_checks_allow(tmp_path, text, dotted, value):
    got = load_recipe(write(tmp_path, text))
    for part in dotted.split("."):
        got = getattr(got, part)
    assert got == value


def test_a_cross_field_problem_given_with_set_names_the_flag(tmp_path):
    path = write(tmp_path, "task: toy\n")
    assert error_of(path, ["evaluation.length_buckets=[5, 5]"]) == (
        "--set evaluation.length_buckets: expected increasing positive lengths, such as [5, 10, 20]; got [5, 5]"
    )
    assert error_of(path, ["model.attention.type=none", "model.bridge=none"]) == (
        "--set model.bridge: with attention type 'none' the decoder sees the source only through the bridge "
        "or decoder.summary_input; use 'dense' or 'copy'"
    )


def test_captioning_refuses_the_summary_input_that_replaces_attention(tmp_path):
    path = write(tmp_path, f"task: captioning\n{CAPTIONS}model:\n  decoder: {{summary_input: true}}\n")
    assert error_of(path) == (
        f"{path}: model.decoder.summary_input: captioning attends over the image grid instead of reading a summary; "
        "set it false (line 4)"
    )


# --- loader: exact messages of every way a file or a --set flag can be wrong ---

TOP_LEVEL = "task, name, description, seed, backend, data, model, training, evaluation, export, distribute"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", "task: missing; expected one of toy, translation, sentiment, ner, captioning"),
        ("# only a comment\n", "task: missing; expected one of toy, translation, sentiment, ner, captioning"),
        ("hello\n", "expected a mapping of sections at the top level; got 'hello'"),
        ("- task\n- toy\n", "expected a mapping of sections at the top level; got a list"),
        ("task: toy\ntraining:\n  epochs: [1\n", "invalid YAML: expected ',' or ']', but got '<stream end>' (line 4)"),
        ("task: toy\x01\n", "invalid YAML: unacceptable character #x0001: special characters are not allowed"),
        (
            "task: !!python/object/apply:os.system ['echo pwned']\n",
            "invalid YAML: could not determine a constructor for the tag "
            "'tag:yaml.org,2002:python/object/apply:os.system' (line 1)",
        ),
        ("task: toy\n1: x\n", f"1: unknown key; expected one of {TOP_LEVEL} (line 2)"),
        ("task: toy\nseeds: 1\n", f"seeds: unknown key; expected one of {TOP_LEVEL} (did you mean 'seed'?) (line 2)"),
        ("task: toy\nexport:\n  enabled:\n", "export.enabled: expected true or false; got nothing (null) (line 3)"),
        ("task: toy\ntraining:\n  epochs: {a: 1}\n", "training.epochs: expected an integer; got a mapping (line 3)"),
        ("task: toy\ntraining:\n  monitor: [a]\n", "training.monitor: expected a string; got a list (line 3)"),
        ("task: toy\ntraining:\n  epochs: false\n", "training.epochs: expected an integer; got false (line 3)"),
        ("task: toy\nname: .hidden\n", "name: expected letters, digits, '.', '_' or '-' (a folder name); got '.hidden' (line 2)"),
        ("task: toy\nname: ../escape\n", "name: expected letters, digits, '.', '_' or '-' (a folder name); got '../escape' (line 2)"),
        ("task:\n", "task: missing; expected one of toy, translation, sentiment, ner, captioning (line 1)"),
        ("task: translation\ndata:\n", "data.path: required: the file of sentence pairs"),
        ("task: toy\ndistribute:\n  devices: a\n", "distribute.devices: expected a list of strings; got 'a' (line 3)"),
        (
            "task: captioning\ndata: {captions: c, images: i, train_split: t, validation_split: v}\n"
            "model:\n  backbone:\n    filters: 8\n",
            "model.backbone.filters: expected a list of integers; got 8 (line 5)",
        ),
        ("task: toy\ntraining:\n  clipnorm: abc\n", "training.clipnorm: expected a number; got 'abc' (line 3)"),
        ("task: toy\ntraining:\n  monitor: val_accuracy\n",
         "training.monitor: expected one of val_loss, val_token_accuracy for task toy; got 'val_accuracy' (line 3)"),
        ("task: ner\ndata: {path: t}\ntraining:\n  monitor: val_token_accuracy\n",
         "training.monitor: expected one of val_loss, val_f1 for task ner; got 'val_token_accuracy' (line 4)"),
    ],
)
def test_exact_messages_of_bad_recipe_files(tmp_path, text, expected):
    path = write(tmp_path, text)
    assert error_of(path) == f"{path}: {expected}"


def test_a_name_from_the_file_name_is_checked_too(tmp_path):
    path = write(tmp_path, "task: toy\n", name="my recipe.yaml")
    assert error_of(path) == f"{path}: name: expected letters, digits, '.', '_' or '-' (a folder name); got 'my recipe'"
    assert load_recipe(write(tmp_path, "task: toy\n", name="a.b_c-1.yaml")).name == "a.b_c-1"
    assert load_recipe(path, ["name=ok"]).name == "ok"


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (["=3"], "--set '=3': expected KEY=VALUE with a dotted key, e.g. training.epochs=3"),
        (["training..epochs=3"], "--set 'training..epochs=3': expected KEY=VALUE with a dotted key, e.g. training.epochs=3"),
        (["1x=3"], "--set '1x=3': expected KEY=VALUE with a dotted key, e.g. training.epochs=3"),
        (["training.batch-size=3"], "--set 'training.batch-size=3': expected KEY=VALUE with a dotted key, e.g. training.epochs=3"),
        (["epochs=3"], f"--set epochs: unknown key epochs; expected one of {TOP_LEVEL}"),
        (["Training.Epochs=3"], f"--set Training.Epochs: unknown key Training; expected one of {TOP_LEVEL} (did you mean 'training'?)"),
        (["_x=3"], f"--set _x: unknown key _x; expected one of {TOP_LEVEL}"),
        (["tranining.epochs=3"], f"--set tranining.epochs: unknown key tranining; expected one of {TOP_LEVEL} (did you mean 'training'?)"),
        (
            ["training.zzz=3"],
            "--set training.zzz: unknown key training.zzz; expected one of epochs, batch_size, optimizer, "
            "learning_rate, clipnorm, weight_decay, early_stopping_patience, monitor, max_minutes, learning_rate_schedule, "
            "learning_rate_decay, ema_momentum, label_smoothing, "
            "checkpoint_every_steps, keep_checkpoints, average_last, precision, matmul_precision",
        ),
        (
            ["data.x.y=3"],
            "--set data.x.y: unknown key data.x; expected one of train_size, validation_size, min_length, max_length, num_symbols",
        ),
        (["training=3"], "--set training: expected a mapping; got 3"),
        (["seed.x=3"], "--set seed.x: seed is a value, not a section"),
        (["data.train_size.x=3"], "--set data.train_size.x: data.train_size is a value, not a section"),
        (["model.encoder.units.x=3"], "--set model.encoder.units.x: model.encoder.units is a value, not a section"),
        (["model.encoder.units=3", "model.encoder.units.x=3"], "--set model.encoder.units.x: model.encoder.units is not a section"),
        (["training.epochs=0"], "--set training.epochs: expected at least 1; got 0"),
        (["training.epochs= 0"], "--set training.epochs: expected at least 1; got 0"),
        (["training.monitor=val_accuracy"],
         "--set training.monitor: expected one of val_loss, val_token_accuracy for task toy; got 'val_accuracy'"),
        (["name=a/b"], "--set name: expected letters, digits, '.', '_' or '-' (a folder name); got 'a/b'"),
        (["task=nope"], "--set task: expected one of toy, translation, sentiment, ner, captioning; got 'nope'"),
        (["task=translation"], "x.yaml: data.path: required: the file of sentence pairs"),
        (["data.min_length=11"], "--set data.min_length: must not exceed max_length (10); got 11"),
        (["data={min_length: 11}"], "--set data: data.min_length: must not exceed max_length (10); got 11"),
        (["model.decoding={beam_width: 0}"], "--set model.decoding: model.decoding.beam_width: expected at least 1; got 0"),
        (["training.learning_rate=true"], "--set training.learning_rate: expected a number; got true"),
        (["training.epochs=[1"], "--set training.epochs: expected an integer; got '[1'"),
        (["training.epochs="], "--set training.epochs: expected an integer; got nothing (null)"),
    ],
)
def test_exact_messages_of_bad_overrides(tmp_path, overrides, expected):
    path = write(tmp_path, "task: toy\n")
    message = error_of(path, overrides)
    if expected.startswith("x.yaml"):
        expected = f"{tmp_path}/{expected}"
    assert message == expected


@pytest.mark.parametrize(
    "text, override, expected",
    [
        ("task: toy\nmodel: 3\n", "model.encoder.units=3", "--set model.encoder.units: model is not a section"),
        ("task: toy\nmodel:\n  encoder: 5\n", "model.encoder.units=3", "--set model.encoder.units: model.encoder is not a section"),
        ("task: toy\nmodel:\n  encoder: [1]\n", "model.encoder.units=3", "--set model.encoder.units: model.encoder is not a section"),
    ],
)
def test_set_into_a_value_of_the_file_is_refused(tmp_path, text, override, expected):
    assert error_of(write(tmp_path, text), [override]) == expected


def test_set_into_an_empty_section_of_the_file_fills_it(tmp_path):
    path = write(tmp_path, "task: toy\nmodel:\n  encoder:\ntraining:\n")
    recipe = load_recipe(path, ["model.encoder.units=3", "training.epochs=2"])
    assert (recipe.model.encoder.units, recipe.model.encoder.cell_type, recipe.training.epochs) == (3, "lstm", 2)


@pytest.mark.parametrize("task", ["toyy", "[toy]"])
def test_set_into_data_of_an_unknown_task_reports_the_task(tmp_path, task):
    path = write(tmp_path, f"task: {task}\n")
    shown = "'toyy'" if task == "toyy" else "a list"
    assert error_of(path, ["data.anything.deeper=1"]) == (
        f"{path}: task: expected one of toy, translation, sentiment, ner, captioning; got {shown} (line 1)"
    )
    assert error_of(path, ["model.x=1"]).startswith(f"{path}: task: expected one of")


def test_set_keys_are_checked_against_the_task_the_flags_choose(tmp_path):
    path = write(tmp_path, "task: toy\n")
    recipe = load_recipe(path, ["task=ner", "data.path=/d/train.conll", "model.output=softmax"])
    assert (recipe.task, recipe.data.path, recipe.model.output) == ("ner", "/d/train.conll", "softmax")
    assert error_of(path, ["data.path=x"]) == (
        "--set data.path: unknown key data.path; expected one of train_size, validation_size, min_length, "
        "max_length, num_symbols"
    )


@pytest.mark.parametrize(
    "override, dotted, value",
    [
        (" training.epochs =3", "training.epochs", 3),
        ("training.epochs= 3", "training.epochs", 3),
        ("description=a=b", "description", "a=b"),
        ("description=a: b: c", "description", "a: b: c"),  # not YAML: the text as it is
        ("description=[unclosed", "description", "[unclosed"),
        ("training.clipnorm=", "training.clipnorm", None),
        ("training.clipnorm=null", "training.clipnorm", None),
        ("training.early_stopping_patience=3", "training.early_stopping_patience", 3),
        ("model.encoder={units: 16, cell_type: gru}", "model.encoder.units", 16),
        ("training.learning_rate=1", "training.learning_rate", 1.0),
    ],
)
def test_set_values(tmp_path, override, dotted, value):
    got = load_recipe(write(tmp_path, "task: toy\n"), [override])
    for part in dotted.split("."):
        got = getattr(got, part)
    assert got == value and type(got) is type(value)


def test_integers_given_for_numbers_become_floats(tmp_path):
    recipe = load_recipe(write(tmp_path, "task: toy\ntraining:\n  learning_rate: 1\n  clipnorm: 5\n  max_minutes: 2\n"))
    for value, expected in [
        (recipe.training.learning_rate, 1.0), (recipe.training.clipnorm, 5.0), (recipe.training.max_minutes, 2.0)
    ]:
        assert value == expected and type(value) is float


def test_lists_are_copied_and_optional_values_may_be_null(tmp_path):
    recipe = load_recipe(
        write(tmp_path, "task: toy\ntraining:\n  clipnorm: null\n  early_stopping_patience:\ndistribute: {strategy: mirrored, devices: [a, b]}\n")
    )
    assert recipe.training.clipnorm is None and recipe.training.early_stopping_patience is None
    assert recipe.distribute.devices == ["a", "b"] and type(recipe.distribute.devices) is list


def test_every_data_section_is_built_even_when_left_out(tmp_path):
    from seqtasks.tasks.toy.config import ToyDataConfig

    assert load_recipe(write(tmp_path, "task: toy\n")).data == ToyDataConfig()
    assert load_recipe(write(tmp_path, "task: toy\ndata:\nmodel:\n")).data == ToyDataConfig()


def test_the_first_problem_of_a_section_is_reported_in_field_order(tmp_path):
    path = write(tmp_path, "task: toy\ntraining:\n  batch_size: 0\n  epochs: 0\n")
    assert error_of(path) == f"{path}: training.epochs: expected at least 1; got 0 (line 4)"


def test_data_paths_home_and_empty(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    text = "task: sentiment\ndata:\n  path: ~/texts.csv\n  validation_path: ''\n"
    recipe = load_recipe(write(tmp_path, text))
    assert recipe.data.path == str(tmp_path / "home" / "texts.csv")
    assert recipe.data.validation_path == ""  # empty: no file, not the recipe's folder
    monkeypatch.chdir(tmp_path / "..")
    recipe = load_recipe(write(tmp_path, text), ["data.validation_path=v/./w.csv", "data.path=/abs//t.csv"])
    assert recipe.data.validation_path == str((tmp_path / "..").resolve() / "v" / "w.csv")
    assert recipe.data.path == "/abs/t.csv"


def test_a_data_section_given_with_set_resolves_its_paths_from_the_current_folder(tmp_path, monkeypatch):
    folder = tmp_path / "recipes"
    folder.mkdir()
    monkeypatch.chdir(tmp_path)
    path = write(folder, "task: translation\ndata:\n  path: in_recipe.tsv\n")
    assert load_recipe(path).data.path == str(folder / "in_recipe.tsv")
    assert load_recipe(path, ["data={path: here.tsv}"]).data.path == str(tmp_path / "here.tsv")
    assert load_recipe(path, ["data.encoding=latin-1"]).data.path == str(folder / "in_recipe.tsv")


def test_dumped_recipes_keep_the_schema_order(tmp_path):
    recipe = load_recipe(write(tmp_path, "task: toy\n"), ["model.encoder.num_layers=2"])
    text = dump_recipe(recipe)
    assert text.startswith(
        "task: toy\nname: x\ndescription: ''\nseed: 0\nbackend: auto\ndata:\n  train_size: 4000\n  validation_size: 400\n"
        "  min_length: 3\n  max_length: 10\n  num_symbols: 10\nmodel:\n  embedding_dim: 64\n  encoder:\n"
        "    cell_type: lstm\n    units: 128\n    num_layers: 2\n"
    )


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda tmp: tmp / "missing.yaml", "{path}: no such recipe file"),
        (lambda tmp: tmp, "{path}: is a folder, expected a recipe file"),
        (lambda tmp: (tmp / "l.yaml").write_bytes(b"task: toy\n# caf\xe9\n") and tmp / "l.yaml", "{path}: not UTF-8 text (byte 15)"),
        (lambda tmp: (tmp / "f").write_text("") or tmp / "f" / "x.yaml", "{path}: cannot read: Not a directory"),
    ],
)
def test_exact_messages_of_unreadable_recipe_files(tmp_path, make, expected):
    path = make(tmp_path)
    assert error_of(path) == expected.format(path=path)


# A process in the plain C locale, where Python's default text encoding is ASCII.
ASCII_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}


@pytest.mark.slow
@pytest.mark.core
def test_a_recipe_is_read_as_utf8_whatever_the_locale(tmp_path):
    from tests.conftest import run_python

    path = tmp_path / "r.yaml"
    path.write_bytes("task: toy\ndescription: café ☕\n".encode("utf-8"))
    assert load_recipe(path).description == "café ☕"
    code = f"from seqtasks.recipe import load_recipe; print(ascii(load_recipe({str(path)!r}).description))"
    result = run_python(code, env=ASCII_LOCALE, timeout=60)
    assert result.stdout == "'caf\\xe9 \\u2615'\n", result.stderr


@pytest.mark.parametrize(
    "hint, shown", [(dict, "<class 'dict'>"), (typing.Union[int, str], "typing.Union[int, str]")]
)
def test_an_unsupported_field_type_is_a_programming_error(tmp_path, hint, shown):
    from seqtasks.recipe.loader import _build, _Sources

    Odd = dataclasses.make_dataclass("Odd", [("table", hint, dataclasses.field(default=None))])
    with pytest.raises(TypeError) as raised:
        _build(Odd, {"table": 1}, "s.", _Sources(tmp_path / "r.yaml", {}, []))
    assert str(raised.value) == f"unsupported recipe field type {shown} at s.table"


@dataclasses.dataclass
class _Shapes:
    """Field types the schema may grow: optional lists and choices, a list of unstated items."""

    sizes: typing.Optional[list[int]] = None
    mode: typing.Optional[typing.Literal["a", "b"]] = None
    names: typing.List = dataclasses.field(default_factory=list)


@pytest.mark.parametrize(
    "raw, expected",
    [
        ({"sizes": [1, 2]}, _Shapes(sizes=[1, 2])),
        ({"sizes": None, "mode": None}, _Shapes()),
        ({"mode": "b"}, _Shapes(mode="b")),
        ({"names": ["x"]}, _Shapes(names=["x"])),
        ({"sizes": ["1"]}, "r.yaml: s.sizes: expected a list of integers; got a list"),
        ({"mode": "c"}, "r.yaml: s.mode: expected one of a, b; got 'c'"),
        ({"names": [1]}, "r.yaml: s.names: expected a list of strings; got a list"),
    ],
)
def test_optional_lists_and_choices_and_bare_lists(tmp_path, raw, expected):
    from seqtasks.recipe.loader import _build, _Sources

    sources = _Sources(tmp_path / "r.yaml", {}, [])
    if isinstance(expected, str):
        with pytest.raises(RecipeError) as raised:
            _build(_Shapes, raw, "s.", sources)
        assert str(raised.value) == f"{tmp_path}/{expected}"
    else:
        assert _build(_Shapes, raw, "s.", sources) == expected


def test_empty_sections_take_their_defaults(tmp_path):
    from seqtasks.recipe.schema import EncoderConfig, ExportConfig

    recipe = load_recipe(write(tmp_path, "task: toy\nexport:\nmodel:\n  encoder:\n  decoding:\n"))
    assert recipe.export == ExportConfig() and recipe.model.encoder == EncoderConfig()


def test_an_error_in_a_section_given_with_set_names_the_field(tmp_path):
    path = write(tmp_path, "task: toy\n")
    assert error_of(path, ["model.encoder={units: -1}"]) == "--set model.encoder: model.encoder.units: expected at least 1; got -1"
    assert error_of(path, ["model={encoder: {unit: 3}}"]) == (
        "--set model: model.encoder.unit: unknown key; expected one of cell_type, units, num_layers, bidirectional, "
        "merge_mode, residual, dropout (did you mean 'units'?)"
    )
    # the flag named is the one that gave the value: the last one at or above the field
    assert error_of(path, ["model={encoder: {units: 0}}", "model.encoder.units=-2"]) == (
        "--set model.encoder.units: expected at least 1; got -2"
    )
    assert error_of(path, ["model.encoder.units=-2", "model={encoder: {units: 0}}"]) == (
        "--set model: model.encoder.units: expected at least 1; got 0"
    )


def test_an_alias_of_the_whole_document_is_refused_before_its_values_are_counted(tmp_path, walk_guard, monkeypatch):
    from seqtasks.recipe import loader

    monkeypatch.setattr(loader, "MAX_ALIASED_VALUES", 3)
    path = write(tmp_path, "&doc\ntask: toy\nname: n\nx: *doc\n")
    assert error_of(path) == f"{path}: a YAML alias refers to a value that contains it (line 1)"


def test_alias_counts_of_lists_and_mappings(tmp_path, walk_guard, monkeypatch):
    """Worked out by hand: `[a, b]` is 3 values, `{k: [a, b]}` 5; an alias repeats them all."""
    from seqtasks.recipe import loader

    text = "task: toy\nx: &m {k: &l [a, b]}\ny: [*l, *m]\n"  # 3 + 5 = 8 aliased values
    monkeypatch.setattr(loader, "MAX_ALIASED_VALUES", 8)
    assert error_of(write(tmp_path, text)).endswith("x: unknown key; expected one of task, name, description, seed, "
                                                     "backend, data, model, training, evaluation, export, distribute (line 2)")
    monkeypatch.setattr(loader, "MAX_ALIASED_VALUES", 7)
    path = write(tmp_path, text)
    assert error_of(path) == f"{path}: YAML aliases expand to more than 7 values (line 3); write the values out instead"
    # aliases inside an anchor count again each time it is repeated: y holds 1 + 3 + 5 = 9 values
    text = "task: toy\nx: &m {k: &l [a, b]}\ny: &y [*l, *m]\nz: *y\n"  # 8 + 9 = 17
    monkeypatch.setattr(loader, "MAX_ALIASED_VALUES", 17)
    assert "unknown key" in error_of(write(tmp_path, text))
    monkeypatch.setattr(loader, "MAX_ALIASED_VALUES", 16)
    path = write(tmp_path, text)
    # the line is that of the value holding the alias: here the top level
    assert error_of(path) == f"{path}: YAML aliases expand to more than 16 values (line 1); write the values out instead"


def test_every_set_key_is_checked_not_only_the_first(tmp_path):
    path = write(tmp_path, "task: toy\n")
    expected = (
        "--set training.zzz: unknown key training.zzz; expected one of epochs, batch_size, optimizer, "
        "learning_rate, clipnorm, weight_decay, early_stopping_patience, monitor, max_minutes, learning_rate_schedule, "
        "learning_rate_decay, ema_momentum, label_smoothing, "
        "checkpoint_every_steps, keep_checkpoints, average_last, precision, matmul_precision"
    )
    assert error_of(path, ["training.epochs=3", "training.zzz=1"]) == expected
    # data of an unknown task is left for the task error, but the keys after it are still checked
    assert error_of(write(tmp_path, "task: toyy\n"), ["data.x=1", "training.zzz=1"]) == expected


# --- hostile values: non-finite numbers, huge integers, long strings; every field of the schema ---


def _leaf_fields():
    """`(task, dotted path, type, metadata)` of every scalar and list field; the common sections once, with toy."""
    from seqtasks.recipe.schema import Recipe
    from seqtasks.tasks.table import TASKS

    def walk(cls, prefix):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            if dataclasses.is_dataclass(hint):
                yield from walk(hint, f"{prefix}{f.name}.")
            elif hint is not typing.Any:
                if typing.get_origin(hint) is typing.Union:  # Optional[X]
                    hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
                yield f"{prefix}{f.name}", hint, f.metadata

    rows = []
    for name, task in TASKS.items():
        sections = [(task.data_config, "data."), (task.model_config, "model.")] + ([(Recipe, "")] if name == "toy" else [])
        for cls, prefix in sections:
            rows += [(name, *field) for field in walk(cls, prefix)]
    return rows


# The data each task requires, so that only the field under test is wrong.
REQUIRED_DATA = {
    "toy": "",
    "translation": "data: {path: p.tsv}\n",
    "sentiment": "data: {path: t.csv}\n",
    "ner": "data: {path: t.conll}\n",
    "captioning": "data: {captions: c, images: i, train_split: t, validation_split: v}\n",
}
FLOAT_FIELDS = [(task, dotted) for task, dotted, hint, _ in _leaf_fields() if hint is float]
INTEGER_FIELDS = [(task, dotted, meta) for task, dotted, hint, meta in _leaf_fields() if hint in (int, list[int])]


def _nested(dotted, value):
    """`a.b.c`, 1 -> the block YAML lines of `a: {b: {c: 1}}`."""
    *parents, leaf = dotted.split(".")
    lines = [f"{'  ' * depth}{part}:" for depth, part in enumerate(parents)]
    return "\n".join([*lines, f"{'  ' * len(parents)}{leaf}: {value}"]) + "\n"


def test_the_field_lists_below_cover_the_schema():
    assert len(FLOAT_FIELDS) >= 15 and len(INTEGER_FIELDS) >= 45
    assert ("toy", "training.learning_rate") in FLOAT_FIELDS
    assert {"seed", "model.embedding_dim", "model.decoding.max_length", "model.backbone.filters"} <= {
        dotted for _, dotted, _ in INTEGER_FIELDS
    }


@pytest.mark.parametrize("task, dotted", FLOAT_FIELDS, ids=[f"{t}-{d}" for t, d in FLOAT_FIELDS])
def test_every_float_field_refuses_nan_and_infinities_naming_path_and_line(tmp_path, task, dotted):
    data = "" if dotted.startswith("data.") else REQUIRED_DATA[task]
    line = dotted.count(".") + 2 + data.count("\n")  # after the task and data lines, one line per level
    for value, shown in ((".nan", "nan"), (".inf", "inf"), ("-.Inf", "-inf")):
        path = write(tmp_path, f"task: {task}\n{data}" + _nested(dotted, value))
        assert error_of(path) == f"{path}: {dotted}: expected a finite number; got {shown} (line {line})"


@pytest.mark.parametrize("task, dotted, metadata", INTEGER_FIELDS, ids=[f"{t}-{d}" for t, d, _ in INTEGER_FIELDS])
def test_every_integer_field_has_an_upper_bound_a_practitioner_would_accept(task, dotted, metadata):
    """Both sides of each bound are tried by test_every_bound_holds_on_both_sides_in_files_and_set."""
    assert "max" in metadata, f"{dotted} has no upper bound"
    leaf = dotted.rpartition(".")[2]
    seed = leaf == "seed" or leaf.endswith("_seed")  # seeds are 32-bit (data.split_seed too)
    assert metadata["max"] <= (2**32 - 1 if seed else 10**9)
    if dotted.endswith("decoding.max_length"):  # the bound an export's with_settings signature shares
        assert metadata["max"] == MAX_DECODE_LENGTH >= 256
        return
    assert metadata["max"] >= {"epochs": 1000, "batch_size": 8192, "max_length": 1000}.get(leaf, 2**31 if seed else 10)


@pytest.mark.parametrize(
    "dotted, value, bound, line",
    [
        ("seed", 100000000000000000000, 4294967295, 2),
        ("model.embedding_dim", 1000000000000, 65536, 3),
        ("model.decoding.max_length", 1000000000000, 256, 4),
        ("model.encoder.units", 65537, 65536, 4),
        ("training.batch_size", 1048577, 1048576, 3),
        ("data.vocab_size", 1000001, 1000000, 3),
    ],
)
def test_huge_values_are_refused_when_the_recipe_is_loaded(tmp_path, dotted, value, bound, line):
    task = "sentiment" if dotted.startswith("data.") else "toy"
    path = write(tmp_path, f"task: {task}\n" + _nested(dotted, value))
    message = f"expected at most {bound}; got {value}"
    assert error_of(path) == f"{path}: {dotted}: {message} (line {line})"
    assert error_of(write(tmp_path, f"task: {task}\n", "base.yaml"), [f"{dotted}={value}"]) == f"--set {dotted}: {message}"


def test_the_backbone_filters_are_bounded_each_and_in_number(tmp_path):
    head = "task: captioning\n" + REQUIRED_DATA["captioning"] + "model:\n  backbone:\n"
    path = write(tmp_path, head + "    filters: [8, 65537]\n")
    assert error_of(path) == f"{path}: model.backbone.filters: expected entries of at most 65536; got 65537 (line 5)"
    path = write(tmp_path, head + "    image_size: 63\n    filters: [1, 1, 1, 1, 1, 1]\n")
    assert error_of(path) == f"{path}: model.backbone.filters: image_size 63 allows at most 5 stages; got 6 (line 6)"
    path = write(tmp_path, head + "    image_size: 64\n    filters: [1, 1, 1, 1, 1, 1]\n")
    assert load_recipe(path).model.backbone.filters == [1] * 6


def test_a_top_level_that_is_not_a_mapping_is_quoted_by_one_shortened_line(tmp_path):
    account_file = "".join(f"user{n}:x:{1000 + n}:{1000 + n}::/home/user{n}:/bin/sh\n" for n in range(30))
    path = write(tmp_path, account_file)  # one plain scalar: YAML folds its lines into one
    assert error_of(path) == (
        f"{path}: expected a mapping of sections at the top level; "
        f"got 'user0:x:1000:1000::/home/user0:/bin/sh u'... ({len(account_file) - 1} characters)"
    )
    path = write(tmp_path, "|\n" + "".join(f"  line {n}\n" for n in range(3)))  # a literal block keeps its line ends
    assert error_of(path) == f"{path}: expected a mapping of sections at the top level; got 'line 0'... (21 characters)"


@pytest.mark.parametrize("key, line", [("task", 1), ("name", 2), ("training.monitor", 3)])
def test_long_string_values_are_shortened_in_errors(tmp_path, key, line):
    long = "x/" * 5000
    path = write(tmp_path, f"task: {long}\n" if key == "task" else "task: toy\n" + _nested(key, long))
    assert error_of(path).endswith(f"; got {'x/' * 20!r}... (10000 characters) (line {line})")


def test_a_string_value_of_up_to_40_characters_is_quoted_whole(tmp_path):
    for length, shown in ((40, repr("x" * 40)), (41, f"{'x' * 40!r}... (41 characters)")):
        path = write(tmp_path, f"task: toy\nseed: {'x' * length}\n")
        assert error_of(path) == f"{path}: seed: expected an integer; got {shown} (line 2)"


@pytest.mark.parametrize("field", ["source_vocab_size", "target_vocab_size"])
def test_sentencepiece_vocabularies_hold_the_byte_pieces(tmp_path, field):
    path = write(tmp_path, "task: translation\ndata:\n  path: p.tsv\n  tokenizer: sentencepiece\n")
    assert error_of(path, [f"data.{field}=260"]) == (
        f"--set data.{field}: at least 261 for sentencepiece (256 byte pieces); got 260"
    )
    assert getattr(load_recipe(path, [f"data.{field}=261"]).data, field) == 261
    assert getattr(load_recipe(path, [f"data.{field}=260", "data.tokenizer=wordpiece"]).data, field) == 260


def test_n_best_beyond_the_beam_width_is_an_error(tmp_path):
    path = write(tmp_path, "task: toy\nmodel:\n  decoding:\n    beam_width: 4\n    n_best: 5\n")
    assert error_of(path) == f"{path}: model.decoding.n_best: expected 1..4 (beam_width, or num_samples when sampling); got 5 (line 5)"
    assert load_recipe(path, ["model.decoding.n_best=4"]).model.decoding.n_best == 4
    assert error_of(path, ["model.decoding.beam_width=1"]) == (
        f"{path}: model.decoding.n_best: expected 1..1 (beam_width, or num_samples when sampling); got 5 (line 5)"
    )


def test_sampling_and_the_beam_preferences_are_checked_together(tmp_path):
    path = write(tmp_path, "task: toy\nmodel:\n  decoding:\n    num_samples: 3\n    n_best: 4\n")
    assert error_of(path) == f"{path}: model.decoding.n_best: expected 1..3 (beam_width, or num_samples when sampling); got 4 (line 5)"
    decoding = load_recipe(path, ["model.decoding.n_best=3"]).model.decoding
    assert (decoding.num_samples, decoding.n_best, decoding.beam_width) == (3, 3, 1)  # samples, not beams
    for field, value, off in (("coverage_penalty", "0.4", "0.0"), ("no_repeat_ngram_size", "3", "0")):
        assert error_of(path, ["model.decoding.n_best=1", f"model.decoding.{field}={value}"]) == (
            f"--set model.decoding.{field}: a beam search preference; expected {off} when sampling (num_samples 3); "
            f"got {value}"
        )
    for field in ("temperature", "top_p"):
        assert error_of(path, ["model.decoding.n_best=1", f"model.decoding.{field}=0"]) == (
            f"--set model.decoding.{field}: expected at least 0.01; got 0.0"
        )
    assert error_of(path, ["model.decoding.n_best=1", "model.decoding.top_p=1.5"]) == (
        "--set model.decoding.top_p: expected at most 1.0; got 1.5"
    )
    assert error_of(path, ["model.decoding.n_best=1", "model.decoding.no_repeat_ngram_size=11"]) == (
        "--set model.decoding.no_repeat_ngram_size: expected at most 10; got 11"
    )


def test_a_coverage_penalty_needs_attention(tmp_path):
    path = write(tmp_path, "task: toy\nmodel:\n  attention:\n    type: none\n  decoding:\n    coverage_penalty: 0.2\n")
    assert error_of(path) == (
        f"{path}: model.decoding.coverage_penalty: reads the attention over the source; attention type 'none' has "
        "none: expected 0.0 (line 6)"
    )
    assert load_recipe(path, ["model.attention.type=luong"]).model.decoding.coverage_penalty == 0.2


def test_the_largest_blocked_ngram_is_the_one_an_export_graph_blocks():
    from seqtasks.decoding.beam import NGRAM_LIMIT
    from seqtasks.decoding.settings import BY_NAME

    assert BY_NAME["no_repeat_ngram_size"].high == NGRAM_LIMIT


def test_of_two_values_yaml_cannot_read_the_first_in_the_file_is_reported(tmp_path):
    path = write(tmp_path, "task: toy\ndata:\n  x: 2001-13-40\nseed: 2001-13-41\n")
    assert error_of(path) == f"{path}: invalid YAML: cannot read '2001-13-40' as timestamp (line 3)"
    path = write(tmp_path, "task: toy\nx: [[1, !!int a], !!int b]\n")
    assert error_of(path) == f"{path}: invalid YAML: cannot read 'a' as int (line 2)"


def test_a_recipe_file_grown_past_the_limit_after_its_size_check_is_refused(tmp_path, monkeypatch):
    from seqtasks.recipe import loader

    path = write(tmp_path, "task: toy\n")
    opened = loader.open_regular_file

    def open_then_grow(*args, **kwargs):
        handle = opened(*args, **kwargs)
        path.write_text("task: toy\nseed: 1\n")
        return handle

    monkeypatch.setattr(loader, "MAX_RECIPE_BYTES", 12)
    monkeypatch.setattr(loader, "open_regular_file", open_then_grow)
    assert error_of(path) == f"{path}: more than the 12 bytes a recipe file may have"


def test_a_missing_recipe_file_is_a_recipe_error(tmp_path):
    from seqtasks.errors import RecipeError

    with pytest.raises(RecipeError, match="missing.yaml: no such recipe file"):
        load_recipe(tmp_path / "missing.yaml")


_TOY_RECIPE = REPO / "recipes" / "toy.yaml"


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (["training.average_last=1"], "an average of one checkpoint is that checkpoint; expected 0 (none) or at least 2"),
        (["training.average_last=3"], "must not exceed training.keep_checkpoints (2); got 3"),
        (["training.average_last=2", "training.ema_momentum=0.99"],
         "training.ema_momentum already averages the weights over steps; use one or the other"),
    ],
)
def test_a_recipe_that_cannot_average_so_is_refused_naming_the_field(overrides, expected):
    with pytest.raises(RecipeError, match=re.escape(f"training.average_last: {expected}")):
        load_recipe(_TOY_RECIPE, overrides)
    assert load_recipe(_TOY_RECIPE, ["training.average_last=2"]).training.average_last == 2
    assert load_recipe(_TOY_RECIPE, ["training.average_last=3", "training.keep_checkpoints=3"]).training.average_last == 3
