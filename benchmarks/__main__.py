"""`python -m benchmarks`: measures every task, with the tutorial baselines, and regenerates BENCHMARKS.md.

    python -m benchmarks                       # everything (about 30 minutes on 2 CPU cores)
    python -m benchmarks --only translation.train.target_tokens_per_s --json out.json
"""

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks import records, suite

COMMAND = "python -m benchmarks"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--only", metavar="NAME", help="one benchmark (a record name) or a group: " + ", ".join(suite.GROUPS))
    parser.add_argument("--json", metavar="PATH", help="also write this run's records here, as a JSON list")
    parser.add_argument("--minutes", type=float, default=5.0, help="translation training time, ours and each baseline's")
    parser.add_argument("--task-minutes", type=float, default=1.0, help="training time of the other tasks")
    parser.add_argument("--output-dir", default="runs/benchmarks", help="run folders, logs and the feature cache")
    parser.add_argument("--results", default="benchmarks/results.json", help="accumulated results, by machine")
    parser.add_argument("--no-markdown", action="store_true", help="leave BENCHMARKS.md alone")
    args = parser.parse_args(argv)

    groups = list(suite.GROUPS)
    if args.only:
        group = args.only.split(".")[0]
        if group not in suite.GROUPS:
            parser.error(f"--only: expected a name starting with one of {', '.join(suite.GROUPS)}; got {args.only!r}")
        groups = [group]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    context = suite.Context(Path(args.output_dir) / stamp, args.minutes, args.task_minutes)
    found = []
    for group in groups:
        found += suite.GROUPS[group](context)
    if args.only and args.only != groups[0]:
        found = [r for r in found if r["name"] == args.only]
        if not found:
            parser.error(f"--only: no benchmark named {args.only!r}")
    for r in found:
        ratios = "  ".join(f"{k} {r[k]}" for k in ("ratio_a", "ratio_b") if k in r)
        print(f"{r['name']}: {r['value']} {r['unit']}  {ratios}")
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=2) + "\n")
    machine = records.machine_description()
    stored = records.merge(args.results, machine, time.strftime("%Y-%m-%d"), found)
    if not args.no_markdown:
        records.update_benchmarks_md(Path(__file__).resolve().parent.parent / "BENCHMARKS.md", stored, COMMAND)
    return 0


if __name__ == "__main__":
    sys.exit(main())
