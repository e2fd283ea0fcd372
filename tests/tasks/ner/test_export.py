"""NER's serving module on raw text and tokens: offsets, entity spans and their scores, in process."""

import itertools

import numpy as np
import pytest

from seqtasks.text.pretokenizers import pretokenize

TRAIN = [
    ("Ana Silva lives in New York .", "B-PER I-PER O O B-LOC I-LOC O"),
    ("Apple and Microsoft ( NASDAQ ) rose .", "B-ORG O B-ORG O B-ORG O O"),
    ("He does n't know Zürich 's mayor .", "O O O O B-LOC O O O"),
]
TEXTS = [
    "John Smith lives in New York.",
    "I bought shares of Apple and Microsoft (NASDAQ) yesterday.",
    "He doesn't know São Paulo's mayor, Dr. López.",
    "",
    "   ",
    "Zürich",
]


def _task(tmp_path, output="crf", pretokenizer="treebank"):
    from seqtasks.recipe import load_recipe
    from seqtasks.tasks import make_task

    (tmp_path / "train.conll").write_text(
        "\n".join("".join(f"{w}\t{t}\n" for w, t in zip(s.split(), tags.split())) for s, tags in TRAIN),
        encoding="utf-8",
    )
    (tmp_path / "r.yaml").write_text(
        "task: ner\nseed: 3\ndata:\n  path: train.conll\n  validation_path: train.conll\n  tag_column: 1\n"
        f"  pretokenizer: {pretokenizer}\n  max_length: 12\nmodel:\n  word_embedding_dim: 8\n  char_embedding_dim: 4\n"
        f"  char_filters: 4\n  encoder:\n    units: 6\n  output: {output}\n"
    )
    task = make_task(load_recipe(tmp_path / "r.yaml"))
    train, validation = task.read_splits()
    task.prepare(train, validation, tmp_path)
    model = task.build_model()
    # Large random potentials, so an untrained model still tags entities of every kind.
    rng = np.random.default_rng(0)
    for weight in model.potentials.weights:
        weight.assign(rng.normal(0, 3, weight.shape).astype("float32"))
    if model.crf is not None:
        for weight in model.crf.weights:
            weight.assign(rng.normal(0, 1, weight.shape).astype("float32"))
    return task, model


def _spans(tags, offsets):
    """Entities from IOB2 tags as seqeval reads them: `[(first token, last token, type)]`."""
    spans = []
    for index, tag in enumerate(tags):
        kind = None if tag == "O" else tag[2:]
        if kind and spans and spans[-1][1] == index - 1 and spans[-1][2] == kind and tag.startswith("I-"):
            spans[-1] = (spans[-1][0], index, kind)
        elif kind:
            spans.append((index, index, kind))
    return spans


def _rows(outputs):
    from seqtasks.inference.predict import plain_outputs

    return [plain_outputs({k: v.numpy() for k, v in outputs.items()}, i) for i in range(len(outputs["tags"]))]


@pytest.fixture(scope="module")
def crf_tagger(tmp_path_factory):
    task, model = _task(tmp_path_factory.mktemp("crf"))
    return task, model, task.serving_module(model)


def test_raw_text_is_split_by_the_pretokenizer_with_offsets_and_entities_from_its_tags(crf_tagger):
    import tensorflow as tf

    _, _, server = crf_tagger
    rows = _rows(server.serve(tf.constant(TEXTS)))
    found = 0
    for text, row in zip(TEXTS, rows):
        expected = pretokenize(text, "treebank")[:12]
        assert row["tokens"] == [token for token, _, _ in expected]
        assert list(zip(row["token_start"], row["token_end"])) == [(s, e) for _, s, e in expected]
        spans = _spans(row["tags"], None)
        assert [(e["start"], e["end"], e["type"]) for e in row["entities"]] == [
            (row["token_start"][first], row["token_end"][last], kind) for first, last, kind in spans
        ]
        for entity in row["entities"]:
            assert entity["text"] == text[entity["start"] : entity["end"]]
            assert 0.0 < entity["score"] <= 1.0
        found += len(spans)
    assert found >= 4
    assert rows[3]["tokens"] == rows[4]["tokens"] == [] and rows[3]["entities"] == []


