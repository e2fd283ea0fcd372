"""Pretrained word vectors in the NER and sentiment tasks: frozen, fine-tuned, fine-tuned after N epochs.

Extending a lower-cased vocabulary from a cased vectors file (`model.word_vectors.extend_vocabulary`).

The file's words are added as the task looks words up (lower-cased; NER
also reads digits as 0), once each, and each added word starts from the
vector `embedding_matrix` picks for it: the file's own lower-cased word
when the file has one, else the first cased form in the file.

Pretrained word vectors in real runs: coverage reported, fine-tuned or frozen, and never needed again.
"""

import gzip
import json
import re

import keras
import numpy as np
import pytest

from seqtasks.models.pretrained_vectors import extended_vocabulary
from seqtasks.recipe.schema import WordVectorsConfig
from seqtasks.text.word_vectors import embedding_matrix
from seqtasks.training.optimizers import Adam, AdamW
from tests.conftest import run_recipe, seqtasks_command
from tests.support.trained_runs import NER, SENTIMENT, RunSpec


def _model_and_data(seed=0):
    keras.utils.set_random_seed(seed)
    ids = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(20, 4, name="embedding")(ids)
    pooled = keras.layers.GlobalAveragePooling1D()(embedded)
    model = keras.Model(ids, keras.layers.Dense(2, name="dense")(pooled))
    rng = np.random.default_rng(seed)
    return model, rng.integers(1, 20, (32, 5)).astype("int32"), rng.integers(0, 2, 32).astype("int32")


@pytest.mark.backends
@pytest.mark.slow
@pytest.mark.parametrize("optimizer_class", [Adam, AdamW])
def test_frozen_variables_stay_as_they_are_for_their_epochs_then_train(optimizer_class):
    model, x, y = _model_and_data()
    optimizer = optimizer_class(0.05, **({"weight_decay": 0.5} if optimizer_class is AdamW else {}))
    embedding = model.get_layer("embedding").embeddings
    optimizer.freeze([embedding], epochs=2)
    optimizer.steps_per_epoch = 4
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    start, dense = np.array(embedding), np.array(model.get_layer("dense").kernel)
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)  # 8 steps: two frozen epochs of 4
    assert int(optimizer.iterations) == 8
    np.testing.assert_array_equal(np.array(embedding), start)  # neither the gradient nor the weight decay moved it
    assert not np.allclose(np.array(model.get_layer("dense").kernel), dense)
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    assert not np.allclose(np.array(embedding), start)


@pytest.mark.backends
@pytest.mark.slow
def test_frozen_variables_need_the_steps_of_an_epoch():
    model, x, y = _model_and_data()
    optimizer = Adam(0.01)
    optimizer.freeze([model.get_layer("embedding").embeddings], epochs=1)
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(ValueError, match="frozen variables need steps_per_epoch"):
        model.fit(x, y, batch_size=4, epochs=1, verbose=0)


@pytest.mark.backends
def test_the_vectors_start_the_embeddings_and_never_keeps_them_frozen():
    from types import SimpleNamespace

    from seqtasks.models.pretrained_vectors import apply_vectors, freeze_for_epochs

    matrix = np.arange(80, dtype="float32").reshape(20, 4)
    for mode, trainable in (("always", True), ("never", False), ("after", True)):
        model, _, _ = _model_and_data()
        layer = model.get_layer("embedding")
        config = SimpleNamespace(path="v.txt", fine_tune=mode, fine_tune_after=3)
        apply_vectors(config, [layer], matrix)
        np.testing.assert_array_equal(np.array(layer.embeddings), matrix)
        assert layer.trainable is trainable
        optimizer = Adam(0.01)
        freeze_for_epochs(config, [layer], optimizer)
        assert optimizer.frozen_paths == ((layer.embeddings.path,) if mode == "after" else ())
        assert optimizer.frozen_epochs == (3 if mode == "after" else 0)
    model, _, _ = _model_and_data()
    before = np.array(model.get_layer("embedding").embeddings)
    apply_vectors(SimpleNamespace(path="", fine_tune="never", fine_tune_after=1), [model.get_layer("embedding")], None)
    np.testing.assert_array_equal(np.array(model.get_layer("embedding").embeddings), before)
    assert model.get_layer("embedding").trainable


# "Paris" comes before "paris"; "London" and "Berlin"/"BERLIN" are cased only; "The" is a training word.
VECTORS = {
    "The": [0.25, 0.125, 0.75],  # values a float32 holds exactly
    "Paris": [1.0, 0.0, 0.0],
    "paris": [2.0, 0.0, 0.0],
    "London": [0.0, 1.0, 0.0],
    "Berlin": [0.0, 0.0, 1.0],
    "BERLIN": [0.0, 0.0, 2.0],
    "1990": [3.0, 3.0, 3.0],
    "2001": [4.0, 4.0, 4.0],
    "Cat": [0.5, 0.5, 0.5],
}


def _extension_vectors_file(path):
    path.write_text("".join(f"{word} {' '.join(map(str, vector))}\n" for word, vector in VECTORS.items()))
    return path


