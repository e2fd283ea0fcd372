"""Writes sentiment-sample.tsv: short made-up movie reviews, label<TAB>text.

The sentences are generated from the word lists below (written for seqtasks,
no third-party text). Negation ("was not good") and contrast ("good, but the
ending was dull": the clause after "but" decides) make word order matter, so
a bag of words is not enough. Run: python make_sentiment_sample.py
"""

import random
from pathlib import Path

SUBJECTS = ["the film", "this movie", "the acting", "the plot", "the soundtrack", "the ending", "the cast",
            "the script", "the direction", "the dialogue", "the story", "the camera work", "the pacing",
            "the lead actor", "the sequel", "the first hour", "every scene", "the humour"]
POSITIVE = ["good", "great", "wonderful", "moving", "brilliant", "charming", "gripping", "funny", "clever",
            "beautiful", "superb", "delightful", "fresh", "touching", "excellent", "smart", "lovely"]
NEGATIVE = ["bad", "awful", "boring", "dull", "terrible", "clumsy", "predictable", "tedious", "weak",
            "silly", "painful", "lifeless", "messy", "forgettable", "flat", "dreadful", "poor"]
ADVERBS = ["", "", "really ", "truly ", "quite ", "very ", "rather ", "utterly ", "surprisingly "]
VERBS = ["was", "is", "felt", "seemed"]
OPENERS = ["", "", "", "honestly, ", "i thought ", "to me, ", "overall, ", "in the end, "]
ENDINGS = [".", ".", ".", "!", " .", "..."]


def clause(rng, positive, negated=False):
    words = POSITIVE if positive != negated else NEGATIVE
    verb = rng.choice(VERBS)
    negation = {"was": "was not", "is": "is not", "felt": "did not feel", "seemed": "did not seem"}[verb]
    verb = negation if negated else verb
    return f"{rng.choice(SUBJECTS)} {verb} {rng.choice(ADVERBS)}{rng.choice(words)}"


def review(rng):
    positive = rng.random() < 0.5
    kind = rng.random()
    if kind < 0.45:
        text = clause(rng, positive)
    elif kind < 0.7:
        text = clause(rng, positive, negated=True)
    elif kind < 0.9:
        text = f"{clause(rng, not positive)}, but {clause(rng, positive)}"
    else:
        text = f"{clause(rng, positive)} and {clause(rng, positive, negated=rng.random() < 0.5)}"
    return ("1" if positive else "0"), rng.choice(OPENERS) + text + rng.choice(ENDINGS)


def main():
    rng = random.Random(20261122)
    rows, seen = [], set()
    while len(rows) < 3000:
        label, text = review(rng)
        if text not in seen:
            seen.add(text)
            rows.append(f"{label}\t{text}")
    path = Path(__file__).with_name("sentiment-sample.tsv")
    path.write_text("label\ttext\n" + "\n".join(rows) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
