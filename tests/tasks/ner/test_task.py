"""The NER task end to end on a slice of the shipped sample."""

import json

import pytest

from seqtasks.export.serving_limits import text_character_limit
from tests.conftest import check_eval_export_predict, seqtasks_command, serve_in_tensorflow_only
from tests.support.trained_runs import NER, NER_ENSEMBLE

def _valid_iob2(tags):
    return all(not tag.startswith("I-") or previous in ("B-" + tag[2:], tag) for previous, tag in zip(["O"] + tags, tags))


@pytest.fixture(scope="module")
def ner_run(run_cache):
    """The tiny NER run (`trained_runs.NER`): ten documents of 50 sentences, two of them the held-out split."""
    return run_cache.get(NER)


@pytest.mark.slow
def test_run_reports_seqeval_scores_per_type(ner_run):
    _, run_dir, output = ner_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert set(metrics["validation"]) == {"f1", "precision", "recall"}
    assert set(metrics["per_type"]) == {"PER", "LOC", "ORG"}
    assert all(0.0 <= scores["f1-score"] <= 1.0 for scores in metrics["per_type"].values())
    assert "Entities (seqeval)" in output
    tags = (run_dir / "tags.txt").read_text().split()
    assert tags == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    sentences = (run_dir / "predictions.conll").read_text(encoding="utf-8").strip().split("\n\n")
    predicted = [[line.split("\t")[2] for line in sentence.splitlines()] for sentence in sentences]
    assert len(predicted) == 60 and all(_valid_iob2(row) for row in predicted)
    assert metrics["train_sentences"] == 400 and set(metrics["heldout"]) == {"f1", "precision", "recall"}
    assert "heldout f1:" in output and "Held-out split 'heldout' (100 examples" in output
    # The recipe splits raw text at whitespace; its data has the full stop apart: no sentence splits back.
    assert metrics["pretokenizer_agreement"] == 0.0
    assert "Pre-tokenizer 'whitespace': 0.0% of 400 training sentences" in output
    assert "is data.pretokenizer the data's convention?" in output
    heldout = (run_dir / "eval" / "heldout" / "predictions.conll").read_text(encoding="utf-8").strip().split("\n\n")
    assert len(heldout) == 100
    card = (ner_run[0] / "saved_models" / "tiny" / "1" / "assets.extra" / "MODEL_CARD.md").read_text()
    assert f"(`data.heldout_documents`):\n\n| metric | value |\n| --- | --- |\n| f1 | {metrics['heldout']['f1']:.4f} |" in card


