"""Attention or not, by source length: the experiment of Cho et al. (2014) and Bahdanau et al. (2015, figure 2).

    python -m benchmarks.by_length toy [OUTPUT_DIR]          # recipes/toy-long.yaml: none, Luong, Bahdanau
    python -m benchmarks.by_length translation [OUTPUT_DIR]  # translation-anki-spa-eng: none against Luong

Each variant is one `seqtasks run` of the same recipe, sizes and time
budget, differing only in `model.attention.*` (without attention the decoder
reads the encoder's final state at every step, `decoder.summary_input`, as
in Cho et al.). The variants train side by side, so each has the same share
of the CPU. `seqtasks compare` then draws the figure and writes the CSV into
OUTPUT_DIR (default `runs/by_length`).
"""

import subprocess
import sys
from pathlib import Path

NONE = ["model.attention.type=none", "model.decoder.summary_input=true"]
EXPERIMENTS = {
    "toy": (
        "toy-long",
        {
            "none": NONE,
            "luong": [],
            "bahdanau": ["model.attention.type=bahdanau"],
        },
        "sequence_accuracy",
    ),
    "translation": ("translation-anki-spa-eng", {"none": NONE, "luong": []}, "bleu"),
}


def main(argv):
    if not argv or argv[0] not in EXPERIMENTS:
        sys.exit(__doc__)
    name = argv[0]
    output = Path(argv[1] if len(argv) > 1 else "runs/by_length")
    recipe, variants, metric = EXPERIMENTS[name]
    processes = {}
    for variant, overrides in variants.items():
        folder = output / f"{name}-{variant}"
        folder.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "seqtasks", "run", recipe, "--output-dir", str(folder), "--set", "export.enabled=false"]
        for override in overrides:
            command += ["--set", override]
        log = open(folder / "run.log", "w")
        print(" ".join(command), flush=True)
        processes[variant] = (subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), log)
    failed = [variant for variant, (process, _) in processes.items() if process.wait() != 0]
    for _, log in processes.values():
        log.close()
    if failed:
        sys.exit(f"failed: {', '.join(failed)} (see {output}/{name}-<variant>/run.log)")
    runs = [next((output / f"{name}-{variant}").glob("*/*/metrics.json")) for variant in variants]
    compare = [sys.executable, "-m", "seqtasks", "compare", *map(str, runs), "--output", str(output / f"{name}.png"), "--metric", metric]
    for variant in variants:
        compare += ["--label", variant]
    subprocess.run(compare, check=True)
    print((output / f"{name}.csv").read_text())


if __name__ == "__main__":
    main(sys.argv[1:])
