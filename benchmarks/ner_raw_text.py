"""An NER run's F1 on tokenized input and on raw text, side by side, scored on character spans.

    python -m benchmarks.ner_raw_text RUN_DIR [--data FILE | --heldout] [--limit N] [--pretokenizer NAME]
        [--json OUT.json]

The sentences of FILE (default: the run recipe's `data.validation_path`; with
`--heldout`, the run's held-out split, `data.heldout_documents` or
`data.heldout_sentences`, which chose nothing) are
written out as a user would type them (`seqtasks.text.pretokenizers.detokenize`:
no space before closing punctuation and clitics, none after opening brackets,
quotes paired), so every gold entity has character offsets in that text. The
run's model (its serving module, in process, as `seqtasks.load(RUN_DIR)` gives
it) then tags

- `tokenized`: the data's own tokens (`from_tokens`); its entities are mapped
  to the written-out text through the tokens' offsets there;
- `raw_text`: the written-out text (`serving_default`: the recipe's
  `data.pretokenizer` splits it inside the graph);
- `raw_text_lower`: the same text lower-cased, as search queries, chat and
  transcripts are (each character on its own, so the gold offsets hold);

and both are scored as exact (start, end, type) character spans against the
gold spans: precision, recall and F1, micro-averaged over the entities.
`tokenized` on character spans equals seqeval's entity F1 of the same tags.
"""

import argparse
import sys
from pathlib import Path

from benchmarks.records import report_json


def entity_spans(tags, offsets):
    """`{(start, end, type)}` of IOB2 `tags` (an `I-X` after anything but `X` starts an entity, as seqeval)."""
    spans, current = set(), None
    for (start, end), tag in zip(offsets, tags):
        kind = tag[2:] if tag != "O" else None
        if current and (kind != current[2] or tag.startswith("B-")):
            spans.add(tuple(current))
            current = None
        if kind and current is None:
            current = [start, end, kind]
        elif kind:
            current[1] = end
    if current:
        spans.add(tuple(current))
    return spans


def lower_case(text):
    """`text` lower-cased character by character, so that offsets into it hold (a character whose lower case is
    longer, such as "İ", is kept)."""
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


def scores(gold, predicted):
    """Micro precision, recall and F1 of lists of span sets."""
    hits = sum(len(g & p) for g, p in zip(gold, predicted))
    found, wanted = sum(map(len, predicted)), sum(map(len, gold))
    precision = hits / found if found else 0.0
    recall = hits / wanted if wanted else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4), "gold": wanted,
            "predicted": found}


def load(run_dir, pretokenizer=None):
    """The run's final model as `seqtasks.load` gives it, with `pretokenizer` instead of the recipe's if given."""
    from seqtasks.export.saved_model import module_signatures
    from seqtasks.inference.api import SeqtasksModel
    from seqtasks.inference.predict import Predictor
    from seqtasks.lifecycle.runner import Runner

    runner = Runner.open(run_dir, log=lambda line: None)
    if pretokenizer:
        runner.task.recipe.data.pretokenizer = pretokenizer
    model = runner.load_model(None)
    module = runner.task.serving_module(model)
    spec = runner.task.spec
    predictor = Predictor(module, module.serve, spec.serving_input, spec, run_dir, module_signatures(module))
    return SeqtasksModel(predictor, runner, model), runner.task


def measure(run_dir, data=None, limit=None, pretokenizer=None, heldout=False):
    from seqtasks.text.pretokenizers import detokenize

    run_dir = Path(run_dir)
    model, task = load(run_dir, pretokenizer)
    if heldout:
        task.read_splits()
        path, sentences = "heldout", task.heldout_splits()["heldout"][:limit]
    else:
        path = data or task.recipe.data.validation_path
        sentences = task.read_file(path)[:limit]
    written = [detokenize(words) for words, _ in sentences]
    gold = [entity_spans(tags, spans) for (_, tags), (_, spans) in zip(sentences, written)]
    tokenized = model.tag([list(words) for words, _ in sentences])
    from_tokens = [entity_spans(result.tags, spans) for result, (_, spans) in zip(tokenized, written)]
    raw = model.tag([text for text, _ in written])
    from_text = [{(e.start, e.end, e.type) for e in result.entities} for result in raw]
    lowered = model.tag([lower_case(text) for text, _ in written])
    from_lowered = [{(e.start, e.end, e.type) for e in result.entities} for result in lowered]
    same_tokens = sum(result.tokens == list(words) for result, (words, _) in zip(raw, sentences))
    return {
        "run": str(run_dir),
        "data": str(path),
        "sentences": len(sentences),
        "pretokenizer": task.recipe.data.pretokenizer,
        "raw_text_tokens_as_data": round(same_tokens / max(1, len(sentences)), 4),
        "tokenized": scores(gold, from_tokens),
        "raw_text": scores(gold, from_text),
        "raw_text_lower": scores(gold, from_lowered),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--data", default=None)
    parser.add_argument("--heldout", action="store_true", help="the run's held-out split instead of a file")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--pretokenizer", default=None, help="instead of the recipe's data.pretokenizer")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    result = measure(args.run_dir, args.data, args.limit, args.pretokenizer, args.heldout)
    report_json(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
