"""docs/recipe-reference.md is generated from the schema; its pieces, checked on hand-written cases."""

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

import pytest

from seqtasks.recipe.reference import _bounds, _default, _rows, _type_name, reference


def test_the_committed_reference_is_the_generated_one():
    from tests.conftest import REPO

    committed = (REPO / "docs" / "recipe-reference.md").read_text(encoding="utf-8")
    assert committed == reference(), (
        "docs/recipe-reference.md is stale: run python -m seqtasks.recipe.reference > docs/recipe-reference.md"
    )


@pytest.mark.parametrize(
    "hint, expected",
    [
        (int, "integer"),
        (float, "number"),
        (bool, "true/false"),
        (str, "string"),
        (Optional[int], "integer or null"),
        (Optional[list[int]], "list of integer or null"),
        (list[str], "list of string"),
        (list[Optional[bool]], "list of true/false or null"),
        (typing.List, "list"),  # a list with no item type
        (Literal["a", "b"], "`a` \\| `b`"),
        (Literal["a", None], "`a` \\| `None`"),  # None among the choices: not an Optional
        (typing.Union[int, str], "Union"),  # a union without None is not "... or null"
        (bytes, "bytes"),  # a type without a name of its own: its class name
        (Any, "Any"),
        ("Vector", "Vector"),  # neither a known type nor a class: as written
    ],
)
def test_type_names(hint, expected):
    assert _type_name(hint) == expected


@dataclass
class _Defaults:
    required: int
    number: int = 3
    ratio: float = 0.5
    small: float = 1e-3
    missing: Optional[int] = None
    yes: bool = True
    no: bool = False
    empty: str = ""
    word: str = "lstm"
    items: list = field(default_factory=lambda: [1, 2])
    nothing: list = field(default_factory=list)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("required", ""),  # no default at all: the cell stays empty
        ("number", "3"),
        ("ratio", "0.5"),
        ("small", "0.001"),
        ("missing", "null"),
        ("yes", "true"),
        ("no", "false"),
        ("empty", '""'),
        ("word", "lstm"),
        ("items", "[1, 2]"),
        ("nothing", "[]"),
    ],
)
def test_defaults_as_the_reference_shows_them(name, expected):
    (f,) = [f for f in dataclasses.fields(_Defaults) if f.name == name]
    assert _default(f) == expected


@pytest.mark.parametrize(
    "metadata, expected",
    [
        ({}, ""),
        ({"doc": "x"}, ""),
        ({"min": 1}, ">= 1"),
        ({"max": 10}, "<= 10"),
        ({"below": 1.0}, "< 1.0"),
        ({"min": 2, "max": 10}, ">= 2, <= 10"),
        ({"below": 1.0, "min": 0.0}, ">= 0.0, < 1.0"),
        ({"min": 0, "max": 5, "below": 4}, ">= 0, <= 5, < 4"),
    ],
)
def test_bounds(metadata, expected):
    assert _bounds(metadata) == expected


@dataclass
class _Inner:
    size: int = field(default=4, metadata={"doc": "A size.", "min": 1, "max": 8})
    bare: str = "b"  # no doc


@dataclass
class _Undocumented:
    flag: bool = field(default=False, metadata={"doc": "A flag."})


@dataclass
class _Outer:
    kind: Literal["x", "y"] = field(default="x", metadata={"doc": "Either x | y, a choice."})
    rate: float = field(default=0.0, metadata={"doc": "A rate.", "min": 0.0, "below": 1.0})
    task_specific: Any = field(default=None, metadata={"doc": "Left out: documented per task."})
    inner: _Inner = field(default_factory=_Inner, metadata={"doc": "The inner section."})
    plain: _Undocumented = field(default_factory=_Undocumented)  # a section without a doc
    count: Optional[int] = field(default=None, metadata={"doc": "A count.", "min": 1})
    sizes: list[int] = field(default_factory=lambda: [2], metadata={"doc": "Sizes.", "min": 1, "max": 9})


def test_rows_of_a_hand_written_schema():
    assert _rows(_Outer, "p.") == [
        "| key | type | default | meaning |",
        "| --- | --- | --- | --- |",
        "| `p.kind` | `x` \\| `y` | `x` | Either x \\| y, a choice. |",
        "| `p.rate` | number (>= 0.0, < 1.0) | `0.0` | A rate. |",
        "| `p.count` | integer or null (>= 1) | `null` | A count. |",
        "| `p.sizes` | list of integer (each >= 1, <= 9) | `[2]` | Sizes. |",
        "",
        "#### `p.inner`",
        "",
        "The inner section.",
        "",
        "| key | type | default | meaning |",
        "| --- | --- | --- | --- |",
        "| `p.inner.size` | integer (>= 1, <= 8) | `4` | A size. |",
        "| `p.inner.bare` | string | `b` |  |",
        "",
        "#### `p.plain`",
        "",
        "",
        "",
        "| key | type | default | meaning |",
        "| --- | --- | --- | --- |",
        "| `p.plain.flag` | true/false | `false` | A flag. |",
        "",
    ]


def test_a_section_of_sections_only_has_no_table():
    @dataclass
    class OnlySections:
        inner: _Inner = field(default_factory=_Inner, metadata={"doc": "Inner."})

    lines = _rows(OnlySections, "")
    assert lines[:4] == ["#### `inner`", "", "Inner.", ""]
    assert "| key | type | default | meaning |" not in lines[:4]


def test_the_reference_has_one_section_per_task_and_ends_with_one_newline():
    from seqtasks.tasks.table import TASKS

    text = reference()
    assert text.startswith("# Recipe reference\n\nGenerated from `seqtasks/recipe/schema.py` and each task")
    assert text.endswith(" |\n") and not text.endswith("\n\n")
    for task in TASKS.values():
        assert f"## Task `{task.name}`\n\n{task.description}\n\n### `data`\n\n" in text
    assert "| `data.min_length` | integer (>= 1, <= 10000) | `3` | Shortest digit sequence. |" in text
    assert "| `model.backbone.filters` | list of integer (each <= 65536) | `[32, 64, 128]` |" in text
    assert "A recipe file is a regular file of at most 1 MiB, nested at most 32 levels deep." in text
    assert "| `data.num_symbols` | integer (>= 2, <= 10) | `10` | Distinct digits (0 to num_symbols - 1). |" in text
    assert "| `distribute.devices` | list of string | `[]` |" in text


def test_the_recipe_reference_is_generated_from_the_schema_and_covers_every_key():
    from tests.conftest import REPO

    from seqtasks.recipe.reference import reference

    text = reference()
    assert (REPO / "docs" / "recipe-reference.md").read_text(encoding="utf-8") == text, (
        "docs/recipe-reference.md is stale: run python -m seqtasks.recipe.reference > docs/recipe-reference.md"
    )
    for key in ("training.learning_rate", "model.decoding.beam_width", "data.scheme", "model.backbone.fine_tune_from"):
        assert f"| `{key}` |" in text
