"""The sentiment task end to end on a slice of the shipped sample.

recipes/sentiment-imdb.yaml's header tells how to read the aclImdb archive's folders: its `--set` line does.
"""

import json
import shlex

import numpy as np
import pytest

from seqtasks.errors import SeqtasksError
from seqtasks.export.serving_limits import MAX_TEXT_CHARACTERS, cut_text, text_character_limit
from seqtasks.recipe import load_recipe
from seqtasks.tasks import make_task
from seqtasks.tasks.sentiment.task import class_labels, classification_metrics
from tests.conftest import REPO, check_eval_export_predict, serve_in_tensorflow_only
from tests.support.trained_runs import SENTIMENT, SENTIMENT_ENSEMBLE, SENTIMENT_RECIPE


@pytest.fixture(scope="module")
def sentiment_run(run_cache):
    """The tiny sentiment run (`trained_runs.SENTIMENT`): 700 reviews of the shipped sample, attention pooling."""
    return run_cache.get(SENTIMENT)


@pytest.mark.slow
def test_run_reports_accuracy_macro_f1_and_a_confusion_matrix(sentiment_run):
    _, run_dir, output = sentiment_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["validation"]["accuracy"] > 0.7  # the sample is learnable
    confusion = np.array(metrics["confusion_matrix"]["rows_actual_columns_predicted"])
    assert confusion.sum() == 100 and metrics["confusion_matrix"]["labels"] == ["negative", "positive"]
    assert np.trace(confusion) / 100 == pytest.approx(metrics["validation"]["accuracy"])
    assert (run_dir / "confusion_matrix.png").read_bytes()[:4] == b"\x89PNG"
    assert "validation macro_f1:" in output and "Sample predictions" in output


@pytest.mark.slow
def test_saved_model_serves_labels_and_probabilities_like_the_run(sentiment_run):
    root, run_dir, _ = sentiment_run
    rows = [line.split("\t") for line in (run_dir / "predictions.tsv").read_text().splitlines()[:6]]
    out = serve_in_tensorflow_only(
        root / "saved_models" / "tiny" / "1",
        {
            "validation": [row[2] for row in rows],
            "edge": ["", "great " * 2000, "¿Qué tal? Ünïcödé 漢字 🙂", "\x00\x07<br />"],
            "none": [],
            "thousand": [row[2] for row in rows] * 167,
            "blank": ["", "   ", "\t\n"],
            # Cut to the first characters read for data.max_length 12: the first reads "great" only.
            "long": [" " * (text_character_limit(12) - 5) + "great awful boring", "great", "great awful boring"],
        },
    )
    for name, size in (("validation", 6), ("edge", 4), ("none", 0), ("thousand", 1002), ("blank", 3), ("long", 3)):
        assert out[name]["label"]["shape"] == [size] and out[name]["probabilities"]["shape"] == [size, 2]
        assert out[name]["probabilities"]["dtype"] == "float32"
    assert out["validation"]["label"]["value"] == [row[0] for row in rows]
    assert out["thousand"]["label"]["value"] == [row[0] for row in rows] * 167
    assert np.allclose(np.sum(out["edge"]["probabilities"]["value"], axis=1), 1.0, atol=1e-5)
    assert out["edge"]["label"]["value"][0] == "" and set(out["edge"]["label"]["value"][1:]) <= {"negative", "positive"}
    # No subwords, nothing to classify: no label, every class equally likely.
    assert out["blank"]["label"]["value"] == ["", "", ""]
    assert out["blank"]["probabilities"]["value"] == [[0.5, 0.5]] * 3
    long = out["long"]["probabilities"]["value"]
    assert long[0] == long[1] != long[2]


