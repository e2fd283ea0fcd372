"""The package's floors: no module imports from a floor above its own, so lower parts stay usable alone.

Imports inside functions count too: a local import only hides a loop.
"""

import ast
import re

import pytest

from tests.conftest import REPO

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
# What reading a recipe imports of `tasks/`: the task table (the recipe loader finds it through its entry point,
# seqtasks/recipe/tasks.py), the tasks' recipe sections, their packages' __init__ files and the contract.
RECIPE_SECTIONS = re.compile(r"seqtasks\.tasks(\.table|\.base|\.\w+(\.config)?)?")


def _part(module):
    """`seqtasks.tasks.captioning.data` -> `tasks`; `seqtasks` itself -> None."""
    pieces = module.split(".")
    return pieces[1] if pieces[0] == "seqtasks" and len(pieces) > 1 else None


def _floor(module):
    """The floor of the package's module `module`; None for `seqtasks` itself and other packages' modules."""
    part = _part(module)
    return None if part is None else FLOOR[part]


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
    floor = _floor(module.removesuffix(".__init__"))
    above = [name for name in _imports(path) if _floor(name) is not None and _floor(name) > floor]
    assert not above, f"{module} (floor {floor}) imports from above: {above}"


def test_reading_a_task_s_sections_imports_no_task_code():
    # The recipe loader imports the table (through its entry point), and so the tasks' config.py files and the
    # packages' __init__ files they run first: those import, at their top, only the recipe's floor and below,
    # and of tasks/ only each other and the contract (imports inside functions wait until called).
    for path in [PACKAGE / "tasks" / "__init__.py", PACKAGE / "tasks" / "base.py", PACKAGE / "tasks" / "table.py",
                 *PACKAGE.glob("tasks/*/__init__.py"), *PACKAGE.glob("tasks/*/config.py")]:
        top = [node for node in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(node, (ast.Import, ast.ImportFrom))]
        names = [alias.name for node in top if isinstance(node, ast.Import) for alias in node.names]
        names += [node.module for node in top if isinstance(node, ast.ImportFrom) and node.level == 0]
        reached = [name for name in names if _floor(name) is not None and _floor(name) > FLOOR["recipe"]]
        assert all(RECIPE_SECTIONS.fullmatch(name) for name in reached), f"{path.relative_to(REPO)} imports {reached}"
    assert RECIPE_SECTIONS.fullmatch("seqtasks.tasks.ner.config") and not RECIPE_SECTIONS.fullmatch("seqtasks.tasks.ner.task")


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


# Models do not import the runtime: what a run does around a model (the distribution strategy, `fit`,
# checkpoints, optimizers, run folders: every module of `training/` but the losses the models share)
# comes to a model as an argument, e.g. the strategy's replicas through `use_replicas`.
MODEL_PARTS = ("models", "layers")
RUNTIME_EXCEPT = {"seqtasks.training", "seqtasks.training.losses"}


def _module_file(name):
    """The file of the package's module `name`, or None (another package's, or a name imported from a module)."""
    base = REPO.joinpath(*name.split("."))
    if name.split(".")[0] != "seqtasks":
        return None
    return next((path for path in (base.with_suffix(".py"), base / "__init__.py") if path.is_file()), None)


def _modules_imported(path):
    """The package's modules that `path` imports (inside functions too): for `import seqtasks.a.b` or
    `from seqtasks.a import b`, `seqtasks.a` and, when it is a module, `seqtasks.a.b`. Not `seqtasks` itself:
    no part (`_part`), its one import is inside `seqtasks.load`, the public entry, which no part calls."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            pieces = name.split(".")
            for end in range(2, len(pieces) + 1):
                if _module_file(".".join(pieces[:end])) is not None:
                    yield ".".join(pieces[:end])


def runtime_reached(path):
    """`{runtime module: the chain of imports that reaches it}` from the module file `path`, followed through
    every module of the package it imports, directly or not."""
    reached, chains, todo = {}, {}, [(path, ())]
    while todo:
        current, chain = todo.pop()
        for name in _modules_imported(current):
            if name in chains:
                continue
            chains[name] = chain + (name,)
            if name.startswith("seqtasks.training.") and name not in RUNTIME_EXCEPT:
                reached[name] = chains[name]
            todo.append((_module_file(name), chains[name]))
    return reached


def _model_modules():
    return [path for path in _modules() if path.relative_to(PACKAGE).parts[0] in MODEL_PARTS]


@pytest.mark.parametrize("path", _model_modules(), ids=lambda path: str(path.relative_to(REPO)))
def test_models_do_not_import_the_runtime(path):
    reached = runtime_reached(path)
    assert not reached, f"{path.relative_to(REPO)} imports the runtime: " + "; ".join(
        " -> ".join(chain) for chain in reached.values()
    )


def test_the_runtime_rule_follows_imports_inside_functions_of_the_modules_imported(tmp_path, monkeypatch):
    # A model importing a helper that imports the strategy's module only when called: the rule follows it.
    package = tmp_path / "seqtasks"
    for folder in ("models", "training"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "training" / "losses.py").write_text("def share():\n    from seqtasks.training import distribute\n")
    (package / "training" / "distribute.py").write_text("")
    (package / "models" / "tagger.py").write_text("from seqtasks.training.losses import share\n")
    (package / "models" / "plain.py").write_text("import seqtasks.training.losses\n")
    monkeypatch.setitem(globals(), "REPO", tmp_path)
    assert runtime_reached(package / "models" / "tagger.py") == {
        "seqtasks.training.distribute": ("seqtasks.training.losses", "seqtasks.training.distribute")
    }
    (package / "training" / "losses.py").write_text("def share():\n    pass\n")
    assert runtime_reached(package / "models" / "tagger.py") == {}
    assert runtime_reached(package / "models" / "plain.py") == {}
