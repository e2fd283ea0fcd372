import dataclasses
import textwrap

import pytest

from seqtasks.cli import builtin_recipes
from seqtasks.errors import RecipeError
from seqtasks.recipe import dump_recipe, load_recipe
from seqtasks.recipe.schema import Seq2SeqModelConfig, TrainingConfig


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


def test_the_recipe_reference_is_generated_from_the_schema_and_covers_every_key():
    from conftest import REPO

    from seqtasks.recipe.reference import reference

    text = reference()
    assert (REPO / "docs" / "recipe-reference.md").read_text(encoding="utf-8") == text, (
        "docs/recipe-reference.md is stale: run python -m seqtasks.recipe.reference > docs/recipe-reference.md"
    )
    for key in ("training.learning_rate", "model.decoding.beam_width", "data.scheme", "model.backbone.fine_tune_from"):
        assert f"| `{key}` |" in text
