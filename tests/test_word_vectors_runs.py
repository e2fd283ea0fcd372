"""Pretrained word vectors in real runs: coverage reported, fine-tuned or frozen, and never needed again."""

import gzip
import json
import re

import numpy as np
import pytest
from conftest import run_recipe, seqtasks_command
from trained_runs import NER, SENTIMENT, RunSpec

pytestmark = pytest.mark.slow

DIM = 16
EXTRA = [f"zzunseen{chr(ord('a') + index // 26)}{chr(ord('a') + index % 26)}" for index in range(30)]


def _vectors_file(train_text, token_index, header, compress):
    """A word2vec-style file: 30 words no text has, then every other distinct training word as written (NER's
    tokens, the words of the reviews)."""
    if token_index is None:
        words = sorted(set(re.findall(r"[A-Za-z]+", train_text)))
    else:
        words = {line.split()[token_index] for line in train_text.splitlines() if line.strip()}
        words = sorted(words - {"-DOCSTART-"})
    rows = [*EXTRA, *words[::2]]
    rng = np.random.default_rng(0)
    lines = [f"{word} " + " ".join(f"{value:.4f}" for value in rng.normal(0, 0.5, DIM)) for word in rows]
    text = (f"{len(rows)} {DIM}\n" if header else "") + "\n".join(lines) + "\n"
    return gzip.compress(text.encode()) if compress else text.encode()


