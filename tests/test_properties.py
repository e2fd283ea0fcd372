"""Property tests: any recipe or data file either loads or raises the package's own error, never anything else."""

import gzip
import itertools
import json
import os
from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seqtasks.data.captions import read_coco_captions, read_flickr_tokens, read_split_list
from seqtasks.data.conll import read_conll
from seqtasks.data.labelled_text import read_label_first_tsv, read_labelled_csv
from seqtasks.data.parallel_corpus import read_parallel_tsv
from seqtasks.errors import RecipeError, SeqtasksError
from seqtasks.recipe import load_recipe, schema
from seqtasks.tasks.table import TASKS

# Only what these tests need beyond the profile `tests/conftest.py` loads (derandomized, with
# SEQTASKS_PROPERTY_EXAMPLES examples, no deadline): every other setting comes from it.
SETTINGS = settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
_counter = itertools.count()


def _field_names(cls, seen=None):
    seen = set() if seen is None else seen
    for f in fields(cls):
        seen.add(f.name)
        hint = f.type if isinstance(f.type, type) else None
        if hint is not None and is_dataclass(hint):
            _field_names(hint, seen)
    return seen


KEYS = sorted(
    set().union(*(_field_names(c) for c in vars(schema).values() if isinstance(c, type) and is_dataclass(c)))
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["lstm", "gru", "luong", "dot", "concat", "flickr", "cnn", "tsv", "mixed_float16", "1e-3"])
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), children, max_size=5),
    max_leaves=20,
)
RECIPES = st.fixed_dictionaries(
    {"task": st.sampled_from(list(TASKS)) | SCALARS},
    optional={
        section: st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=6)
        for section in ("data", "model", "training", "export", "distribute")
    }
    | {"name": SCALARS, "seed": SCALARS, "bogus": VALUES},
)
OVERRIDES = st.lists(
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(["training.epochs", "model.units", "data.path", "x"]) | st.text(max_size=12), st.text(max_size=12))
    | st.text(max_size=16),
    max_size=3,
)


def _file(tmp_path, data, compress=False):
    path = tmp_path / f"data-{next(_counter)}.txt"
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


@SETTINGS
@given(recipe=RECIPES, overrides=OVERRIDES)
def test_any_recipe_mapping_loads_or_raises_recipe_error(tmp_path, recipe, overrides):
    path = tmp_path / f"recipe-{next(_counter)}.yaml"
    path.write_text(yaml.safe_dump(recipe, allow_unicode=True), encoding="utf-8")
    try:
        loaded = load_recipe(path, overrides)
    except RecipeError as error:
        assert str(error) and "\n" not in str(error).strip()
    else:
        assert loaded.task in TASKS


@SETTINGS
@given(text=st.text(max_size=300) | st.binary(max_size=300).map(lambda b: b.decode("latin-1")))
def test_any_recipe_text_loads_or_raises_recipe_error(tmp_path, text):
    path = tmp_path / f"recipe-{next(_counter)}.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    try:
        load_recipe(path)
    except RecipeError:
        pass


PIECES = st.text(max_size=8) | st.sampled_from(["\t", " ", "#0", "B-PER", "I-", "O", "\r", ",", '"', "-DOCSTART-"])
LINES = st.lists(st.lists(PIECES, max_size=6).map("".join), max_size=8).map(
    lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass")
)
DATA = LINES | st.binary(max_size=200) | st.binary(max_size=60).map(lambda b: b"\x1f\x8b" + b)
READERS = {
    "parallel tsv": lambda p: read_parallel_tsv(p, 1, 0),
    "parallel tsv, column 3": lambda p: read_parallel_tsv(p, 0, 3),
    "conll iob2": lambda p: read_conll(p, 0, -1, "iob2"),
    "conll iob1, tag column 1": lambda p: read_conll(p, 0, 1, "iob1"),
    "flickr tokens": read_flickr_tokens,
    "split list": read_split_list,
    "coco json": read_coco_captions,
    "label-first tsv": lambda p: read_label_first_tsv(p, True),
    "csv": read_labelled_csv,
}


@SETTINGS
@given(data=DATA, compress=st.booleans(), reader=st.sampled_from(sorted(READERS)))
def test_any_data_file_reads_or_raises_seqtasks_error(tmp_path, data, compress, reader):
    path = _file(tmp_path, data, compress)
    try:
        result = READERS[reader](path)
    except SeqtasksError as error:
        assert str(error).startswith(str(path)), str(error)
    else:
        assert result  # readers refuse files without examples


@SETTINGS
@given(
    document=st.recursive(
        SCALARS,
        lambda children: st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["images", "annotations", "id", "file_name", "image_id", "caption"]), children, max_size=4),
        max_leaves=15,
    )
)
def test_any_coco_json_reads_or_raises_seqtasks_error(tmp_path, document):
    path = _file(tmp_path, json.dumps(document).encode())
    try:
        read_coco_captions(path)
    except SeqtasksError as error:
        assert str(error).startswith(str(path))


def test_a_folder_or_missing_file_is_named(tmp_path):
    for reader in READERS.values():
        for path, message in ((tmp_path, "is a folder"), (tmp_path / "missing", "no such data file")):
            try:
                reader(Path(path))
            except SeqtasksError as error:
                assert str(error).startswith(str(path)) and message in str(error)
            else:
                raise AssertionError(f"{reader} read {path}")


def test_property_tests_are_derandomized(request):
    profile = settings.get_profile("seqtasks")
    assert profile.derandomize and profile.database is None and profile.deadline is None
    chosen = request.config.getoption("--hypothesis-profile", None) or os.environ.get("HYPOTHESIS_PROFILE")
    if chosen not in (None, "seqtasks"):
        pytest.skip(f"the Hypothesis profile {chosen!r} was chosen")
    assert settings.get_current_profile_name() == "seqtasks"
    assert settings.default.derandomize
    # The settings each property test runs with: no @settings of its own may undo the profile.
    property_tests = [test for test in globals().values() if hasattr(test, "hypothesis")]
    assert len(property_tests) >= 4
    for test in property_tests:
        used = test._hypothesis_internal_use_settings
        assert used.derandomize and used.database is None, test.__name__
        assert used.max_examples == profile.max_examples, test.__name__
