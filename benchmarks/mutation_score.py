"""`python -m benchmarks.mutation_score`: the mutation score of each core module, after `mutmut run`.

Reads mutmut's results under `mutants/` and the committed list of equivalent
mutants (`docs/equivalent-mutants.txt`, one `name  # reason` a line), and
prints a Markdown table: per module, the mutants, how many were killed, the
equivalent ones left out, the survivors, and the score
killed / (mutants - equivalent). Timeouts count as killed (the mutant made the
tests hang); mutants no test reaches count as survivors.

    python -m benchmarks.mutation_score               # the table
    python -m benchmarks.mutation_score --survivors   # and every survivor's name, by module
"""

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EQUIVALENT = REPO / "docs" / "equivalent-mutants.txt"
TARGET = 90.0

# Core modules as docs/testing.md names them: (name, path prefixes under seqtasks/).
MODULES = (
    ("layers", ("layers/",)),
    ("decoding", ("decoding/",)),
    # The task table and each task's own recipe sections are the recipe's too.
    ("recipe", ("recipe/", "tasks/table.py", "tasks/toy/config.py", "tasks/translation/config.py",
                "tasks/sentiment/config.py", "tasks/ner/config.py", "tasks/captioning/config.py")),
    ("data", ("data/", "utils/regular_files.py", "training/distribute.py")),
    ("text", ("text/",)),
    ("io_utils", ("utils/io_utils.py",)),
    ("checkpoints and resume", ("training/checkpoints.py", "training/fit.py", "training/position.py")),
    ("export", ("export/saved_model.py",)),
)
# Of training/fit.py only the resuming `fit` is core; the rest (distribution, metrics) is the runner's,
# covered by the slow tests that train whole recipes. Of training/distribute.py, the data pipelines' cut of
# batches to a multiple of the devices (the strategies themselves run in the multi-device tests).
ONLY_FUNCTIONS = {"fit.py": ("x_fit__mutmut", "x__time_limit__mutmut"), "distribute.py": ("x_divisible_batches__mutmut",)}
KILLED = {1, 3, 24, -24, 152, 255, 36, -9, -11}
SURVIVED = {0, 5, 33}


def read_equivalent(path=EQUIVALENT):
    """`{mutant name: reason}` from the committed list; a line without a reason is an error."""
    found = {}
    if not path.exists():
        return found
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"(\S+)\s+#\s*(\S.*)", line)
        if not match:
            raise SystemExit(f"{path}:{number}: expected 'mutant_name  # reason'; got {line!r}")
        found[match.group(1)] = match.group(2)
    return found


def module_of(meta_path, mutants_root):
    relative = meta_path.relative_to(mutants_root / "seqtasks").as_posix().removesuffix(".meta")
    for name, prefixes in MODULES:
        if relative.startswith(prefixes):
            return name
    return None


def read_results(mutants_root):
    """`{module: {mutant name: exit code or None}}` from mutmut's `.meta` files."""
    results = defaultdict(dict)
    for meta in sorted((mutants_root / "seqtasks").rglob("*.py.meta")):
        module = module_of(meta, mutants_root)
        if module is None:
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        wanted = ONLY_FUNCTIONS.get(meta.name.removesuffix(".meta"))
        if wanted:
            codes = {name: code for name, code in codes.items() if name.rpartition(".")[2].startswith(wanted)}
        results[module].update(codes)
    return results


def stale_entries(results, equivalent):
    """Listed mutants that no longer exist, or that the tests now kill: the code changed and mutmut
    renumbered its mutants, or a new test killed one."""
    codes = {m: code for module in results.values() for m, code in module.items()}
    return sorted(m for m in equivalent if m not in codes or codes[m] in KILLED)


def score_rows(results, equivalent):
    rows = []
    for name, _ in MODULES:
        codes = results.get(name, {})
        listed = [m for m in codes if m in equivalent]
        killed = [m for m, code in codes.items() if code in KILLED and m not in equivalent]
        survivors = sorted(m for m, code in codes.items() if code not in KILLED and m not in equivalent)
        unchecked = [m for m in survivors if codes[m] is None]
        counted = len(codes) - len(listed)
        score = 100.0 * len(killed) / counted if counted else 100.0
        rows.append(dict(module=name, mutants=len(codes), killed=len(killed), equivalent=len(listed),
                         survived=len(survivors) - len(unchecked), unchecked=len(unchecked),
                         score=score, survivors=survivors))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mutation_score", description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", default=str(REPO / "mutants"), help="mutmut's folder")
    parser.add_argument("--survivors", action="store_true", help="list every survivor")
    args = parser.parse_args(argv)
    mutants_root = Path(args.mutants)
    if not (mutants_root / "seqtasks").is_dir():
        raise SystemExit(f"{mutants_root}: no mutmut results; run `mutmut run` first (docs/testing.md)")
    equivalent = read_equivalent()
    results = read_results(mutants_root)
    stale = stale_entries(results, equivalent)
    rows = score_rows(results, equivalent)
    print("| module | mutants | killed | equivalent | survived | not run | score |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        mark = "" if row["score"] >= TARGET else " (below 90 %)"
        print(f"| {row['module']} | {row['mutants']} | {row['killed']} | {row['equivalent']} | {row['survived']} "
              f"| {row['unchecked']} | {row['score']:.1f} %{mark} |")
    if stale:
        print(f"\n{EQUIVALENT.name}: {len(stale)} listed mutants no longer exist or are killed "
              "(the code or the tests changed): " + ", ".join(stale), file=sys.stderr)
    if args.survivors:
        for row in rows:
            if row["survivors"]:
                print(f"\n## {row['module']}")
                print("\n".join(row["survivors"]))
    return 0 if all(row["score"] >= TARGET for row in rows) and not stale else 1


if __name__ == "__main__":
    sys.exit(main())
