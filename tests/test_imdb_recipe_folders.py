"""recipes/sentiment-imdb.yaml's header tells how to read the aclImdb archive's folders: its `--set` line does."""

import shlex

import pytest

from conftest import REPO
from seqtasks.errors import SeqtasksError
from seqtasks.recipe import load_recipe
from seqtasks.tasks import make_task
from seqtasks.tasks.sentiment.task import class_labels

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
