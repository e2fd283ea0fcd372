"""Runs one recipe several times, each trial with its own `--set` overrides, and tables the results.

    python -m benchmarks.recipe_trials RECIPE --output-dir DIR [--set KEY=VALUE ...] \
        --trial NAME [KEY=VALUE ...] [--trial NAME ...] [--json OUT.json]

Every trial is `seqtasks run RECIPE --set <common> --set <trial's own> --output-dir DIR/NAME`, run
one after the other so that none shares the CPU with another. A trial with no overrides of its own is
the recipe as it is (with the common ones). The table gives each trial's validation scores and those of
the held-out splits its task sets aside (from its `metrics.json`), the epochs it ran, the epoch the best
checkpoint came from (by the recipe's `training.monitor`) and its training minutes; a trial that fails
is reported and the others go on.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def parse_trials(words):
    """`["--trial", "a", "k=v", "--trial", "b"]` -> `[("a", ["k=v"]), ("b", [])]`."""
    trials = []
    for word in words:
        if word == "--trial":
            trials.append(None)
        elif trials and trials[-1] is None:
            trials[-1] = (word, [])
        elif trials:
            if "=" not in word:
                raise SystemExit(f"recipe_trials: expected KEY=VALUE after the trial's name; got {word!r}")
            trials[-1][1].append(word)
        else:
            raise SystemExit(f"recipe_trials: expected --trial NAME before {word!r}")
    if not trials or trials[-1] is None:
        raise SystemExit("recipe_trials: expected at least one --trial NAME")
    names = [name for name, _ in trials]
    if len(set(names)) != len(names):
        raise SystemExit(f"recipe_trials: trial names must differ; got {names}")
    return trials


def split_arguments(argv):
    """`(options, trial words)`: the trials run from the first `--trial` to the first other option after it
    (`--json OUT` may come before or after them)."""
    start = argv.index("--trial") if "--trial" in argv else len(argv)
    end = next((i for i in range(start, len(argv)) if argv[i].startswith("--") and argv[i] != "--trial"), len(argv))
    return argv[:start] + argv[end:], argv[start:end]


def heldout_scores(metrics):
    """`{split: scores}` of the held-out splits a run reported beside validation (`Task.heldout_splits`): the
    entries with validation's metric names, other than validation's own."""
    names = set(metrics.get("validation", {}))
    return {
        key: value for key, value in metrics.items()
        if key not in ("validation", "best_validation", "final_validation") and isinstance(value, dict) and names and set(value) == names
    }


def best_epoch(metrics, monitor):
    """1-based epoch whose `monitor` value was best (lowest for losses, else highest; the first of ties),
    None without it."""
    from seqtasks.training.fit import monitor_mode

    values = metrics.get("history", {}).get(monitor) or []
    pairs = [(value, index) for index, value in enumerate(values) if value is not None]
    if not pairs:
        return None
    sign = 1 if monitor_mode(monitor) == "min" else -1
    return min(pairs, key=lambda pair: (sign * pair[0], pair[1]))[1] + 1


def row(name, overrides, metrics, monitor, minutes):
    def joined(scores):
        return ", ".join(f"{key} {value:.4g}" for key, value in scores.items() if isinstance(value, (int, float)))

    return {
        "trial": name,
        "overrides": overrides,
        "validation": joined(metrics.get("validation", {})),
        "heldout": "; ".join(f"{split}: {joined(scores)}" for split, scores in heldout_scores(metrics).items()),
        "epochs": metrics.get("epochs_run"),
        "best_epoch": best_epoch(metrics, monitor),
        "train_minutes": round(metrics.get("train_seconds", 0.0) / 60.0, 1),
        "whole_minutes": round(minutes, 1),
    }


def main(argv=None):
    options, trial_words = split_arguments(list(sys.argv[1:] if argv is None else argv))
    parser = argparse.ArgumentParser(prog="python -m benchmarks.recipe_trials", description=__doc__.splitlines()[0])
    parser.add_argument("recipe")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="overrides of every trial")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(options)
    trials = parse_trials(trial_words)

    from seqtasks.recipe import load_recipe

    rows = []
    for name, overrides in trials:
        every = args.set + overrides
        monitor = load_recipe(args.recipe, every).training.monitor
        command = [sys.executable, "-m", "seqtasks", "run", args.recipe, "--output-dir", str(Path(args.output_dir) / name)]
        for override in every:
            command += ["--set", override]
        print("$", " ".join(command), flush=True)
        started = time.time()
        finished = subprocess.run(command)
        minutes = (time.time() - started) / 60.0
        runs = sorted(Path(args.output_dir, name).glob("*/*/metrics.json"))
        if finished.returncode != 0 or not runs:
            print(f"trial {name!r} failed (exit {finished.returncode})", flush=True)
            rows.append({"trial": name, "overrides": overrides, "failed": finished.returncode})
            continue
        rows.append(row(name, overrides, json.loads(runs[-1].read_text()), monitor, minutes))
        print(json.dumps(rows[-1]), flush=True)
    print("| trial | overrides | validation | held out | epochs (best) | training min | whole min |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for entry in rows:
        if "failed" in entry:
            print(f"| {entry['trial']} | {' '.join(entry['overrides'])} | failed | | | | |")
            continue
        print(
            f"| {entry['trial']} | {' '.join(entry['overrides']) or '(recipe)'} | {entry['validation']} | "
            f"{entry['heldout']} | {entry['epochs']} ({entry['best_epoch']}) | {entry['train_minutes']} | "
            f"{entry['whole_minutes']} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
