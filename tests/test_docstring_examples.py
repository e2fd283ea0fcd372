"""The `>>>` examples in the docstrings of `seqtasks` run and show what they claim.

Modules are found on disk (pkgutil, then `ast` for their docstrings), so
collecting this file imports none of them; each module with examples is one
test, which imports it and runs its examples with `doctest`, with `np` and
`keras` among the globals.
"""

import ast
import doctest
import importlib
import importlib.metadata
import io
import pkgutil
import re
from pathlib import Path

import keras
import numpy as np
import pytest

import seqtasks

pytestmark = pytest.mark.backends


def _has_examples(source):
    tree = ast.parse(source)
    nodes = [tree] + [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    return any(">>>" in (ast.get_docstring(node, clean=False) or "") for node in nodes)


def _modules_with_examples(paths=seqtasks.__path__, prefix="seqtasks."):
    names = []
    for info in pkgutil.iter_modules(paths, prefix):
        spec = info.module_finder.find_spec(info.name)
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            if _has_examples(Path(spec.origin).read_text(encoding="utf-8")):
                names.append(info.name)
        if info.ispkg:
            names += _modules_with_examples(spec.submodule_search_locations, f"{info.name}.")
    return sorted(names)


def _optional_dependencies():
    """Import names of the extras' distributions (`pip install seqtasks[test]`)."""
    try:
        requirements = importlib.metadata.requires("seqtasks") or []
    except importlib.metadata.PackageNotFoundError:
        return set()
    return {
        re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("-", "_")
        for requirement in requirements
        if "extra ==" in requirement
    }


MODULES = _modules_with_examples()


def test_examples_are_found():
    # An empty list would make the parametrized test below skip silently.
    assert {"seqtasks.layers.stacked_rnn", "seqtasks.layers.crf"} <= set(MODULES), MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as error:
        missing = (error.name or "").split(".")[0]
        if missing in _optional_dependencies():
            pytest.skip(f"{name} needs the optional dependency {missing}")
        raise
    tests = doctest.DocTestFinder(exclude_empty=True).find(
        module, extraglobs={"np": np, "keras": keras}
    )
    examples = sum(len(test.examples) for test in tests)
    # `ast` saw `>>>` in a docstring that doctest does not reach (e.g. of a nested function).
    assert examples, f"{name} has `>>>` in a docstring but doctest finds no example in it"
    report = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test, out=report.write)
    assert runner.failures == 0, f"{runner.failures} of {examples} examples failed:\n{report.getvalue()}"