@pytest.mark.slow
def test_saved_model_tags_whitespace_tokens_like_the_run(ner_run):
    root, run_dir, _ = ner_run
    sentences = (run_dir / "predictions.conll").read_text(encoding="utf-8").split("\n\n")[:5]
    rows = [[line.split("\t") for line in sentence.strip().splitlines()] for sentence in sentences]
    out = serve_in_tensorflow_only(
        root / "saved_models" / "tiny" / "1",
        {
            "validation": [" ".join(r[0] for r in row) for row in rows],
            "edge": ["", "  ", "word " * 300, "Ünïcödé 漢字 🙂 \x00\x07"],
            "none": [],
            "thousand": [" ".join(r[0] for r in row) for row in rows] * 200,
            "blank": ["", "   "],
            # Cut to the characters read for data.max_length 50: the first reads "Paris" only.
            "long": [" " * (text_character_limit(50) - 5) + "Paris Berlin Rome"],
        },
    )
    for name, size in (("validation", 5), ("edge", 4), ("none", 0), ("thousand", 1000)):
        assert out[name]["tokens"]["shape"] == out[name]["tags"]["shape"] and out[name]["tags"]["shape"][0] == size
    for row, tokens, tags in zip(rows, out["validation"]["tokens"]["value"], out["validation"]["tags"]["value"]):
        real = [t for t in tokens if t]
        assert real == [r[0] for r in row]
        assert tags[: len(real)] == [r[2] for r in row] and all(t == "" for t in tags[len(real) :])
    assert out["thousand"]["tags"]["value"][995:] == out["validation"]["tags"]["value"]
    edge_tokens, edge_tags = out["edge"]["tokens"]["value"], out["edge"]["tags"]["value"]
    assert edge_tokens[0] == edge_tags[0] == [""] * len(edge_tokens[0])
    assert len([t for t in edge_tokens[2] if t]) == 50  # cut to data.max_length
    assert [t for t in edge_tokens[3] if t] == ["Ünïcödé", "漢字", "🙂", "\x00\x07"]
    # Padding is exactly the empty strings, at the end of each row, in tokens and tags alike.
    for batch in out.values():
        for tokens, tags in zip(batch["tokens"]["value"], batch["tags"]["value"]):
            count = sum(1 for token in tokens if token)
            assert all(tokens[:count]) and not any(tokens[count:]) and not any(tags[count:])
            assert all(tag != "" for tag in tags[:count]) and _valid_iob2(tags[:count])
    # Empty and blank texts: no tokens, no tags.
    assert out["blank"]["tokens"]["shape"][0] == 2 and not any(map(any, out["blank"]["tokens"]["value"]))
    assert [t for t in out["long"]["tokens"]["value"][0] if t] == ["Paris"]
    # Entities: as many as the tags hold, each the text between its offsets, with a probability.
    validation = [" ".join(r[0] for r in row) for row in rows]
    answer = out["validation"]
    for index, text in enumerate(validation):
        count = answer["entity_count"]["value"][index]
        tags = [tag for tag in answer["tags"]["value"][index] if tag]
        assert count == sum(tag.startswith("B-") for tag in tags)
        for k in range(count):
            start, end = answer["entity_start"]["value"][index][k], answer["entity_end"]["value"][index][k]
            assert answer["entity_text"]["value"][index][k] == text[start:end]
            assert 0.0 < answer["entity_score"]["value"][index][k] <= 1.0


@pytest.fixture(scope="module")
def ensemble_run(run_cache):
    """The tiny NER run as an ensemble of two taggers with self-attention, its best epoch chosen by val_f1."""
    return run_cache.get(NER_ENSEMBLE)


@pytest.mark.slow
def test_an_ensemble_run_evaluates_and_serves_with_its_members_mean_scores(ensemble_run):
    import keras
    import numpy as np

    from tests.support.layer_test_utils import tagger_inputs
    from seqtasks.models import SequenceTaggerEnsemble

    root, run_dir, output = ensemble_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    model = keras.models.load_model(run_dir / "model" / "model.keras", safe_mode=True, compile=False)
    assert isinstance(model, SequenceTaggerEnsemble) and model.members == 2
    assert metrics["parameters"] == model.count_params() == 2 * model.member_models[0].count_params()
    assert set(metrics["heldout"]) == {"f1", "precision", "recall"} and "Attention maps: " in output
    # The kept weights are those of the epoch of the best decoded F1 on validation, as seqeval scores it after.
    history = metrics["history"]
    assert len(history["f1"]) == len(history["val_f1"]) == len(history["val_loss"]) == 3
    assert metrics["validation"]["f1"] == pytest.approx(max(history["val_f1"]), abs=1e-6)
    # The members start from their own initial weights and train apart.
    x = tagger_inputs([[3, 4, 5]])
    first, second = (keras.ops.convert_to_numpy(member(x)) for member in model.member_models)
    assert not np.allclose(first, second)
    sentences = (run_dir / "predictions.conll").read_text(encoding="utf-8").split("\n\n")[:5]
    rows = [[line.split("\t") for line in sentence.strip().splitlines()] for sentence in sentences]
    texts = [" ".join(r[0] for r in row) for row in rows]
    out = serve_in_tensorflow_only(root / "saved_models" / "tiny" / "1", {"validation": texts})["validation"]
    for index, row in enumerate(rows):
        assert out["tags"]["value"][index][: len(row)] == [r[2] for r in row]
        count = out["entity_count"]["value"][index]
        assert count == sum(r[2].startswith("B-") for r in row)
        for k in range(count):
            start, end = out["entity_start"]["value"][index][k], out["entity_end"]["value"][index][k]
            assert out["entity_text"]["value"][index][k] == texts[index][start:end]
            assert 0.0 < out["entity_score"]["value"][index][k] <= 1.0


