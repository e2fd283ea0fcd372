"""The decoding controls measured on trained runs: averaging, ensembles, search preferences, sampling diversity.

    python -m benchmarks.decoding_controls translation RUN [RUN2]   # dev BLEU and decode speed of each variant
    python -m benchmarks.decoding_controls speed RUN [RUN2]         # decode speed of the search variants, in turns
    python -m benchmarks.decoding_controls captioning RUN           # dev BLEU-4 and distinct n-grams, beam vs sampling

translation: RUN (and RUN2, a run of the same recipe with another seed on
the same split: `--set seed=2 --set data.split_seed=1`) should keep 4
checkpoints (`--set training.keep_checkpoints=4`). Each variant is
evaluated on the run's validation split, one after the other: the run's
final model; the mean of its last 2 and last 4 checkpoints (`seqtasks
average`); the final models of RUN and RUN2 as an ensemble; and the final
model with the coverage penalty, n-gram blocking, and both. Printed as a
Markdown table and written as JSON beside RUN (`decoding_controls.json`);
the variants it already holds are not measured again.

captioning: the run's validation images captioned by its recipe's beam
search, then by sampling (one sample per image; plain, and top-p 0.9),
with BLEU-4 and the distinct 1- and 2-grams over all captions (the share
of n-grams that are different) and the share of different captions.
"""

import json
import sys
from pathlib import Path

TRANSLATION_VARIANTS = (
    ("final model", None, ()),
    ("mean of last 2 checkpoints", 2, ()),
    ("mean of last 4 checkpoints", 4, ()),
    ("coverage penalty 0.2", None, ("model.decoding.coverage_penalty=0.2",)),
    ("no repeated 3-grams", None, ("model.decoding.no_repeat_ngram_size=3",)),
    ("coverage 0.2 + no repeated 3-grams", None,
     ("model.decoding.coverage_penalty=0.2", "model.decoding.no_repeat_ngram_size=3")),
)
CAPTION_VARIANTS = (
    ("beam search (recipe)", ()),
    ("sampling, 1 per image", ("model.decoding.num_samples=1", "model.decoding.n_best=1")),
    ("sampling, top-p 0.9", ("model.decoding.num_samples=1", "model.decoding.n_best=1", "model.decoding.top_p=0.9")),
)


def _quiet(line):
    pass


def translation(run, other=None):
    from seqtasks.lifecycle.runner import Runner
    from seqtasks.training.averaging import average_checkpoints

    run = Path(run)
    results = run / "decoding_controls.json"
    # Variants measured before (a run of this command without RUN2) are kept, not measured again.
    rows = json.loads(results.read_text()) if results.is_file() else []
    done = {row["variant"] for row in rows}

    def record(name, metrics):
        rows.append({"variant": name, "bleu": round(metrics["validation"]["bleu"], 2),
                     "chrf": round(metrics["validation"]["chrf"], 2),
                     "sentences_per_second": metrics["decode_sentences_per_second"]})
        print(f"{name}: {rows[-1]}", flush=True)

    for name, last, overrides in TRANSLATION_VARIANTS:
        if name in done:
            continue
        runner = Runner.open(run, overrides, log=_quiet)
        checkpoint = None
        if last is not None:
            path, _ = average_checkpoints(runner, last)
            checkpoint = str(path)
        record(name, _validation(runner, checkpoint))
    if other is not None and "ensemble of 2 runs" not in done:
        runner = Runner.open(run, log=_quiet)
        record("ensemble of 2 runs", _validation(runner, None, [Path(other)]))
    results.write_text(json.dumps(rows, indent=2) + "\n")
    print("| decoding | dev BLEU | chrF | sentences/s |\n| --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['variant']} | {row['bleu']:.1f} | {row['chrf']:.1f} | {row['sentences_per_second']:.0f} |")


