"""The captioning task's data: the splits of its caption files, bad data settings, its mirrored inputs."""

import json

import numpy as np
import pytest

from seqtasks.errors import RecipeError, SeqtasksError
from seqtasks.recipe import load_recipe
from seqtasks.tasks.captioning.data import load_splits
from tests.conftest import REPO


SHAPES = REPO / "recipes" / "data" / "shapes"


def test_with_mirrored_inputs_each_caption_reads_its_image_or_its_mirror_drawn_anew_each_epoch():
    from seqtasks.tasks.captioning.data import make_dataset

    inputs = np.arange(5, dtype="float32")[:, None, None] * np.ones((5, 2, 1), "float32")
    mirrored = -inputs - 100.0
    examples = [(index % 5, [4 + index]) for index in range(60)]  # caption 4 + i belongs to image i % 5
    dataset = make_dataset(inputs, examples, 8, shuffle_seed=3, mirrored=mirrored)
    epochs = []
    for _ in range(2):
        drawn = {}
        for (grids, _), caption_out in dataset:
            for grid, row in zip(grids.numpy(), caption_out.numpy()):
                value = grid[0, 0]
                assert np.all(grid == value)
                image = value if value >= 0 else -value - 100.0
                assert image == (row[0] - 4) % 5
                drawn[int(row[0])] = bool(value < 0)
        assert len(drawn) == 60 and 15 < sum(drawn.values()) < 45  # about half mirrored
        epochs.append(drawn)
    assert epochs[0] != epochs[1]
    plain = make_dataset(inputs, examples, 8, shuffle_seed=3)
    assert all((grids.numpy() >= 0).all() for (grids, _), _ in plain)


def _recipe(tmp_path, data):
    lines = "\n".join(f"  {key}: {value}" for key, value in data.items())
    (tmp_path / "r.yaml").write_text(f"task: captioning\ndata:\n{lines}\n")
    return tmp_path / "r.yaml"


def test_bad_data_settings_are_named(tmp_path):
    base = {"captions": str(SHAPES / "shapes.token.txt"), "images": str(SHAPES / "images")}
    with pytest.raises(RecipeError, match=r"r.yaml: data.train_split: required for the 'flickr' format"):
        load_recipe(_recipe(tmp_path, base))
    (tmp_path / "train.txt").write_text("train_000.png\nmissing.png\n")
    (tmp_path / "token.txt").write_text(
        "train_000.png#0\ta red circle\nmissing.png#0\ta dog\ndev_000.png#0\ta square\n"
    )
    (tmp_path / "dev.txt").write_text("dev_000.png\n")
    recipe = load_recipe(
        _recipe(tmp_path, dict(base, captions="token.txt", train_split="train.txt", validation_split="dev.txt"))
    )
    with pytest.raises(SeqtasksError, match=r"images: 1 image file\(s\) the captions name are missing, e.g. 'missing.png'"):
        load_splits(recipe.data)
    (tmp_path / "dev.txt").write_text("train_000.png\n")
    with pytest.raises(SeqtasksError, match=r"1 image\(s\) are in both the training and validation splits"):
        load_splits(recipe.data)


def test_coco_captions_json_splits(tmp_path):
    import shutil

    (tmp_path / "images").mkdir()
    for name in ("train_000.png", "train_001.png", "dev_000.png"):
        shutil.copy(SHAPES / "images" / name, tmp_path / "images" / name)

    def coco(path, names):
        images = [{"id": index, "file_name": name} for index, name in enumerate(names)]
        annotations = [{"image_id": index, "caption": f"shape {index}"} for index in range(len(names))]
        path.write_text(json.dumps({"images": images, "annotations": annotations}))

    coco(tmp_path / "train.json", ["train_000.png", "train_001.png"])
    coco(tmp_path / "val.json", ["dev_000.png"])
    recipe = load_recipe(
        _recipe(
            tmp_path,
            {"format": "coco", "captions": "train.json", "validation_captions": "val.json", "images": "images"},
        )
    )
    train, validation = load_splits(recipe.data)
    assert train == {"train_000.png": ["shape 0"], "train_001.png": ["shape 1"]}
    assert validation == {"dev_000.png": ["shape 0"]}
