import base64
import hashlib
import json
import marshal
import re
import shutil
import tempfile
import zipfile
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from seqtasks.data.image_features import (
    FrozenBackbone,
    _application_preprocessing,
    image_features,
    load_backbone,
    read_image,
)
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


def test_mirrored_features_are_those_of_the_flipped_images_and_are_cached_apart(backbone_file, images, tmp_path):
    backbone = FrozenBackbone.from_file(backbone_file)
    messages = []
    plain = image_features(backbone, images, tmp_path / "cache", log=messages.append)
    mirrored = image_features(backbone, images, tmp_path / "cache", log=messages.append, mirror=True)
    (cache,) = (tmp_path / "cache").glob("features-mirrored-*.npy")
    assert messages[1] == f"Image features: 3 mirrored computed, cached in {cache}"
    # The same 20-digit key as the images' own grids, so a cache of those made before is still found.
    assert {path.name for path in (tmp_path / "cache").glob("*.npy")} == {cache.name, cache.name.replace("-mirrored", "")}
    # Brute force: write each image flipped (PNG, lossless) and compute its grid without mirroring.
    flipped = []
    for path in images:
        pixels = tf.io.decode_image(path.read_bytes(), channels=3).numpy()[:, ::-1]
        flipped.append(tmp_path / f"flipped_{path.stem}.png")
        flipped[-1].write_bytes(tf.io.encode_png(pixels).numpy())
    expected = image_features(backbone, flipped, tmp_path / "other", log=lambda _: None)
    np.testing.assert_allclose(mirrored.astype("float32"), expected.astype("float32"), rtol=1e-2, atol=1e-2)
    assert not np.allclose(mirrored.astype("float32"), plain.astype("float32"), atol=1e-2)
    again = image_features(backbone, images, tmp_path / "cache", log=messages.append, mirror=True)
    np.testing.assert_array_equal(again, mirrored)
    assert messages[-1] == f"Image features: 3 from the cache {cache}"


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
    keras.Sequential([keras.Input((8, 8, 3)), keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(2)]).save(flat)
    with pytest.raises(SeqtasksError, match=r"flat.keras: expected an output feature map \(batch, H, W, C\)"):
        load_backbone(flat)


@pytest.mark.slow  # full-size Keras Applications backbones: not a tiny model
def test_keras_applications_backbones_give_grids_with_their_own_preprocessing(images, tmp_path):
    backbone = FrozenBackbone.from_application("MobileNetV2", "none", 64)
    assert backbone.identity == "application:MobileNetV2:none"
    pixels = np.full((1, 64, 64, 3), 255.0, "float32")
    expected = backbone.model(keras.applications.mobilenet_v2.preprocess_input(pixels.copy()), training=False)
    np.testing.assert_allclose(np.asarray(backbone(pixels)), np.asarray(expected).reshape(1, 4, 1280), rtol=1e-5)
    assert image_features(backbone, images[:1], tmp_path / "cache", log=lambda _: None).shape == (1, 4, 1280)
    with pytest.raises(SeqtasksError, match=r"expected a keras.applications model \(.*ResNet50.*\); got 'ResNet5'"):
        FrozenBackbone.from_application("ResNet5", "none", 64)


def _doubling_backbone():
    """11 layers: input `pixels` (4, 4, 3), `double_1` ... `double_9` (each x2), then `pool` (2x2 average)."""
    inputs = keras.Input((4, 4, 3), name="pixels")
    maps = inputs
    for k in range(1, 10):
        maps = keras.layers.Rescaling(2.0, name=f"double_{k}")(maps)
    model = keras.Model(inputs, keras.layers.AveragePooling2D(2, name="pool")(maps), name="doubling")
    return FrozenBackbone(model, 4, "file:abc", preprocess=lambda images: images + 1.0)


def _pooled(maps):
    """2x2 average pooling of `(batch, 4, 4, C)` maps, by hand."""
    return maps.reshape(maps.shape[0], 2, 2, 2, 2, maps.shape[-1]).mean(axis=(2, 4))


