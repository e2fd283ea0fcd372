"""An ensemble run's scores beside those of each of its members alone, on the same data.

    python -m benchmarks.ensemble_members RUN_DIR [--checkpoint C] [--json OUT.json]

The run's kept model (or checkpoint C) must be an ensemble trained in one run
(`model.ensemble` above 1: its members are `member_models`). Every member and
the whole ensemble are scored by the task's own evaluation on the run's
validation data and on each held-out split it sets aside (`Task.heldout_splits`),
so the gain of decoding together is measured on the same weights, data and
day, with no run of another seed. Outputs go to a temporary folder; the run
folder is not written.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path


def measure(run_dir, checkpoint=None, log=lambda line: None):
    """`{split: {"ensemble": metrics, "members": [metrics, ...]}}`, each `metrics` the evaluation's headline
    figures (`metrics["validation"]` of `Task.evaluate`)."""
    from seqtasks.errors import SeqtasksError
    from seqtasks.lifecycle.runner import Runner

    runner = Runner.open(run_dir, log=log)
    model = runner.load_model(checkpoint)
    members = getattr(model, "member_models", None)
    if not members:
        raise SeqtasksError(f"{run_dir}: its model is not an ensemble of members trained together (model.ensemble)")
    task = runner.task
    _, validation = task.read_splits()
    splits = {"validation": validation, **task.heldout_splits()}
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, examples in splits.items():

            def score(candidate, label):
                folder = Path(scratch) / name / label
                folder.mkdir(parents=True)
                return task.evaluate(candidate, examples, folder).metrics["validation"]

            results[name] = {
                "ensemble": score(model, "ensemble"),
                "members": [score(member, f"member_{index}") for index, member in enumerate(members)],
            }
    return {"run": str(run_dir), "members": len(members), "splits": results}


def table(result):
    """Markdown rows: per split and metric, each member, their mean, and the ensemble."""
    count = result["members"]
    header = ["split", "metric", *(f"member {index}" for index in range(count)), "members' mean", "ensemble"]
    rows = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for split, scores in result["splits"].items():
        for metric, value in scores["ensemble"].items():
            alone = [member[metric] for member in scores["members"]]
            cells = [split, metric, *(f"{v:.4f}" for v in alone), f"{sum(alone) / count:.4f}", f"{value:.4f}"]
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--checkpoint", default=None, help="final, best, latest, a step or a weights file")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    result = measure(args.run_dir, args.checkpoint)
    print(table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