@pytest.mark.slow  # builds the run's serving function in this process
def test_the_python_api_classifies_from_the_run_folder_like_the_run(sentiment_run):
    import seqtasks

    _, run_dir, _ = sentiment_run
    rows = [line.split("\t") for line in (run_dir / "predictions.tsv").read_text().splitlines()[:4]]
    model = seqtasks.load(run_dir)
    assert model.task == "sentiment" and model.path == run_dir
    results = model.classify([row[2] for row in rows] + ["  "], batch_size=3)
    assert [result.label for result in results] == [row[0] for row in rows] + [""]
    assert all(abs(sum(result.probabilities) - 1.0) < 1e-5 for result in results)
    assert results[-1].probabilities == [0.5, 0.5]


def test_classification_metrics_by_hand():
    scores = classification_metrics(np.array([0, 1, 1, 2, 2, 2]), np.array([0, 0, 1, 2, 2, 1]), ["a", "b", "c"])
    assert scores["confusion_matrix"] == [[1, 1, 0], [0, 1, 1], [0, 0, 2]]
    assert scores["accuracy"] == pytest.approx(4 / 6)
    # F1: a = 2/3 (P 1, R 1/2), b = 1/2 (P 1/2, R 1/2), c = 4/5 (P 2/3, R 1).
    assert scores["macro_f1"] == pytest.approx((2 / 3 + 1 / 2 + 4 / 5) / 3)


def test_text_encoder_strips_html_and_keeps_the_first_or_last_subwords():
    import tensorflow as tf

    from seqtasks.tasks.sentiment.config import TextClassificationDataConfig
    from seqtasks.text.special_ids import RESERVED_TOKENS
    from seqtasks.tasks.sentiment.task import make_text_encoder
    from seqtasks.text.subword_tokenizer import SubwordTokenizer

    tokenizer = SubwordTokenizer(list(RESERVED_TOKENS) + ["a", "b", "c", "br", "<", ">", "/"], lower_case=True)
    text = tf.constant(["a<br />b c", ""])
    first = TextClassificationDataConfig(path="x", strip_html=True, max_length=2)
    last = TextClassificationDataConfig(path="x", strip_html=True, max_length=2, keep="last")
    raw = TextClassificationDataConfig(path="x", max_length=10)
    assert make_text_encoder(first, tokenizer)(text).to_list() == [[4, 5], []]
    assert make_text_encoder(last, tokenizer)(text).to_list() == [[5, 6], []]
    assert 7 in make_text_encoder(raw, tokenizer)(text).to_list()[0]  # "br" stays without strip_html


def test_served_texts_are_cut_to_a_character_limit_that_grows_with_max_length():
    import tensorflow as tf

    assert text_character_limit(12) == text_character_limit(200) == MAX_TEXT_CHARACTERS == 10_000
    assert text_character_limit(400) == 20_000
    limit = text_character_limit(1)
    text = "é" * (limit - 1) + "ab"  # characters, not bytes: é is two
    first, last = (cut_text(tf.constant([text, "", "xyz"]), 1, keep).numpy().tolist() for keep in ("first", "last"))
    assert first == [("é" * (limit - 1) + "a").encode(), b"", b"xyz"]
    assert last == [("é" * (limit - 2) + "ab").encode(), b"", b"xyz"]


def test_labels_outside_the_recipe_labels_are_named():
    from seqtasks.errors import SeqtasksError
    from seqtasks.tasks.sentiment.config import TextClassificationDataConfig
    from seqtasks.tasks.sentiment.task import class_labels

    config = TextClassificationDataConfig(path="train.tsv", validation_path="dev.tsv", labels=["0", "1"])
    assert class_labels(config, [("x", "0"), ("y", "1")], [("z", "1")]) == (["0", "1"], ["0", "1"])
    with pytest.raises(SeqtasksError, match=r"dev.tsv: validation label '2' is not in data.labels \(0, 1\)"):
        class_labels(config, [("x", "0")], [("z", "2")])
    with pytest.raises(SeqtasksError, match=r"train.tsv: expected at least two labels; found \['0'\]"):
        class_labels(TextClassificationDataConfig(path="train.tsv"), [("x", "0")], [])


