"""A sentiment run's validation accuracy on its tokenized texts and on the same texts written out as people type them.

    python -m benchmarks.sentiment_raw_text RUN_DIR [--json OUT.json]

The validation texts of the run's recipe (SST-2's are lower-cased Penn
Treebank tokens, "it 's not bad at all !") are written out by
`seqtasks.text.pretokenizers.detokenize` ("it's not bad at all!") and, a
second time, capitalised as a sentence starts ("It's not bad at all!"). The
run's model (as `seqtasks.load(RUN_DIR)` gives it) classifies all three;
the script reports each accuracy, how many texts get the same
probabilities (to 1e-6) as their tokenized form, and how many written-out
texts the `words` splitter splits into the same words as their tokenized
form (`same_words_written_out`).
"""

import argparse
import sys
from pathlib import Path

from benchmarks.records import report_json


def measure(run_dir):
    import numpy as np

    import seqtasks
    from seqtasks.lifecycle.runner import Runner
    from seqtasks.text.pretokenizers import detokenize

    runner = Runner.open(run_dir, log=lambda line: None)
    _, validation = runner.task.read_splits()
    texts = [text for text, _ in validation]
    classes = list(runner.recipe.data.labels)
    labels = [classes.index(label) for _, label in validation]
    written = [detokenize(text.split())[0] for text in texts]
    capitalised = [text[:1].upper() + text[1:] for text in written]
    model = seqtasks.load(run_dir)
    results = {}
    reference = None
    for name, inputs in (("tokenized", texts), ("raw_text", written), ("raw_text_capitalised", capitalised)):
        answers = model.classify(inputs)
        probabilities = np.array([answer.probabilities for answer in answers])
        if reference is None:
            reference = probabilities
        predicted = probabilities.argmax(axis=1)
        results[name] = {
            "accuracy": round(float(np.mean(predicted == np.array(labels))), 4),
            "same_probabilities": int(np.sum(np.all(np.abs(probabilities - reference) < 1e-6, axis=1))),
        }
    import tensorflow as tf

    from seqtasks.text.word_tokenizer import split_words

    same = sum(a == b for a, b in zip(split_words(tf.constant(texts)).to_list(),
                                       split_words(tf.constant(written)).to_list()))
    return {"run": str(run_dir), "texts": len(texts), "same_words_written_out": same, **results}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    report_json(measure(Path(args.run_dir)), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