@pytest.mark.parametrize("layer_name, factor", [("double_9", 2.0**9), ("double_1", 2.0)])
def test_split_gives_the_frozen_maps_up_to_the_layer_and_the_head_after_it(layer_name, factor):
    backbone = _doubling_backbone()
    frozen, head = backbone.split(layer_name)
    assert (frozen.size, frozen.identity, frozen.preprocess) == (4, f"file:abc:{layer_name}", backbone.preprocess)
    assert not frozen.flatten
    assert (frozen.model.name, head.name) == ("frozen_backbone", "backbone_head")
    images = np.arange(48, dtype="float32").reshape(1, 4, 4, 3)
    maps = np.asarray(frozen(images))
    np.testing.assert_allclose(maps, (images + 1.0) * factor)  # preprocessed, then the layers up to layer_name
    np.testing.assert_allclose(np.asarray(head(maps)), _pooled((images + 1.0) * 2.0**9))
    np.testing.assert_allclose(np.asarray(backbone(images)), _pooled((images + 1.0) * 2.0**9).reshape(1, 4, 3))


@pytest.mark.parametrize("layer_name", ["pool", "nothing"])
def test_split_at_the_last_layer_or_no_layer_is_an_error_suggesting_one(layer_name):
    with pytest.raises(SeqtasksError) as error:
        _doubling_backbone().split(layer_name)
    assert str(error.value) == (
        "model.backbone.fine_tune_from: expected a layer of the backbone before its last one, "
        f"e.g. 'double_9'; got {layer_name!r}"
    )


def _flattening_backbone():
    inputs = keras.Input((4, 4, 3), name="pixels")
    flat = keras.layers.Flatten(name="flat")(inputs)
    return FrozenBackbone(keras.Model(inputs, keras.layers.Reshape((4, 4, 3), name="unflat")(flat)), 4, "x")


def test_split_at_a_layer_without_a_feature_map_is_an_error():
    with pytest.raises(SeqtasksError) as error:
        _flattening_backbone().split("flat")
    assert str(error.value) == (
        "model.backbone.fine_tune_from: 'flat' gives (None, 48); expected a feature map (batch, H, W, C)"
    )


def test_the_layer_an_error_suggests_can_be_split_at():
    backbone = _flattening_backbone()  # 3 layers
    with pytest.raises(SeqtasksError) as error:
        backbone.split("unflat")
    suggested = str(error.value).split("e.g. ")[1].split(";")[0].strip("'")
    backbone.split(suggested)


# One RGB pixel (0, 128, 255) after each kind of keras.applications preprocessing, worked out by hand.
_TF_MODE = [-1.0, 128 / 127.5 - 1, 1.0]  # x / 127.5 - 1
_CAFFE_MODE = [255 - 103.939, 128 - 116.779, 0 - 123.68]  # BGR, less the ImageNet means
_TORCH_MODE = [(0 - 0.485) / 0.229, (128 / 255 - 0.456) / 0.224, (1 - 0.406) / 0.225]  # 0..1, standardised


@pytest.mark.parametrize(
    "name, expected",
    [
        ("ResNet50V2", _TF_MODE),
        ("ResNet152V2", _TF_MODE),
        ("ResNet50", _CAFFE_MODE),
        ("ResNet101", _CAFFE_MODE),
        ("VGG16", _CAFFE_MODE),
        ("MobileNetV2", _TF_MODE),
        ("MobileNet", _TF_MODE),
        ("InceptionResNetV2", _TF_MODE),
        ("DenseNet121", _TORCH_MODE),
        ("EfficientNetB0", None),
        ("EfficientNetV2B0", None),
        ("ConvNeXtTiny", None),
        ("MobileNetV3Small", None),
    ],
)
def test_applications_get_the_preprocessing_of_their_family(name, expected):
    preprocess = _application_preprocessing(name)
    if expected is None:
        assert preprocess is None  # the model takes 0..255 pixels itself
    else:
        pixel = np.array([[[[0.0, 128.0, 255.0]]]], "float32")
        np.testing.assert_allclose(np.asarray(preprocess(pixel)).reshape(3), expected, rtol=1e-5, atol=1e-5)