def _file_vectors(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as lines:
        rows = [line.split() for line in lines]
    return {row[0]: np.array(row[1:], "float32") for row in rows if len(row) == DIM + 1}


def _found(word, file_words):
    """The NER literature's matching, written out: exact, lower-cased, lower-cased with digits as 0, from the
    vocabulary's side and from the file's (a lower-cased vocabulary's "german" takes the file's "German")."""
    forms = (word, word.lower(), re.sub(r"\d", "0", word.lower()))
    return any(form in file_words for form in forms) or any(
        word in (other.lower(), re.sub(r"\d", "0", other.lower())) for other in file_words
    )


def _spec(base, name, token_index, header, compress, *overrides):
    train_name, train_text = base.files[0]
    vectors = _vectors_file(train_text, token_index, header, compress)
    spec = RunSpec(base.label + "-vectors-" + name, text=base.text, files=base.files, overrides=base.overrides + overrides)
    return spec, name, vectors


def _trained(run_cache, spec, name, vectors):
    # RunSpec files are text: the vectors file is written by a first trained run's folder key instead.
    root = run_cache.folder / f"vectors-{name}"
    root.mkdir(parents=True, exist_ok=True)
    path = root / name
    if not path.exists():
        path.with_suffix(".tmp").write_bytes(vectors)
        path.with_suffix(".tmp").replace(path)
    return run_cache.get(spec.but(spec.label, f"model.word_vectors.path={path}")), path


@pytest.fixture(scope="module")
def ner_vectors_run(run_cache):
    spec = _spec(NER, "ner.vec.gz", 0, True, True, "model.word_embedding_dim=16",
                 "model.word_vectors.fine_tune=always", "model.word_vectors.extend_vocabulary=20", "training.epochs=2",
                 "model.self_attention=luong")
    return _trained(run_cache, *spec)


@pytest.fixture(scope="module")
def sentiment_vectors_run(run_cache):
    spec = _spec(SENTIMENT, "glove.txt", None, False, False, "data.tokenizer=words", "model.embedding_dim=16",
                 "model.word_vectors.fine_tune=never", "model.word_vectors.extend_vocabulary=0", "training.epochs=2",
                 "model.self_attention=bahdanau", "model.pooling=structured", "model.hops=2")
    return _trained(run_cache, *spec)


def _model(run_dir):
    from seqtasks.lifecycle.runner import Runner

    return Runner.open(run_dir, log=lambda line: None).load_model(None)


def test_coverage_is_printed_recorded_and_on_the_model_card(ner_vectors_run):
    (root, run_dir, output), path = ner_vectors_run
    file_vectors = _file_vectors(path)
    vocab = (run_dir / "word_vocab.txt").read_text(encoding="utf-8").splitlines()
    words = vocab[2:]  # after padding and the unknown word
    assert vocab[-20:] == EXTRA[:20]  # extend_vocabulary: the file's first 20 words the training text lacks
    found = sum(_found(word, file_vectors) for word in words)
    coverage = json.loads((run_dir / "metrics.json").read_text())["word_vectors"]
    assert coverage["words"] == len(words) and coverage["found"] == found
    assert coverage["word_rate"] == pytest.approx(found / len(words), abs=1e-4)
    assert 0.2 < coverage["token_rate"] < 1 and coverage["fine_tune"] == "always"
    assert f"Word vectors: {path} ({DIM} dimensions) cover {found:,} of {len(words):,} vocabulary words" in output
    card = (root / "saved_models" / "tiny" / "1" / "assets.extra" / "MODEL_CARD.md").read_text()
    assert f"pretrained vectors `{path}` ({DIM} dimensions), fine-tuned from the first step" in card
    assert f"covered {100 * found / len(words):.1f}% of the vocabulary" in card


def test_fine_tuned_vectors_move_where_training_reaches_and_stay_where_it_does_not(ner_vectors_run):
    (_, run_dir, _), path = ner_vectors_run
    file_vectors = _file_vectors(path)
    vocab = (run_dir / "word_vocab.txt").read_text(encoding="utf-8").splitlines()
    weights = np.array(_model(run_dir).word_embedding.embeddings)
    np.testing.assert_allclose(weights[vocab.index(EXTRA[0])], file_vectors[EXTRA[0]], atol=1e-6)
    trained = [index for index, word in enumerate(vocab[:-20]) if index >= 2 and word in file_vectors]
    moved = [not np.allclose(weights[index], file_vectors[vocab[index]], atol=1e-4) for index in trained]
    assert np.mean(moved) > 0.9


def test_frozen_vectors_end_as_they_started(sentiment_vectors_run):
    (_, run_dir, output), path = sentiment_vectors_run
    file_vectors = _file_vectors(path)
    vocab = (run_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    model = _model(run_dir)
    (embedding,) = [layer for layer in model._flatten_layers() if layer.name == "embedding"]
    weights = np.array(embedding.embeddings)
    found = [(index, word) for index, word in enumerate(vocab) if word in file_vectors]
    assert len(found) > 20
    for index, word in found:
        np.testing.assert_allclose(weights[index], file_vectors[word], atol=1e-6)
    assert "Vocabulary: " in output and "more from the word vectors" not in output


def test_a_structured_pooling_export_serves_the_mean_of_its_hops(sentiment_vectors_run):
    import seqtasks
    from seqtasks.tasks.sentiment.prediction import classifier_attention_maps

    (root, run_dir, _), _ = sentiment_vectors_run
    texts = ["a truly great movie", "dull and far too long"]
    served = seqtasks.load(root / "saved_models" / "tiny").attention(texts)
    runner_model = seqtasks.load(run_dir)
    maps, ids = classifier_attention_maps(runner_model._model, runner_model._runner.task.encode, texts)
    for index, row in enumerate(served):
        count = len(row["tokens"])
        assert count == int((ids[index] != 0).sum()) > 0
        np.testing.assert_allclose(row["attention"], maps["hops"][index].mean(axis=0)[:count], atol=1e-5)
        assert sum(row["attention"]) == pytest.approx(1.0, abs=1e-5)


def test_self_attention_and_its_hops_are_drawn_after_evaluation(ner_vectors_run, sentiment_vectors_run):
    for (_, run_dir, output), _ in (ner_vectors_run, sentiment_vectors_run):
        drawn = sorted(path.name for path in (run_dir / "attention").iterdir())
        names = ["self_attention"] if (run_dir / "word_vocab.txt").exists() else ["hops", "self_attention"]
        assert drawn == sorted(f"{name}_{index}.png" for name in names for index in range(5))
        assert f"Attention maps: {len(drawn)} drawn in {run_dir / 'attention'}" in output


def test_a_run_resumes_exports_and_loads_without_the_vectors_file(ner_vectors_run, tmp_path):
    import seqtasks

    (root, run_dir, _), path = ner_vectors_run
    texts = ["EU rejects German call to boycott British lamb .", "Peter Blackburn"]
    before = seqtasks.load(run_dir).tag(texts)
    copy = tmp_path / "copy"
    from trained_runs import TrainedRun

    trained = TrainedRun(root, run_dir, "").copy_to(copy)
    gone = tmp_path / "moved-away.vec.gz"
    moved_recipe = (trained.run_dir / "recipe.yaml").read_text().replace(str(path), str(gone))
    (trained.run_dir / "recipe.yaml").write_text(moved_recipe)
    assert seqtasks.load(trained.run_dir).tag(texts) == before
    seqtasks_command("export", trained.run_dir, "--set", f"export.directory={tmp_path / 'exports'}")
    (export,) = (tmp_path / "exports").glob("*/1")
    assert seqtasks.load(export).tag(texts) == before
    # As if killed after training: the same command resumes, with the file gone.
    (trained.run_dir / "metrics.json").unlink()
    overrides = [*NER.overrides, "model.word_embedding_dim=16", "model.word_vectors.fine_tune=always",
                 "model.word_vectors.extend_vocabulary=20", "training.epochs=2", "model.self_attention=luong",
                 f"model.word_vectors.path={gone}", f"export.directory={trained.exports}"]
    again, output = run_recipe(trained.root / "tiny.yaml", trained.root / "runs", *overrides)
    assert again == trained.run_dir and "Resuming the unfinished run" in output and "Word vectors:" not in output


def test_a_missing_vectors_file_is_named_with_its_field_before_any_run_folder(tmp_path):
    (tmp_path / "reviews.tsv").write_text(SENTIMENT.files[0][1], encoding="utf-8")
    (tmp_path / "tiny.yaml").write_text(SENTIMENT.text, encoding="utf-8")
    result = seqtasks_command(
        "run", tmp_path / "tiny.yaml", "--output-dir", tmp_path / "runs", "--set", "data.tokenizer=words",
        "--set", f"model.word_vectors.path={tmp_path / 'glove.txt'}", expect=2,
    )
    assert f"{tmp_path / 'glove.txt'}: no such data file (model.word_vectors.path: " in result.output
    assert "https://nlp.stanford.edu/projects/glove/" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "runs").exists()