@pytest.mark.slow
def test_the_members_benchmark_scores_each_member_and_the_ensemble_as_the_run_does(ensemble_run, ner_run, tmp_path):
    from benchmarks.ensemble_members import main, measure
    from seqtasks.errors import SeqtasksError

    _, run_dir, _ = ensemble_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    before = sorted(path.name for path in run_dir.rglob("*"))
    result = measure(run_dir)
    assert result["members"] == 2 and set(result["splits"]) == {"validation", "heldout"}
    for split, scores in result["splits"].items():
        assert scores["ensemble"] == pytest.approx(metrics[split], abs=1e-9)
        assert len(scores["members"]) == 2 and all(set(m) == {"f1", "precision", "recall"} for m in scores["members"])
    assert sorted(path.name for path in run_dir.rglob("*")) == before  # the run folder is not written
    assert main([str(run_dir), "--json", str(tmp_path / "out.json")]) == 0
    assert json.loads((tmp_path / "out.json").read_text()) == result
    with pytest.raises(SeqtasksError, match="its model is not an ensemble of members trained together"):
        measure(ner_run[1])


def test_tag_vocabulary_and_unknown_validation_types():
    from seqtasks.errors import SeqtasksError
    from seqtasks.tasks.ner.config import TaggingDataConfig
    from seqtasks.tasks.ner.task import tag_vocabulary

    config = TaggingDataConfig(path="train.conll", validation_path="dev.conll")
    train = [(["a", "b"], ["B-PER", "O"]), (["c"], ["I-LOC"])]
    assert tag_vocabulary(config, train, [(["d"], ["B-LOC"])]) == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    with pytest.raises(SeqtasksError, match=r"dev.conll: validation tag 'B-ORG' has an entity type absent"):
        tag_vocabulary(config, train, [(["d"], ["B-ORG"])])


def test_without_a_validation_file_sentences_are_split_off_seeded(tmp_path):
    from seqtasks.recipe import load_recipe
    from seqtasks.tasks import make_task

    (tmp_path / "train.conll").write_text("".join(f"w{i}\tO\n\n" for i in range(20)), encoding="utf-8")
    (tmp_path / "r.yaml").write_text("task: ner\nseed: 4\ndata:\n  path: train.conll\n  validation_size: 5\n")
    train, validation = make_task(load_recipe(tmp_path / "r.yaml")).read_splits()
    assert len(train) == 15 and len(validation) == 5
    assert sorted(train + validation) == sorted(([f"w{i}"], ["O"]) for i in range(20))
    assert make_task(load_recipe(tmp_path / "r.yaml")).read_splits() == (train, validation)


def _marked(row):
    """`token<TAB>gold<TAB>predicted` rows as `seqtasks predict` shows the predicted entities: "[New York|LOC]"."""
    pieces = []  # [words, type or None]
    for token, _, tag in row:
        if tag.startswith("I-") and pieces and pieces[-1][1] == tag[2:]:
            pieces[-1][0].append(token)
        else:
            pieces.append([[token], tag[2:] if tag != "O" else None])
    return " ".join(f"[{' '.join(words)}|{kind}]" if kind else words[0] for words, kind in pieces)


@pytest.mark.slow
def test_eval_export_and_predict_commands(ner_run, tmp_path):
    root, run_dir, _ = ner_run.copy_to(tmp_path / "copy")  # eval writes into the run folder
    recorded = json.loads((run_dir / "metrics.json").read_text())["validation"]

    def examples(folder):
        sentences = (folder / "predictions.conll").read_text(encoding="utf-8").split("\n\n")[:4]
        rows = [[line.split("\t") for line in sentence.strip().splitlines()] for sentence in sentences]
        inputs = [" ".join(r[0] for r in row) for row in rows] + ["", "   "]
        return inputs, [_marked(row) for row in rows] + ["", "   "]

    check_eval_export_predict(run_dir, root / "dev.conll", examples, tmp_path / "exports", recorded)