def test_a_backbone_file_is_named_by_its_content_and_loads_uncompiled(backbone_file, tmp_path):
    backbone = FrozenBackbone.from_file(backbone_file)
    assert backbone.identity == "file:" + hashlib.sha256(backbone_file.read_bytes()).hexdigest()
    assert backbone.size == 32 and backbone.preprocess is None and backbone.flatten
    compiled = tmp_path / "compiled.keras"
    model = load_backbone(backbone_file)
    model.compile(optimizer="sgd", loss="mse")
    model.save(compiled)
    assert not load_backbone(compiled).compiled  # the backbone is only run, never trained as saved


def _double(x):
    return x * 2


def test_a_backbone_file_holding_python_code_is_refused(tmp_path):
    # A .keras archive whose model is a Python function: loading it would run code from the file.
    path = tmp_path / "code.keras"
    code = base64.b64encode(marshal.dumps(_double.__code__)).decode("ascii")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", json.dumps({"class_name": "__lambda__", "config": {"value": [code, None, None]}}))
        archive.writestr("metadata.json", json.dumps({"keras_version": keras.__version__}))
    with pytest.raises(SeqtasksError) as error:
        load_backbone(path)
    assert str(error.value).startswith(f"{path}: cannot load a Keras model: Requested the deserialization of a Python lambda")


@pytest.mark.slow  # a full-size Keras Applications backbone: not a tiny model
def test_an_application_backbone_loads_its_weights_file_and_takes_the_given_size(tmp_path):
    weights = tmp_path / "mobilenet.weights.h5"
    reference = keras.applications.MobileNetV2(include_top=False, weights=None, input_shape=(32, 32, 3))
    reference.save_weights(weights)
    backbone = FrozenBackbone.from_application("MobileNetV2", str(weights), 32)
    assert backbone.identity == f"application:MobileNetV2:{weights}"
    assert (backbone.model.input_shape, backbone.model.output_shape) == ((None, 32, 32, 3), (None, 1, 1, 1280))
    for expected, loaded in zip(reference.get_weights(), backbone.model.get_weights(), strict=True):
        np.testing.assert_array_equal(loaded, expected)


def test_application_backbones_that_cannot_be_made_are_named(tmp_path):
    with pytest.raises(SeqtasksError) as error:
        FrozenBackbone.from_application("ResNet5", "none", 64)
    prefix, listed = str(error.value).split(" (", 1)
    assert prefix == "model.backbone.name: expected a keras.applications model"
    names, got = listed.split("); ")
    assert got == "got 'ResNet5'"
    assert {"MobileNetV2", "ResNet50", "EfficientNetB0"} <= set(names.split(", ")) and names.split(", ") == sorted(names.split(", "))
    with pytest.raises(SeqtasksError) as error:
        FrozenBackbone.from_application("MobileNetV2", "none", 8)
    assert str(error.value) == (
        "model.backbone: MobileNetV2 cannot be built: Input size must be at least 32x32; Received: input_shape=(8, 8, 3)"
    )
    garbage = tmp_path / "garbage.weights.h5"
    garbage.write_bytes(b"not weights")
    with pytest.raises(SeqtasksError) as error:
        FrozenBackbone.from_application("MobileNetV2", str(garbage), 32)
    assert str(error.value).startswith(f"model.backbone: MobileNetV2 weights '{garbage}' unavailable: ")


