"""A translation run's BLEU on its dev sources as people type and write them, with repeats and lengths.

    python -m benchmarks.translation_typed_text RUN_DIR [--limit N] [--batch-size B] [--split-longer-than N]
        [--setting NAME=VALUE ...] [--json OUT.json]

The run's model (`seqtasks.load(RUN_DIR)`: its serving module, in process,
as `seqtasks predict` reads an export) translates the validation pairs the
run was evaluated on (`Task.read_splits`) in six forms, with the recipe's
decoding:

- `as_is`: each source as it is;
- `typed`: lower-cased, without its final `. ! ? …` and without `¿ ¡`;
- `typed_no_accents`: typed, and without accents or other marks (NFD, the
  combining marks dropped: "donde esta la estacion");
- `upper_case`: each source upper-cased (`str.upper`);
- `paragraphs`: the sources joined 3 at a time with one space, each
  compared with its 3 references joined alike;
- `long_sentence`: 3 consecutive statements (each ending in a full stop)
  of 18 to 25 words in all made one sentence with commas: the full stops of
  the first two dropped and the first letter of the next two lowered,
  unless their first word is one the run's training data writes
  capitalised inside sentences ("Tom", "I"); its references joined alike.

The forms change the sources only: every form's references are the
references as `seqtasks eval` reads them (NFKC). Each form is scored with
sacrebleu's lower-cased BLEU, also as a share of `as_is`, with the number of
outputs one of whose sentences repeats a 3-gram of words (lower-cased,
punctuation left out: "the garden garden in the garden garden"), of
references that do, of outputs that repeat one their reference does not,
of outputs that repeat one anywhere (a paragraph's sentences may share
words, "I think ... I think"), and BLEU's length ratio (output words over
reference words). The script
reads nothing of seqtasks but `seqtasks.load`, `Runner.open`,
`split_sentences` and `normalize_reference`, so it measures runs of earlier
versions alike. `--split-longer-than N` serves the run's model with
`data.split_longer_than` N instead of its recipe's (the longest sentence
read whole; a longer one is read in parts cut at its clauses), and
`--setting NAME=VALUE` translates with that decoding setting (for example
`coverage_penalty=0.2`) instead of the recipe's.
Printed as a Markdown table and as JSON, written to OUT.json with `--json`.
"""

import argparse
import collections
import re
import sys
import unicodedata
from pathlib import Path

from benchmarks.records import report_json

PARAGRAPH = 3
LONG_WORDS = (18, 25)
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019-][^\W\d_]+)*")
_STOP = re.compile(r"[.!?\u2026]")


def typed(text):
    """Lower case, no final `. ! ? …`, no `¿ ¡`."""
    text = re.sub(r"[\u00bf\u00a1]", "", text.lower())
    return re.sub(r"\s*[.!?\u2026]+([\"'\u201d\u2019\u00bb)\]]*)\s*$", r"\1", text).strip()


def without_accents(text):
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if unicodedata.category(c) != "Mn"))


def names_of(texts):
    """Words written capitalised inside sentences at least as often as lower-cased."""
    # seqtasks.data.augmentation.capitalised_words, written again: the script also reads runs of trees without it.
    capitalised, lowered = collections.Counter(), collections.Counter()
    for text in texts:
        previous = None
        for match in _WORD.finditer(text):
            if previous is not None and not _STOP.search(text[previous : match.start()]):
                word = match.group()
                if word[0].isupper():
                    capitalised[word] += 1
                elif word[0].islower():
                    lowered[word.lower()] += 1
            previous = match.end()
    return {word for word, count in capitalised.items() if count >= lowered[word.lower()]}


def one_sentence(texts, names):
    """Statements joined with commas into one sentence (`long_sentence`)."""
    parts = []
    for index, text in enumerate(texts):
        match = _WORD.search(text)
        if index and match and match.group() not in names:
            text = text[: match.start()] + text[match.start()].lower() + text[match.start() + 1 :]
        parts.append(text if index == len(texts) - 1 else text[:-1])
    return ", ".join(parts)


def repeated_trigrams(text):
    """The 3-grams of words (lower-cased, punctuation left out) that occur more than once in `text`."""
    words = [word.lower() for word in _WORD.findall(text)]
    grams = collections.Counter(tuple(words[i : i + 3]) for i in range(len(words) - 2))
    return {gram for gram, count in grams.items() if count > 1}


def sentence_repeats(text, split_sentences):
    """The 3-grams that one of the sentences of `text` repeats (a paragraph's sentences may share words)."""
    return set().union(*(repeated_trigrams(sentence) for sentence in split_sentences(text)[0]))