@pytest.mark.slow
def test_eval_export_and_predict_commands(sentiment_run, tmp_path):
    from seqtasks.recipe import load_recipe
    from seqtasks.tasks import make_task

    root, run_dir, _ = sentiment_run.copy_to(tmp_path / "copy")  # eval writes into the run folder
    _, validation = make_task(load_recipe(run_dir / "recipe.yaml")).read_splits()
    data = tmp_path / "validation.tsv"
    header = (root / "reviews.tsv").read_text(encoding="utf-8").splitlines()[0]
    data.write_text(header + "\n" + "".join(f"{label}\t{text}\n" for text, label in validation), encoding="utf-8")
    recorded = json.loads((run_dir / "metrics.json").read_text())["validation"]

    def examples(folder):
        rows = [line.split("\t") for line in (folder / "predictions.tsv").read_text().splitlines()[:5]]
        # A blank line is an input too: its line is empty (no label).
        return [row[2] for row in rows] + ["", "   "], [row[0] for row in rows] + ["", ""]

    check_eval_export_predict(run_dir, data, examples, tmp_path / "exports", recorded)


@pytest.fixture(scope="module")
def ensemble_run(run_cache):
    """The sentiment recipe as an ensemble of two max-pooling members, three epochs."""
    return run_cache.get(SENTIMENT_ENSEMBLE)


@pytest.mark.slow
def test_an_ensemble_run_validates_evaluates_and_serves_its_mean_probabilities(ensemble_run):
    import keras

    from seqtasks.models.text_classifier import TextClassifierEnsemble

    root, run_dir, _ = ensemble_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["validation"]["accuracy"] > 0.7 and metrics["validation"]["macro_f1"] > 0.7
    # Training logs the mean probabilities' accuracy, as validation does.
    assert len(metrics["history"]["accuracy"]) == len(metrics["history"]["val_accuracy"]) == 3
    model = keras.models.load_model(run_dir / "model" / "model.keras", safe_mode=True, compile=False)
    assert isinstance(model, TextClassifierEnsemble) and model.members == 2
    assert model.member_models[0].pooling == "max" and metrics["parameters"] == model.count_params()
    rows = [line.split("\t") for line in (run_dir / "predictions.tsv").read_text().splitlines()[:8]]
    out = serve_in_tensorflow_only(
        root / "saved_models" / "tiny" / "1", {"validation": [row[2] for row in rows], "blank": [" "]}
    )
    assert out["validation"]["label"]["value"] == [row[0] for row in rows]
    probabilities = out["validation"]["probabilities"]
    assert probabilities["shape"] == [8, 2] and probabilities["dtype"] == "float32"
    assert np.allclose(np.sum(probabilities["value"], axis=1), 1.0, atol=1e-5)
    assert out["blank"]["label"]["value"] == [""] and out["blank"]["probabilities"]["value"] == [[0.5, 0.5]]


def test_recipe_ensemble_and_max_pooling_fields(tmp_path):
    from seqtasks.errors import SeqtasksError
    from seqtasks.recipe import load_recipe

    (tmp_path / "reviews.tsv").write_text("1\tgood\n0\tbad\n", encoding="utf-8")
    (tmp_path / "tiny.yaml").write_text(SENTIMENT_RECIPE)
    recipe = load_recipe(tmp_path / "tiny.yaml", ["model.ensemble=4", "model.pooling=max"])
    assert recipe.model.ensemble == 4 and recipe.model.pooling == "max"
    assert load_recipe(tmp_path / "tiny.yaml").model.ensemble == 1
    with pytest.raises(SeqtasksError, match=r"model\.ensemble.*expected at least 1; got 0"):
        load_recipe(tmp_path / "tiny.yaml", ["model.ensemble=0"])
    with pytest.raises(SeqtasksError, match=r"model\.ensemble.*at most 16; got 17"):
        load_recipe(tmp_path / "tiny.yaml", ["model.ensemble=17"])