@pytest.mark.parametrize("input_shape", [(16, 24, 3), (None, None, 3), (16, 16, 1)])
def test_a_backbone_file_without_a_fixed_square_input_is_refused_naming_the_file(tmp_path, images, input_shape):
    inputs = keras.Input(input_shape)
    path = tmp_path / "odd.keras"
    keras.Model(inputs, keras.layers.Conv2D(2, 3, strides=8, padding="same")(inputs)).save(path)
    with pytest.raises(SeqtasksError, match=r"odd.keras: expected a model of square RGB images \(size, size, 3\)"):
        image_features(FrozenBackbone.from_file(path), images[:1], tmp_path / "cache", log=lambda _: None)


class _Calls(keras.layers.Layer):
    """Calls `function` on its input: a Keras call context for code inside a layer."""

    def __init__(self, function):
        super().__init__()
        self.function = function

    def call(self, inputs):
        return self.function(inputs)


def test_a_frozen_backbone_runs_in_inference_mode_even_inside_a_training_call():
    inputs = keras.Input((4, 4, 3), name="pixels")
    backbone = FrozenBackbone(keras.Model(inputs, keras.layers.Dropout(0.5, name="dropout")(inputs)), 4, "x", flatten=False)
    images = np.arange(1, 49, dtype="float32").reshape(1, 4, 4, 3)
    np.testing.assert_array_equal(np.asarray(_Calls(backbone)(images, training=True)), images)


def test_grids_of_a_non_square_feature_map_flatten_row_by_row():
    inputs = keras.Input((4, 4, 3), name="pixels")
    maps = keras.layers.AveragePooling2D((1, 2), name="halve_width")(inputs)  # (4, 2, 3)
    backbone = FrozenBackbone(keras.Model(inputs, maps), 4, "x")
    images = np.arange(48, dtype="float32").reshape(1, 4, 4, 3)
    expected = images.reshape(1, 4, 2, 2, 3).mean(axis=3).reshape(1, 8, 3)
    np.testing.assert_allclose(np.asarray(backbone(images)), expected)


def test_the_cache_is_named_by_a_20_digit_key_of_the_image_names_not_their_folder(backbone_file, images, tmp_path):
    backbone = FrozenBackbone.from_file(backbone_file)
    messages = []
    features = image_features(backbone, images, tmp_path / "cache", log=messages.append)
    (cache,) = (tmp_path / "cache").glob("*")
    assert re.fullmatch(r"features-[0-9a-f]{20}\.npy", cache.name)
    moved = tmp_path / "moved"
    moved.mkdir()
    copies = [Path(shutil.copy(path, moved)) for path in images]
    np.testing.assert_array_equal(image_features(backbone, copies, tmp_path / "cache", log=messages.append), features)
    assert messages[-1] == f"Image features: 3 from the cache {cache}"


def test_no_images_give_an_empty_float16_array_of_the_grid_shape(backbone_file, images, tmp_path):
    backbone = FrozenBackbone.from_file(backbone_file)
    one = image_features(backbone, images[:1], tmp_path / "cache", log=lambda _: None)
    features = image_features(backbone, [], tmp_path / "cache", log=lambda _: None)
    assert features.shape == (0,) + one.shape[1:] and features.dtype == np.float16


def test_a_missing_or_unreadable_image_among_good_ones_is_named(backbone_file, images, tmp_path):
    backbone = FrozenBackbone.from_file(backbone_file)
    with pytest.raises(SeqtasksError) as error:
        image_features(backbone, [images[0], tmp_path / "absent.jpg"], tmp_path / "cache")
    assert str(error.value) == f"{tmp_path / 'absent.jpg'}: no such image file"
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG not really")
    with pytest.raises(SeqtasksError) as error:
        image_features(backbone, [images[0], images[1], broken], tmp_path / "cache", batch_size=4)
    assert str(error.value) == f"{broken}: not a readable image (JPEG, PNG, GIF or BMP)"


def test_the_progress_bar_counts_the_images(backbone_file, images, tmp_path, monkeypatch):
    import seqtasks.utils.progress

    bars = []
    real = seqtasks.utils.progress.progress_bar
    monkeypatch.setattr(seqtasks.utils.progress, "progress_bar", lambda length, label: bars.append((length, label)) or real(length, label))
    image_features(FrozenBackbone.from_file(backbone_file), images, tmp_path / "cache", log=lambda _: None)
    assert bars == [(3, "Image features")]