def test_a_lower_cased_vocabulary_gains_the_files_words_lower_cased_once_each(tmp_path):
    config = WordVectorsConfig(path=str(_extension_vectors_file(tmp_path / "vectors.txt")), extend_vocabulary=6)
    vocabulary = ["[PAD]", "[UNK]", "the", "cat"]
    extended = extended_vocabulary(vocabulary, config, str.lower)  # as the sentiment task calls it
    # The first 6 file words: The (known as "the"), Paris and paris (one word), London, Berlin and BERLIN (one).
    assert extended == vocabulary + ["paris", "london", "berlin"]
    matrix, coverage = embedding_matrix(config.path, extended, reserved=2)
    rows = dict(zip(extended, matrix))
    np.testing.assert_array_equal(rows["paris"], VECTORS["paris"])  # the file's own, though "Paris" comes first
    np.testing.assert_array_equal(rows["london"], VECTORS["London"])
    np.testing.assert_array_equal(rows["berlin"], VECTORS["Berlin"])  # the first cased form, not "BERLIN"
    np.testing.assert_array_equal(rows["the"], VECTORS["The"])
    assert (coverage.found, coverage.exact, coverage.lower) == (5, 1, 4)


def test_without_normalizing_the_cased_words_are_added_as_they_are(tmp_path):
    config = WordVectorsConfig(path=str(_extension_vectors_file(tmp_path / "vectors.txt")), extend_vocabulary=3)
    assert extended_vocabulary(["[PAD]", "[UNK]", "the"], config) == ["[PAD]", "[UNK]", "the", "The", "Paris", "paris"]


def test_the_ner_task_extends_its_lower_cased_vocabulary_with_lower_cased_words_and_their_vectors(tmp_path):
    from seqtasks.recipe import load_recipe
    from seqtasks.tasks import make_task

    vectors = _extension_vectors_file(tmp_path / "vectors.txt")
    (tmp_path / "ner.yaml").write_text(
        "task: ner\ndata:\n  path: x.conll\nmodel:\n  word_embedding_dim: 3\n"
        f"  word_vectors:\n    path: {vectors}\n    extend_vocabulary: {len(VECTORS)}\n"
    )
    task = make_task(load_recipe(tmp_path / "ner.yaml"))
    sentences = [(["The", "cat", "saw", "Paris"], ["O", "O", "O", "B-LOC"])]
    task.prepare(sentences, sentences, tmp_path)
    vocab = (tmp_path / "word_vocab.txt").read_text().split()
    trained = ["[PAD]", "[UNK]", "cat", "paris", "saw", "the"]
    # Lower-cased, digits as 0 ("1990" and "2001" are one word), none twice, none already trained on.
    assert vocab == trained + ["london", "berlin", "0000"]
    rows = dict(zip(vocab, task.initial_vectors))
    np.testing.assert_array_equal(rows["paris"], VECTORS["paris"])
    np.testing.assert_array_equal(rows["london"], VECTORS["London"])
    np.testing.assert_array_equal(rows["berlin"], VECTORS["Berlin"])
    np.testing.assert_array_equal(rows["0000"], VECTORS["1990"])  # the first file word that reads as it
    np.testing.assert_array_equal(rows["cat"], VECTORS["Cat"])


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_fine_tuned_vectors_move_where_training_reaches_and_stay_where_it_does_not(ner_vectors_run):
    (_, run_dir, _), path = ner_vectors_run
    file_vectors = _file_vectors(path)
    vocab = (run_dir / "word_vocab.txt").read_text(encoding="utf-8").splitlines()
    weights = np.array(_model(run_dir).word_embedding.embeddings)
    np.testing.assert_allclose(weights[vocab.index(EXTRA[0])], file_vectors[EXTRA[0]], atol=1e-6)
    trained = [index for index, word in enumerate(vocab[:-20]) if index >= 2 and word in file_vectors]
    moved = [not np.allclose(weights[index], file_vectors[vocab[index]], atol=1e-4) for index in trained]
    assert np.mean(moved) > 0.9


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_self_attention_and_its_hops_are_drawn_after_evaluation(ner_vectors_run, sentiment_vectors_run):
    for (_, run_dir, output), _ in (ner_vectors_run, sentiment_vectors_run):
        drawn = sorted(path.name for path in (run_dir / "attention").iterdir())
        names = ["self_attention"] if (run_dir / "word_vocab.txt").exists() else ["hops", "self_attention"]
        assert drawn == sorted(f"{name}_{index}.png" for name in names for index in range(5))
        assert f"Attention maps: {len(drawn)} drawn in {run_dir / 'attention'}" in output


@pytest.mark.slow
def test_a_run_resumes_exports_and_loads_without_the_vectors_file(ner_vectors_run, tmp_path):
    import seqtasks

    (root, run_dir, _), path = ner_vectors_run
    texts = ["EU rejects German call to boycott British lamb .", "Peter Blackburn"]
    before = seqtasks.load(run_dir).tag(texts)
    copy = tmp_path / "copy"
    from tests.support.trained_runs import TrainedRun

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


@pytest.mark.slow
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
