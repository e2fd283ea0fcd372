import keras
import numpy as np
import pytest
import tensorflow as tf

from seqtasks.data.image_features import FrozenBackbone, image_features, load_backbone, read_image
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
    backbone = FrozenBackbone.from_file(backbone_file)
    features = image_features(backbone, images, tmp_path / "cache", batch_size=2, log=messages.append)
    assert features.shape == (3, 16, 4) and features.dtype == np.float16
    (cache,) = (tmp_path / "cache").glob("*.npy")
    assert messages == [f"Image features: 3 computed, cached in {cache}"]
    model = load_backbone(backbone_file)
    alone = model(tf.expand_dims(read_image(images[1], 32), 0), training=False).numpy().reshape(16, 4)
    np.testing.assert_allclose(features[1], alone, rtol=1e-2, atol=1e-3)  # float16 storage

    again = image_features(backbone, images, tmp_path / "cache", log=messages.append)
    assert len(messages) == 2 and messages[1] == f"Image features: 3 from the cache {cache}"
    np.testing.assert_array_equal(again, features)
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 1
    image_features(backbone, images[:2], tmp_path / "cache", log=messages.append)
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 2  # another image list, another cache file


def test_bad_images_and_models_are_named(backbone_file, tmp_path):
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8 not really a jpeg")
    with pytest.raises(SeqtasksError, match=r"broken.jpg: not a readable image \(JPEG, PNG, GIF or BMP\)"):
        image_features(FrozenBackbone.from_file(backbone_file), [broken], tmp_path / "cache")
    with pytest.raises(SeqtasksError, match=r"absent.jpg: no such image file"):
        read_image(tmp_path / "absent.jpg", 32)
    with pytest.raises(SeqtasksError, match=r"absent.keras: no such model file"):
        load_backbone(tmp_path / "absent.keras")
    flat = tmp_path / "flat.keras"
    keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)]).save(flat)
    with pytest.raises(SeqtasksError, match=r"flat.keras: expected an output feature map \(batch, H, W, C\)"):
        load_backbone(flat)


def test_keras_applications_backbones_give_grids_with_their_own_preprocessing(images, tmp_path):
    backbone = FrozenBackbone.from_application("MobileNetV2", "none", 64)
    assert backbone.identity == "application:MobileNetV2:none"
    pixels = np.full((1, 64, 64, 3), 255.0, "float32")
    expected = backbone.model(keras.applications.mobilenet_v2.preprocess_input(pixels.copy()), training=False)
    np.testing.assert_allclose(np.asarray(backbone(pixels)), np.asarray(expected).reshape(1, 4, 1280), rtol=1e-5)
    assert image_features(backbone, images[:1], tmp_path / "cache", log=lambda _: None).shape == (1, 4, 1280)
    with pytest.raises(SeqtasksError, match=r"expected a keras.applications model \(.*ResNet50.*\); got 'ResNet5'"):
        FrozenBackbone.from_application("ResNet5", "none", 64)