# A 4 x 6 GIF of one colour (200, 200, 200): GIFs decode as animations unless asked for one frame.
_GIF = (
    b"GIF87a\x04\x00\x06\x00\x81\x00\x00\xc8\xc8\xc8\x00\x00\x00\x00\x00\x00\x00\x00\x00,\x00\x00\x00\x00\x04\x00"
    b"\x06\x00\x00\x08\x0b\x00\x01\x08\x1cH\xb0\xa0\xc1\x81\x01\x01\x00;"
)


def test_gif_and_grayscale_images_become_rgb_of_the_backbone_size(tmp_path):
    gif = tmp_path / "one.gif"
    gif.write_bytes(_GIF)
    np.testing.assert_array_equal(np.asarray(read_image(gif, 8)), np.full((8, 8, 3), 200.0, "float32"))
    gray = tmp_path / "gray.png"
    gray.write_bytes(tf.io.encode_png(np.full((5, 7, 1), 90, np.uint8)).numpy())
    np.testing.assert_array_equal(np.asarray(read_image(gray, 8)), np.full((8, 8, 3), 90.0, "float32"))


def test_the_cache_is_written_in_a_new_nested_folder_whatever_the_system_temporary_folder(
    backbone_file, images, tmp_path, monkeypatch
):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no_such_folder"))
    cache_dir = tmp_path / "runs" / "one" / "cache"
    image_features(FrozenBackbone.from_file(backbone_file), images, cache_dir, log=lambda _: None)
    assert [path.suffix for path in cache_dir.iterdir()] == [".npy"]


def test_a_failed_cache_write_leaves_no_file_and_keeps_its_error(backbone_file, images, tmp_path, monkeypatch):
    def disk_full(handle, array):
        handle.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "save", disk_full)
    with pytest.raises(OSError, match="No space left on device"):
        image_features(FrozenBackbone.from_file(backbone_file), images, tmp_path / "cache", log=lambda _: None)
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_backbone_path_that_is_not_a_regular_model_file_is_named(tmp_path):
    with pytest.raises(SeqtasksError) as error:
        load_backbone(tmp_path)
    assert str(error.value) == f"{tmp_path}: is a folder, expected a .keras model file"
    (tmp_path / "zero.keras").symlink_to("/dev/zero")
    for path in (Path("/dev/zero"), tmp_path / "zero.keras"):
        with pytest.raises(SeqtasksError) as error:
            load_backbone(path)
        assert str(error.value) == f"{path}: not a regular file"


def test_the_suggested_layer_is_about_a_tenth_of_the_layers_from_the_end():
    inputs = keras.Input((4, 4, 3), name="pixels")
    maps = inputs
    for k in range(1, 19):
        maps = keras.layers.Rescaling(2.0, name=f"double_{k}")(maps)
    model = keras.Model(inputs, keras.layers.AveragePooling2D(2, name="pool")(maps))  # 20 layers
    with pytest.raises(SeqtasksError, match=r"e\.g\. 'double_17'; got 'pool'"):
        FrozenBackbone(model, 4, "x").split("pool")


def test_a_backbone_file_over_the_size_limit_or_unreadable_is_named(tmp_path, monkeypatch):
    from seqtasks.data import image_features

    path = tmp_path / "big.keras"
    path.write_bytes(b"x" * 11)
    monkeypatch.setattr(image_features, "MAX_BACKBONE_BYTES", 10)
    with pytest.raises(SeqtasksError) as error:
        load_backbone(path)
    assert str(error.value) == f"{path}: 11 bytes, more than the 10 bytes a backbone model file may have"

    def refuse(*args):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(image_features, "open_regular_file", refuse)
    with pytest.raises(SeqtasksError) as error:
        load_backbone(path)
    assert str(error.value) == f"{path}: cannot read: Permission denied"