@pytest.mark.slow  # loads the export once more: the fast tier stays under 3 minutes
def test_predict_json_lines_hold_no_padding(ner_run):
    """Each JSON line holds its input's own tokens and tags; a blank text has none."""
    root, _, _ = ner_run
    result = seqtasks_command("predict", root / "saved_models" / "tiny" / "1", "Peter lives in Berlin .", "  ", "--json")
    first, blank = (json.loads(line) for line in result.stdout.splitlines())
    assert first["tokens"] == ["Peter", "lives", "in", "Berlin", "."] and len(first["tags"]) == 5
    assert blank == {"tags": [], "tokens": [], "token_start": [], "token_end": [], "entities": []}
    assert list(zip(first["token_start"], first["token_end"])) == [(0, 5), (6, 11), (12, 14), (15, 21), (22, 23)]
    import seqtasks

    model = seqtasks.load(root / "saved_models" / "tiny")
    tagged, empty = model.tag(["Peter lives in Berlin .", "  "])
    assert (tagged.tokens, tagged.tags, empty.tokens, empty.entities) == (first["tokens"], first["tags"], [], [])
    assert [(e.start, e.end, e.text, e.type, e.score) for e in tagged.entities] == [
        (e["start"], e["end"], e["text"], e["type"], e["score"]) for e in first["entities"]]
    assert model.tag([first["tokens"]])[0].tags == first["tags"]
    assert model.predict("Peter lives in Berlin .") == first


def test_heldout_documents_are_carved_from_training_and_only_when_asked(tmp_path):
    from seqtasks.recipe import load_recipe
    from seqtasks.tasks import make_task

    text = "".join("-DOCSTART- O\n\n" + "".join(f"d{d}s{s}\tO\n\n" for s in range(3)) for d in range(10))
    (tmp_path / "train.conll").write_text(text, encoding="utf-8")
    recipe = "task: ner\nseed: 4\ndata:\n  path: train.conll\n  tag_column: 1\n  validation_size: 5\n"
    (tmp_path / "r.yaml").write_text(recipe)
    (tmp_path / "h.yaml").write_text(recipe + "  heldout_documents: 2\n")
    plain = make_task(load_recipe(tmp_path / "r.yaml"))
    assert len(sum(plain.read_splits(), [])) == 30 and plain.heldout_splits() == {}
    task = make_task(load_recipe(tmp_path / "h.yaml"))
    train, validation = task.read_splits()
    heldout = task.heldout_splits()["heldout"]
    assert len(heldout) == 6 and len({words[0][:2] for words, _ in heldout}) == 2
    assert len(train) + len(validation) == 24
    assert not {words[0][:2] for words, _ in heldout} & {words[0][:2] for words, _ in train + validation}


def test_heldout_sentences_are_carved_from_a_file_without_documents(tmp_path):
    from seqtasks.errors import SeqtasksError
    from seqtasks.recipe import load_recipe
    from seqtasks.tasks import make_task

    (tmp_path / "train.conll").write_text("".join(f"s{s}\tO\n\n" for s in range(30)), encoding="utf-8")
    recipe = "task: ner\nseed: 4\ndata:\n  path: train.conll\n  tag_column: 1\n  validation_size: 5\n"
    (tmp_path / "h.yaml").write_text(recipe + "  heldout_sentences: 7\n")
    task = make_task(load_recipe(tmp_path / "h.yaml"))
    train, validation = task.read_splits()
    heldout = task.heldout_splits()["heldout"]
    assert len(heldout) == 7 and len(train) + len(validation) == 23
    assert {words[0] for words, _ in heldout + train + validation} == {f"s{s}" for s in range(30)}
    again = make_task(load_recipe(tmp_path / "h.yaml"))
    again.read_splits()
    assert again.heldout_splits()["heldout"] == heldout
    (tmp_path / "both.yaml").write_text(recipe + "  heldout_sentences: 7\n  heldout_documents: 1\n")
    with pytest.raises(SeqtasksError, match="data.heldout_sentences: set aside documents or sentences, not both"):
        load_recipe(tmp_path / "both.yaml")