@pytest.mark.slow
def test_the_export_returns_the_pooling_weights_and_its_label_names(sentiment_run, ensemble_run):
    import numpy as np

    import seqtasks
    from seqtasks.errors import SeqtasksError

    root, run_dir, _ = sentiment_run
    exported = seqtasks.load(root / "saved_models" / "tiny")
    assert exported.label_names() == ["negative", "positive"] == seqtasks.load(run_dir).label_names()
    texts = ["a truly wonderful film", "dull and far too long , sadly", ""]
    rows = exported.attention(texts)
    classified = exported.classify(texts)
    for row, result, text in zip(rows, classified, texts):
        assert row["label"] == result.label and np.allclose(row["probabilities"], result.probabilities)
        assert len(row["tokens"]) == len(row["attention"]) and (text == "") == (row["tokens"] == [])
    for row in rows[:2]:
        assert np.isclose(row["attention"].sum(), 1.0, atol=1e-5) and (row["attention"] > 0).all()
    # The same weights as the run folder's model computes.
    trained = seqtasks.load(run_dir).attention(texts[:2])
    assert all(np.allclose(a["attention"], b["attention"], atol=1e-5) for a, b in zip(rows, trained))
    # Max pooling has no weights to show.
    root, _, _ = ensemble_run
    with pytest.raises(SeqtasksError, match="this sentiment model has no attention weights to show"):
        seqtasks.load(root / "saved_models" / "tiny").attention(texts)


RECIPE = REPO / "recipes" / "sentiment-imdb.yaml"


def header_overrides():
    """The `KEY=VALUE`s of the `--set` flags in the recipe's leading comment."""
    header = []
    for line in RECIPE.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        header.append(line.lstrip("#"))
    words = shlex.split(" ".join(line for line in header if "--set" in line))
    assert words and words[::2] == ["--set"] * (len(words) // 2) and len(words) % 2 == 0, words
    return dict(word.split("=", 1) for word in words[1::2])


def acl_imdb_train(root):
    """A tiny aclImdb train/ folder: neg/ and pos/ reviews named <id>_<rating>.txt, and unlabelled unsup/ ones."""
    reviews = {
        "neg": {"0_3.txt": "Dull.<br /><br />Too long.", "1_1.txt": "Awful.", "2_4.txt": "Meh."},
        "pos": {"0_9.txt": "Bromwell High is a cartoon comedy.", "1_10.txt": "Loved it.", "2_8.txt": "Fine."},
        "unsup": {"0_0.txt": "No rating."},
    }
    for label, files in reviews.items():
        (root / label).mkdir(parents=True)
        for name, text in files.items():
            (root / label / name).write_text(text, encoding="utf-8")
    return root


def test_the_header_s_folder_settings_read_the_acl_imdb_layout(tmp_path):
    overrides = header_overrides()
    assert overrides["data.format"] == "folders" and overrides["data.path"].endswith("aclImdb/train")
    overrides["data.path"] = str(acl_imdb_train(tmp_path / "aclImdb" / "train"))
    overrides["data.validation_size"] = "2"
    recipe = load_recipe(RECIPE, [f"{key}={value}" for key, value in overrides.items()])
    train, validation = make_task(recipe).read_splits()
    assert len(train) == 4 and len(validation) == 2
    examples = train + validation
    assert sorted(label for _, label in examples) == ["neg"] * 3 + ["pos"] * 3
    assert ("Bromwell High is a cartoon comedy.", "pos") in examples
    assert all(text != "No rating." for text, _ in examples)
    # Each folder's label takes the recipe's name for it: neg/ is negative, pos/ positive.
    assert class_labels(recipe.data, train, validation) == (["neg", "pos"], ["negative", "positive"])


def test_the_recipe_s_own_labels_name_no_acl_imdb_folder(tmp_path):
    # Why the header sets data.labels: the CSV copy's labels 0 and 1 are not folder names of the archive.
    overrides = {**header_overrides(), "data.path": str(acl_imdb_train(tmp_path / "train"))}
    del overrides["data.labels"]
    recipe = load_recipe(RECIPE, [f"{key}={value}" for key, value in overrides.items()])
    assert recipe.data.labels == ["0", "1"]
    with pytest.raises(SeqtasksError, match=r"train/0: expected \.txt files of label '0'; found none$"):
        make_task(recipe).read_splits()
