"""Writes ner-sample.train.conll and ner-sample.dev.conll: made-up sentences with PER, LOC, ORG.

Sentences come from the templates below and names are built from random
syllables, so no third-party text is involved and the validation names are
mostly never seen in training: the tagger has to use context, capitals and
spelling (the character features) rather than memorised words.
Run: python make_ner_sample.py
"""

import random
from pathlib import Path

SYLLABLES = ["ka", "lo", "mi", "ra", "ten", "vo", "sha", "dor", "el", "an", "bru", "qui", "zel", "tor",
             "nae", "fin", "gar", "ju", "pel", "os", "wen", "ly", "cor", "ma", "ri", "sto", "ban", "hel"]
TEMPLATES = [
    "yesterday {PER} flew from {LOC} to {LOC} .",
    "{ORG} hired {PER} as its new chief engineer .",
    "{PER} works for {ORG} in {LOC} .",
    "the mayor of {LOC} met {PER} on Tuesday .",
    "shares of {ORG} rose 4 % after the report .",
    "{PER} and {PER} opened a bakery in {LOC} .",
    "according to {ORG} , the storm reached {LOC} at noon .",
    "{PER} said the deal with {ORG} was signed in {LOC} .",
    "a spokesman for {ORG} declined to comment .",
    "{PER} grew up near {LOC} before moving to {LOC} .",
    "the festival in {LOC} drew 20,000 visitors this year .",
    "{ORG} will build a new factory outside {LOC} , {PER} announced .",
    "coach {PER} praised the team after the win in {LOC} .",
    "investors expect {ORG} to buy {ORG} next year .",
    "we took the train to {LOC} and stayed two nights .",
    "{PER} , who founded {ORG} in 1998 , retired on Friday .",
]
ORG_FORMS = ["{N} Labs", "{N} Holdings", "Bank of {N}", "{N} Motors", "{N}", "{N} {N} Group", "{N} Airlines"]
LOC_FORMS = ["{N}", "{N}", "New {N}", "{N} City", "Port {N}", "{N} Valley"]
PER_FORMS = ["{N} {N}", "{N} {N}", "{N}", "Dr. {N}", "{N} {N} {N}"]


def name(rng):
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


def entity(rng, kind):
    form = rng.choice({"PER": PER_FORMS, "LOC": LOC_FORMS, "ORG": ORG_FORMS}[kind])
    tokens = form.replace("{N}", "\0").split()
    return [name(rng) if token == "\0" else token for token in tokens]


def sentence(rng):
    tokens, tags = [], []
    template = rng.choice(TEMPLATES)
    for word in template.split():
        kind = word.strip("{}") if word.startswith("{") else None
        if kind:
            for index, token in enumerate(entity(rng, kind)):
                tokens.append(token)
                tags.append(("B-" if index == 0 else "I-") + kind)
        else:
            tokens.append(word)
            tags.append("O")
    tokens[0] = tokens[0][0].upper() + tokens[0][1:]
    return tokens, tags


def write(path, sentences):
    text = "\n".join("".join(f"{t}\t{g}\n" for t, g in zip(*s)) for s in sentences)
    path.write_text(text, encoding="utf-8")


def main():
    rng = random.Random(20261122)
    folder = Path(__file__).parent
    write(folder / "ner-sample.train.conll", [sentence(rng) for _ in range(2000)])
    write(folder / "ner-sample.dev.conll", [sentence(rng) for _ in range(400)])


if __name__ == "__main__":
    main()