def test_singletons_come_last_in_the_vocabulary_only_with_singleton_unk(tmp_path):
    from seqtasks.recipe import load_recipe
    from seqtasks.tasks import make_task

    sentences = [(["Rare", "the", "The", "cat", "1996"], ["O"] * 5), (["a", "cat", "2001"], ["O"] * 3)]
    (tmp_path / "plain.yaml").write_text("task: ner\ndata:\n  path: x.conll\n")
    (tmp_path / "unk.yaml").write_text("task: ner\ndata:\n  path: x.conll\nmodel:\n  singleton_unk: 0.5\n")
    plain = make_task(load_recipe(tmp_path / "plain.yaml"))
    plain.prepare(sentences, sentences[:1], tmp_path)
    assert (tmp_path / "word_vocab.txt").read_text().split() == ["[PAD]", "[UNK]", "0000", "a", "cat", "rare", "the"]
    assert not (tmp_path / "first_singleton.txt").exists() and plain.build_model().first_singleton is None
    task = make_task(load_recipe(tmp_path / "unk.yaml"))
    task.prepare(sentences, sentences[:1], tmp_path)
    # Seen twice or more: 0000 (1996, 2001), cat, the (the, The); once: a, rare.
    assert (tmp_path / "word_vocab.txt").read_text().split() == ["[PAD]", "[UNK]", "0000", "cat", "the", "a", "rare"]
    assert (tmp_path / "first_singleton.txt").read_text() == "5\n"
    model = task.build_model()
    assert (model.singleton_unk, model.first_singleton) == (0.5, 5)
    restored = make_task(load_recipe(tmp_path / "unk.yaml"))
    restored.restore(tmp_path)
    rebuilt = restored.build_model()
    assert (rebuilt.first_singleton, rebuilt.word_vocab_size) == (5, 7)


def test_an_ensembles_members_each_start_from_the_word_vectors(tmp_path):
    import keras
    import numpy as np

    from seqtasks.models import SequenceTaggerEnsemble
    from seqtasks.recipe import load_recipe
    from seqtasks.tasks import make_task

    (tmp_path / "train.conll").write_text("Paris\tB-LOC\nis\tO\nbig\tO\n\nRome\tB-LOC\n\n", encoding="utf-8")
    (tmp_path / "dev.conll").write_text("Rome\tB-LOC\n\n", encoding="utf-8")
    (tmp_path / "vectors.txt").write_text("paris 1 2 3\nrome 4 5 6\nis 7 8 9\n", encoding="utf-8")
    (tmp_path / "r.yaml").write_text(
        "task: ner\ndata:\n  path: train.conll\n  validation_path: dev.conll\n  tag_column: 1\n"
        "model:\n  word_embedding_dim: 3\n  ensemble: 3\n"
        "  word_vectors: {path: vectors.txt, fine_tune: never}\n  encoder: {units: 4, bidirectional: true}\n"
    )
    task = make_task(load_recipe(tmp_path / "r.yaml"))
    train, validation = task.read_splits()
    (tmp_path / "run").mkdir()
    task.prepare(train, validation, tmp_path / "run")
    model = task.build_model()
    assert isinstance(model, SequenceTaggerEnsemble) and model.members == 3
    vocab = (tmp_path / "run" / "word_vocab.txt").read_text(encoding="utf-8").split()
    for member in model.member_models:
        table = keras.ops.convert_to_numpy(member.word_embedding.embeddings)
        np.testing.assert_array_equal(table[vocab.index("rome")], [4, 5, 6])
        np.testing.assert_array_equal(table[vocab.index("is")], [7, 8, 9])
        assert not member.word_embedding.trainable  # fine_tune: never holds for every member
    from seqtasks.errors import SeqtasksError

    with pytest.raises(SeqtasksError, match=r"model\.ensemble.*at most 16; got 17"):
        load_recipe(tmp_path / "r.yaml", ["model.ensemble=17"])
