"""Runs the mutants `mutmut` generated for one function without mutmut's runner.

When `mutmut run` cannot collect its stats (its test run fails in `mutants/` for a reason of its
own), the mutants it wrote are still in `mutants/`. This puts each one, in turn, in place of the
function in a copy of the working tree (no trampolines) and runs the given tests on it: a mutant
is killed when they fail.

    python -m benchmarks.mutants_by_hand seqtasks/decoding/model_search.py token_log_probs \
        -- tests/decoding/test_model_search.py -m "not slow"
    python -m benchmarks.mutants_by_hand seqtasks/tasks/captioning/config.py CaptionerModelConfig.check \
        -- tests/recipe/test_loader.py -m "not slow"
    python -m benchmarks.mutants_by_hand --only 4,10,11 seqtasks/data/augmentation.py TokenAugmenter.__call__ \
        -- tests/data/test_augmentation.py -k tagging
"""

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COPY_IGNORED = shutil.ignore_patterns("mutants", ".venv", ".git", "runs", "__pycache__", "*.pyc")


def mutants_of(source, function):
    """`[(number, mutant source)]` of `function` (`name` or `Class.name`) in a mutmut-generated module."""
    cls, _, name = function.rpartition(".")
    prefix = f"xǁ{cls}ǁ{name}__mutmut_" if cls else f"x_{name}__mutmut_"
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name.startswith(prefix) and node.name[len(prefix):].isdigit():
            text = ast.get_source_segment(source, node).replace(f"def {node.name}(", f"def {name}(", 1)
            found.append((int(node.name[len(prefix):]), text))
    return sorted(found)


def replaced(source, function, text):
    """`source` with `function` (`name` or `Class.name`) replaced by `text` (its first line unindented)."""
    cls, _, name = function.rpartition(".")
    scope = ast.parse(source).body
    if cls:
        scope = next(node for node in scope if isinstance(node, ast.ClassDef) and node.name == cls).body
    target = next(node for node in scope if isinstance(node, ast.FunctionDef) and node.name == name)
    lines = source.splitlines(keepends=True)
    # Decorators stay; the segment ast gives starts at `def` and drops only that line's indentation.
    return "".join(lines[: target.lineno - 1]) + " " * target.col_offset + text + "\n" + "".join(lines[target.end_lineno:])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="the module, relative to the repository")
    parser.add_argument("function", help="name, or Class.name")
    parser.add_argument("--only", default=None, metavar="N,M,...", help="only these mutants (mutmut's numbers)")
    parser.add_argument("pytest_args", nargs="+", help="the tests (and pytest options) that should kill them")
    args = parser.parse_args(argv)
    mutants = mutants_of((REPO / "mutants" / args.path).read_text(encoding="utf-8"), args.function)
    if args.only:
        wanted = {int(number) for number in args.only.split(",")}
        mutants = [(number, text) for number, text in mutants if number in wanted]
    if not mutants:
        sys.exit(f"mutants/{args.path}: no mutants of {args.function} (run `mutmut run` once to generate them)")
    original = (REPO / args.path).read_text(encoding="utf-8")
    survivors = []
    with tempfile.TemporaryDirectory() as folder:
        tree = Path(folder) / "tree"
        shutil.copytree(REPO, tree, ignore=COPY_IGNORED)
        for number, text in mutants:
            (tree / args.path).write_text(replaced(original, args.function, text), encoding="utf-8")
            result = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-x", "-n", "0", "-p", "no:cacheprovider", *args.pytest_args],
                cwd=tree, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree)},
            )
            status = "killed" if result.returncode != 0 else "survived"
            if status == "survived":
                survivors.append(number)
            print(f"{args.function} mutant {number}: {status}", flush=True)
        (tree / args.path).write_text(original, encoding="utf-8")
    print(f"{len(mutants) - len(survivors)} of {len(mutants)} killed; survived: {survivors or 'none'}")


if __name__ == "__main__":
    main()
