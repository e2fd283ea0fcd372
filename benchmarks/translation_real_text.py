"""A translation run's BLEU on text as users paste it: its dev sources as they are, upper-cased, and in paragraphs.

    python -m benchmarks.translation_real_text RUN_DIR [--limit N] [--whole] [--json OUT.json]

The run's model (`seqtasks.load(RUN_DIR)`: its serving module, in process)
translates the validation pairs the run was evaluated on (`Task.read_splits`,
as `seqtasks eval` reads them; the first N with `--limit`, then as many as
make whole paragraphs of 3) three ways, with the recipe's decoding:

- `as_is`: each source as it is;
- `upper_case`: each source upper-cased (`str.upper`);
- `paragraphs`: the sources joined 3 at a time with one space, each
  paragraph's translation compared with its 3 references joined the same way.

Each is scored with sacrebleu's BLEU, lower-cased (`BLEU(lowercase=True)`,
so an upper-cased output counts as its words), against the references as
`seqtasks eval` reads them (NFKC); `upper_case` and `paragraphs` also as a
share of `as_is`. `paragraphs_split_in_3` is the share of paragraphs that
`seqtasks.text.sentences.split_sentences` cuts into their 3 sources.
`--whole` reads each text whole and as given instead, through the
`attention` signature (the recipe's decoding), as every export read a text
before it was split into sentences: the "before" figures. Printed as a
Markdown table and as JSON, written to OUT.json with `--json`.
"""

import argparse
import sys
from pathlib import Path

from benchmarks.records import report_json

PARAGRAPH = 3


def _bleu(hypotheses, references):
    import sacrebleu

    metric = sacrebleu.BLEU(lowercase=True)
    return metric.corpus_score(hypotheses, [references]), str(metric.get_signature())


def measure(run_dir, limit=None, batch_size=64, whole=False):
    """The three variants' inputs and lower-cased BLEU, as the JSON `main` prints."""
    import seqtasks
    from seqtasks.errors import SeqtasksError
    from seqtasks.lifecycle.runner import Runner
    from seqtasks.tasks.translation.task import normalize_reference
    from seqtasks.text.sentences import split_sentences

    model = seqtasks.load(run_dir)
    if model.task != "translation":
        raise SeqtasksError(f"{run_dir}: expected a translation run; this is a {model.task} run")
    _, pairs = Runner.open(run_dir, log=lambda line: None).task.read_splits()
    pairs = pairs[:limit]
    pairs = pairs[: len(pairs) - len(pairs) % PARAGRAPH]
    if not pairs:
        raise SeqtasksError(f"{run_dir}: expected at least {PARAGRAPH} validation pairs; got {len(pairs)}")
    sources = [source for source, _ in pairs]
    references = [normalize_reference(target, lower_case=False) for _, target in pairs]
    groups = [slice(start, start + PARAGRAPH) for start in range(0, len(pairs), PARAGRAPH)]
    paragraphs = [" ".join(sources[group]) for group in groups]
    inputs = {
        "as_is": (sources, references),
        "upper_case": ([source.upper() for source in sources], references),
        "paragraphs": (paragraphs, [" ".join(references[group]) for group in groups]),
    }
    variants, signature = {}, None
    for name, (texts, wanted) in inputs.items():
        if whole:
            outputs = [row["translation"] for row in model.attention(texts, batch_size=batch_size)]
        else:
            outputs = [result.text for result in model.translate(texts, batch_size=batch_size)]
        score, signature = _bleu(outputs, wanted)
        variants[name] = {"inputs": len(texts), "bleu_lowercase": round(score.score, 2)}
    for name in ("upper_case", "paragraphs"):
        base = variants["as_is"]["bleu_lowercase"]
        variants[name]["share_of_as_is"] = round(variants[name]["bleu_lowercase"] / base, 4) if base else None
    split = sum(split_sentences(paragraph)[0] == sources[group] for paragraph, group in zip(paragraphs, groups))
    return {
        "run": str(run_dir),
        "read": "whole" if whole else "by sentence",
        "pairs": len(pairs),
        "paragraphs_split_in_3": round(split / len(groups), 4),
        "variants": variants,
        "sacrebleu_signature": signature,
    }


def table(result):
    lines = ["| variant | inputs | BLEU (lower-cased) | share of as_is |", "| --- | ---: | ---: | ---: |"]
    for name, row in result["variants"].items():
        share = row.get("share_of_as_is")
        lines.append(f"| {name} | {row['inputs']} | {row['bleu_lowercase']:.2f} | "
                     f"{'' if share is None else f'{share:.1%}'} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--limit", type=int, default=None, help="the first N validation pairs")
    parser.add_argument("--whole", action="store_true",
                        help="read each text whole, as given (the `attention` signature), as exports did before")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    result = measure(Path(args.run_dir), args.limit, whole=args.whole)
    print(table(result))
    report_json(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
