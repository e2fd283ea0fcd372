"""The package's floors: no module imports from a floor above its own, so lower parts stay usable alone.

Imports inside functions count too: a local import only hides a loop.
"""

import ast

import pytest
from conftest import REPO

# Lowest first. A module may import its own floor and the floors below.
FLOORS = [
    ["errors", "utils"],
    ["layers", "decoding", "recipe", "text"],
    ["training"],
    ["data", "models", "evaluation", "export"],
    ["encoder_decoder"],
    ["tasks"],
    ["lifecycle", "inference", "convert", "converters"],
    ["serving"],
    ["cli", "__main__"],
]
FLOOR = {part: level for level, parts in enumerate(FLOORS) for part in parts}
PACKAGE = REPO / "seqtasks"


def _part(module):
    """`seqtasks.tasks.captioning.data` -> `tasks`; `seqtasks` itself -> None."""
    pieces = module.split(".")
    return pieces[1] if pieces[0] == "seqtasks" and len(pieces) > 1 else None


def _imports(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def _modules():
    return sorted(path for path in PACKAGE.rglob("*.py") if "recipes" not in path.relative_to(PACKAGE).parts)


@pytest.mark.parametrize("path", _modules(), ids=lambda path: str(path.relative_to(REPO)))
def test_no_module_imports_from_a_floor_above(path):
    module = "seqtasks." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
    own = _part(module.removesuffix(".__init__"))
    if own is None:
        return
    assert own in FLOOR, f"{path}: add its part {own!r} to a floor in FLOORS"
    above = [name for name in _imports(path) if _part(name) and FLOOR[_part(name)] > FLOOR[own]]
    assert not above, f"{module} (floor {FLOOR[own]}) imports from above: {above}"


def test_every_part_of_the_package_is_on_a_floor():
    parts = {path.stem if path.is_file() else path.name for path in PACKAGE.iterdir()}
    assert parts - {"__init__", "__pycache__"} == set(FLOOR)


def test_the_architecture_page_draws_these_floors():
    import re

    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d) \| (.+?) \| .+ \|$", page, re.M)
    drawn = [sorted(name.strip("`/").removesuffix(".py") for name in re.findall(r"`[^`]+`", parts)) for _, parts in rows]
    assert [int(level) for level, _ in rows] == list(range(len(FLOORS)))
    assert drawn == [sorted(parts) for parts in FLOORS]