def forms(pairs, source_names, target_names, normalize):
    """`{form: (inputs, references)}` of validation `pairs`."""
    sources = [source for source, _ in pairs]
    references = [normalize(target) for _, target in pairs]
    whole = len(pairs) - len(pairs) % PARAGRAPH
    groups = [slice(start, start + PARAGRAPH) for start in range(0, whole, PARAGRAPH)]
    long = [group for group in groups
            if all(s.endswith(".") and not s.endswith("..") for s in sources[group] + references[group])
            and LONG_WORDS[0] <= sum(len(s.split()) for s in sources[group]) <= LONG_WORDS[1]]
    return {
        "as_is": (sources, references),
        "typed": ([typed(s) for s in sources], references),
        "typed_no_accents": ([without_accents(typed(s)) for s in sources], references),
        "upper_case": ([s.upper() for s in sources], references),
        "paragraphs": ([" ".join(sources[g]) for g in groups], [" ".join(references[g]) for g in groups]),
        "long_sentence": ([one_sentence(sources[g], source_names) for g in long],
                          [one_sentence(references[g], target_names) for g in long]),
    }


def load(run_dir, split_longer_than=None):
    """The run's model as `seqtasks.load` gives it, reading sentences of up to `split_longer_than` subwords whole
    instead of its recipe's limit if given."""
    import seqtasks

    if split_longer_than is None:
        return seqtasks.load(run_dir)
    from seqtasks.export.saved_model import module_signatures
    from seqtasks.inference.api import SeqtasksModel
    from seqtasks.inference.predict import Predictor
    from seqtasks.lifecycle.runner import Runner

    runner = Runner.open(run_dir, log=lambda line: None)
    runner.task.recipe.data.split_longer_than = split_longer_than
    model = runner.load_model(None)
    module = runner.task.serving_module(model)
    spec = runner.task.spec
    predictor = Predictor(module, module.serve, spec.serving_input, spec, run_dir, module_signatures(module))
    return SeqtasksModel(predictor, runner, model)


def measure(run_dir, limit=None, batch_size=64, split_longer_than=None, settings=None):
    """Each form's inputs, lower-cased BLEU, share of `as_is`, 3-gram repeats and length ratio, as JSON."""
    import sacrebleu

    from seqtasks.lifecycle.runner import Runner
    from seqtasks.tasks.translation.task import normalize_reference
    from seqtasks.text.sentences import split_sentences

    model = load(run_dir, split_longer_than)
    train, pairs = Runner.open(run_dir, log=lambda line: None).task.read_splits()
    pairs = pairs[:limit]
    source_names = names_of(source for source, _ in train)
    target_names = names_of(target for _, target in train)
    results, signature, examples = {}, None, {}
    for name, (texts, references) in forms(pairs, source_names, target_names,
                                           lambda t: normalize_reference(t, lower_case=False)).items():
        outputs = [result.text for result in model.translate(texts, batch_size=batch_size, **(settings or {}))]
        metric = sacrebleu.BLEU(lowercase=True)
        score = metric.corpus_score(outputs, [references])
        signature = str(metric.get_signature())
        results[name] = {
            "inputs": len(texts),
            "bleu_lowercase": round(score.score, 2),
            "repeating_3gram": sum(bool(sentence_repeats(output, split_sentences)) for output in outputs),
            "references_repeating_3gram": sum(bool(sentence_repeats(r, split_sentences)) for r in references),
            # A long sentence's reference may repeat a 3-gram itself ("I don't know, I don't know"): an output
            # repeating one its reference does not is the model's doing.
            "repeating_3gram_beyond_reference": sum(
                bool(sentence_repeats(output, split_sentences) - sentence_repeats(reference, split_sentences))
                for output, reference in zip(outputs, references)),
            # Across a paragraph's sentences too ("I think ... I think").
            "repeating_3gram_anywhere": sum(bool(repeated_trigrams(output)) for output in outputs),
            "length_ratio": round(score.sys_len / score.ref_len, 3) if score.ref_len else None,
        }
        examples[name] = [{"input": t, "output": o, "reference": r} for t, o, r in zip(texts[:3], outputs, references)]
    base = results["as_is"]["bleu_lowercase"]
    for row in results.values():
        row["share_of_as_is"] = round(row["bleu_lowercase"] / base, 4) if base else None
    return {"run": str(run_dir), "pairs": len(pairs), "split_longer_than": split_longer_than,
            "settings": settings or {}, "forms": results, "examples": examples,
            "sacrebleu_signature": signature}


def table(result):
    lines = ["| form | inputs | BLEU (lower-cased) | share of as_is | a sentence repeating a 3-gram (references; "
             "beyond the reference; anywhere) | length ratio |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, row in result["forms"].items():
        share = row["share_of_as_is"]
        lines.append(f"| {name} | {row['inputs']} | {row['bleu_lowercase']:.2f} | "
                     f"{'' if share is None else f'{share:.1%}'} | {row['repeating_3gram']} "
                     f"({row['references_repeating_3gram']}; {row['repeating_3gram_beyond_reference']}; "
                     f"{row['repeating_3gram_anywhere']}) "
                     f"| {row['length_ratio']} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--limit", type=int, default=None, help="the first N validation pairs")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--split-longer-than", type=int, default=None,
                        help="read sentences of up to N subwords whole instead of the recipe's limit")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                        help="a decoding setting instead of the recipe's (repeatable)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    settings = {}
    for item in args.setting:
        name, _, value = item.partition("=")
        settings[name] = float(value) if "." in value else int(value)
    result = measure(Path(args.run_dir), args.limit, args.batch_size, args.split_longer_than, settings)
    print(table(result))
    report_json(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