def test_tokens_in_give_the_same_tags_entities_and_scores_as_the_text_they_came_from(crf_tagger):
    import tensorflow as tf

    _, _, server = crf_tagger
    from_text = _rows(server.serve(tf.constant(TEXTS)))
    tokens = [[token for token, _, _ in pretokenize(text, "treebank")][:12] for text in TEXTS]
    width = max(map(len, tokens))
    from_tokens = _rows(server.from_tokens(tf.constant([row + [""] * (width - len(row)) for row in tokens])))
    for words, raw, tokenized in zip(tokens, from_text, from_tokens):
        assert tokenized["tokens"] == words and tokenized["tags"] == raw["tags"]
        joined = " ".join(words)
        assert [joined[s:e] for s, e in zip(tokenized["token_start"], tokenized["token_end"])] == words
        def token_spans(row):
            return [(e["type"], row["token_start"].index(e["start"]), row["token_end"].index(e["end"]))
                    for e in row["entities"]]

        assert token_spans(tokenized) == token_spans(raw)
        assert [e["text"] for e in tokenized["entities"]] == [
            " ".join(words[first : last + 1]) for _, first, last in token_spans(raw)]
        assert [e["score"] for e in tokenized["entities"]] == pytest.approx([e["score"] for e in raw["entities"]],
                                                                            rel=1e-5)
    # A row ends at its first "": what follows is not read.
    cut = _rows(server.from_tokens(tf.constant([["New", "York", "", "Paris"]])))[0]
    assert cut["tokens"] == ["New", "York"]


def test_a_crf_span_score_is_its_marginal_over_every_allowed_tag_path(crf_tagger):
    import tensorflow as tf

    from seqtasks.layers.crf import iob2_constraints

    task, model, server = crf_tagger
    text = "Ana lives in York"
    row = _rows(server.serve(tf.constant([text])))[0]
    words = row["tokens"]
    potentials = np.asarray(model(task.featurizer.features(tf.ragged.constant([words])), training=False))[0]
    crf = model.crf
    transitions, start, end = (np.asarray(w, np.float64) for w in (crf.transitions, crf.start_transitions,
                                                                    crf.end_transitions))
    rules = iob2_constraints(task.tags)
    allowed, starts = np.asarray(rules["allowed_transitions"]), np.asarray(rules["allowed_starts"])
    n, length = len(task.tags), len(words)
    paths, scores = [], []
    for path in itertools.product(range(n), repeat=length):
        if not starts[path[0]] or not all(allowed[a, b] for a, b in zip(path, path[1:])):
            continue
        paths.append([task.tags[i] for i in path])
        scores.append(start[path[0]] + end[path[-1]] + sum(potentials[t, y] for t, y in enumerate(path))
                      + sum(transitions[a, b] for a, b in zip(path, path[1:])))
    probabilities = np.exp(np.array(scores) - np.max(scores))
    probabilities /= probabilities.sum()
    assert paths[int(np.argmax(probabilities))] == row["tags"]
    assert row["entities"]
    for entity in row["entities"]:
        first = row["token_start"].index(entity["start"])
        last = row["token_end"].index(entity["end"])
        kind = entity["type"]
        wanted = [f"B-{kind}"] + [f"I-{kind}"] * (last - first)
        exact = sum(p for path, p in zip(paths, probabilities)
                    if path[first : last + 1] == wanted and (last + 1 == length or path[last + 1] != f"I-{kind}"))
        assert entity["score"] == pytest.approx(exact, rel=1e-4)


def test_a_softmax_span_score_is_the_product_of_its_tokens_probabilities(tmp_path):
    import tensorflow as tf

    # The tweet pre-tokenizer this time: the recipe's choice reaches the export.
    task, model = _task(tmp_path, output="softmax", pretokenizer="tweet")
    server = task.serving_module(model)  # a tf.function method holds its module weakly
    texts = TEXTS + ["@ana loves #NYC:) http://t.co/x."]
    rows = _rows(server.serve(tf.constant(texts)))
    checked = 0
    for text, row in zip(texts, rows):
        assert row["tokens"] == [token for token, _, _ in pretokenize(text, "tweet")][:12]
        if not row["tokens"]:
            continue
        potentials = np.asarray(model(task.featurizer.features(tf.ragged.constant([row["tokens"]])), training=False))
        probabilities = np.exp(potentials[0]) / np.exp(potentials[0]).sum(-1, keepdims=True)
        for (first, last, _), entity in zip(_spans(row["tags"], None), row["entities"]):
            ids = [task.tags.index(tag) for tag in row["tags"][first : last + 1]]
            expected = np.prod([probabilities[first + i, tag] for i, tag in enumerate(ids)])
            assert entity["score"] == pytest.approx(expected, rel=1e-4)
            checked += 1
    assert checked >= 2
    assert rows[-1]["tokens"] == ["@ana", "loves", "#NYC", ":)", "http://t.co/x", "."]
    assert "`tweet` pre-tokenizer" in " ".join(task.reading_limits())