def _validation(runner, checkpoint, ensemble=()):
    """Metrics on the run's validation split, written under RUN/eval/ (the run's own outputs stay)."""
    from seqtasks.training.run_folders import eval_folder

    _, examples = runner.task.read_splits()
    model = runner.ensemble(ensemble, checkpoint) if ensemble else runner.load_model(checkpoint)
    out_dir = eval_folder(runner.run_dir, "decoding-controls")
    out_dir.mkdir(parents=True, exist_ok=True)
    return runner.task.evaluate(model, examples, out_dir).metrics


def speed(run, other=None, rounds=3, count=1000):
    """Decode speed of the search variants, measured in turns, round after round, on `count` dev sources:
    the same share of the CPU for each, whatever else runs. Median sentences/s of the rounds."""
    import statistics

    import tensorflow as tf

    from seqtasks.lifecycle.runner import Runner
    from seqtasks.encoder_decoder.decoding import decode_id_rows, make_decode

    runner = Runner.open(run, log=_quiet)
    _, examples = runner.task.read_splits()
    tokenizer, length = runner.task.source_tokenizer, runner.recipe.data.max_length
    rows = [row[:length] for row in tokenizer.tokenize(tf.constant([s for s, _ in examples[:count]])).to_list()]
    model = runner.load_model()
    variants = {"final model": (model, runner.recipe.model.decoding)}
    for name, _, overrides in TRANSLATION_VARIANTS[3:]:
        variants[name] = (model, Runner.open(run, overrides, log=_quiet).recipe.model.decoding)
    if other is not None:
        variants["ensemble of 2 runs"] = (runner.ensemble([Path(other)]), runner.recipe.model.decoding)
    decoders = {name: make_decode(m, decoding) for name, (m, decoding) in variants.items()}
    seconds = {name: [] for name in variants}
    for _ in range(rounds + 1):  # the first round traces
        for name, (m, _) in variants.items():
            timings = {}
            decode_id_rows(decoders[name], m, rows, runner.recipe.evaluation.batch_size, timings)
            seconds[name].append(timings["decode_seconds"])
    print("| decoding | sentences/s (median of rounds) |\n| --- | --- |")
    for name, times in seconds.items():
        print(f"| {name} | {len(rows) / statistics.median(times[1:]):.0f} |")


def distinct(captions, n):
    """Distinct n-grams over all captions: different n-grams / all n-grams (Li et al., 2016)."""
    grams = [tuple(words[i : i + n]) for words in (c.split() for c in captions) for i in range(len(words) - n + 1)]
    return len(set(grams)) / max(1, len(grams))


def captioning(run):
    from seqtasks.lifecycle.runner import Runner

    run = Path(run)
    rows = []
    for name, overrides in CAPTION_VARIANTS:
        runner = Runner.open(run, overrides, log=_quiet)
        metrics = _validation(runner, None)
        folder = Path(runner.run_dir) / "eval" / "decoding-controls"
        captions = [line.split("\t")[1] for line in (folder / "captions.tsv").read_text().splitlines()]
        rows.append({"variant": name, "bleu4": round(metrics["validation"]["bleu_4"], 2),
                     "distinct1": round(distinct(captions, 1), 3), "distinct2": round(distinct(captions, 2), 3),
                     "different_captions": round(len(set(captions)) / len(captions), 3), "examples": captions[:3]})
        print(f"{name}: {rows[-1]}", flush=True)
    (run / "decoding_controls.json").write_text(json.dumps(rows, indent=2) + "\n")
    print("| decoding | dev BLEU-4 | distinct-1 | distinct-2 | different captions |\n| --- | --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['variant']} | {row['bleu4']:.1f} | {row['distinct1']:.3f} | {row['distinct2']:.3f} | "
              f"{row['different_captions']:.0%} |")


def main(argv):
    if not argv or argv[0] not in ("translation", "speed", "captioning") or len(argv) < 2:
        sys.exit(__doc__)
    if argv[0] == "translation":
        translation(argv[1], argv[2] if len(argv) > 2 else None)
    elif argv[0] == "speed":
        speed(argv[1], argv[2] if len(argv) > 2 else None)
    else:
        captioning(argv[1])


if __name__ == "__main__":
    main(sys.argv[1:])
