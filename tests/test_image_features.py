import keras
import numpy as np
import pytest
import tensorflow as tf

from seqtasks.data.image_features import image_features, load_backbone, read_image
from seqtasks.errors import SeqtasksError


@pytest.fixture
def backbone_file(tmp_path):
    inputs = keras.Input((32, 32, 3))
    grid = keras.layers.Conv2D(4, 3, strides=8, padding="same", name="grid")(inputs / 255.0)
    path = tmp_path / "tiny_backbone.keras"
    keras.Model(inputs, grid).save(path)
    return path


@pytest.fixture
def images(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for index, encode in enumerate([tf.io.encode_jpeg, tf.io.encode_png, tf.io.encode_jpeg]):
        pixels = rng.integers(0, 256, size=(40 + 10 * index, 30, 3), dtype=np.uint8)
        path = tmp_path / f"image_{index}.{'png' if encode is tf.io.encode_png else 'jpg'}"
        path.write_bytes(encode(pixels).numpy())
        paths.append(path)
    return paths


def test_features_are_grids_per_image_and_come_from_the_cache_the_second_time(backbone_file, images, tmp_path):
    messages = []
    features = image_features(backbone_file, images, tmp_path / "cache", batch_size=2, log=messages.append)
    assert features.shape == (3, 16, 4) and features.dtype == np.float16
    assert messages == ["Image features: 2/3", "Image features: 3/3"]
    model = load_backbone(backbone_file)
    alone = model(tf.expand_dims(read_image(images[1], 32), 0), training=False).numpy().reshape(16, 4)
    np.testing.assert_allclose(features[1], alone, rtol=1e-2, atol=1e-3)  # float16 storage

    again = image_features(backbone_file, images, tmp_path / "cache", log=messages.append)
    assert len(messages) == 2  # nothing recomputed
    np.testing.assert_array_equal(again, features)
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 1
    image_features(backbone_file, images[:2], tmp_path / "cache", log=messages.append)
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 2  # another image list, another cache file


def test_bad_images_and_models_are_named(backbone_file, tmp_path):
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8 not really a jpeg")
    with pytest.raises(SeqtasksError, match=r"broken.jpg: not a readable image \(JPEG, PNG, GIF or BMP\)"):
        image_features(backbone_file, [broken], tmp_path / "cache")
    with pytest.raises(SeqtasksError, match=r"absent.jpg: no such image file"):
        read_image(tmp_path / "absent.jpg", 32)
    with pytest.raises(SeqtasksError, match=r"absent.keras: no such model file"):
        load_backbone(tmp_path / "absent.keras")
    flat = tmp_path / "flat.keras"
    keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)]).save(flat)
    with pytest.raises(SeqtasksError, match=r"flat.keras: expected an output feature map \(batch, H, W, C\)"):
        load_backbone(flat)
