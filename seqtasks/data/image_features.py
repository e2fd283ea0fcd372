"""Image feature grids from a frozen backbone, computed once per image and cached on disk.

Captioning trains on the grids, not the pixels, so the backbone runs once per
image set: the features go to `<cache_dir>/<key>.npy`, where the key hashes
the backbone file, the input size and the image list, and later runs load them.
"""

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np

from seqtasks.errors import SeqtasksError


def load_backbone(path):
    """A `.keras` image model (safe mode) whose output is a `(batch, H, W, C)` feature map."""
    import keras

    path = Path(path)
    if not path.is_file():
        raise SeqtasksError(f"{path}: no such model file")
    try:
        model = keras.saving.load_model(path, safe_mode=True, compile=False)
    except Exception as error:  # Keras raises many types for a file that is not a model
        raise SeqtasksError(f"{path}: cannot load a Keras model: {error}") from None
    shape = model.compute_output_shape((None,) + tuple(model.input_shape[1:]))
    if len(shape) != 4:
        raise SeqtasksError(f"{path}: expected an output feature map (batch, H, W, C); got {shape}")
    return model


def read_image(path, size):
    """Decodes a JPEG/PNG/GIF/BMP file to float32 RGB `(size, size, 3)` in 0..255."""
    import tensorflow as tf

    try:
        data = tf.io.read_file(str(path))
        image = tf.io.decode_image(data, channels=3, expand_animations=False)
    except tf.errors.NotFoundError:
        raise SeqtasksError(f"{path}: no such image file") from None
    except tf.errors.InvalidArgumentError:
        raise SeqtasksError(f"{path}: not a readable image (JPEG, PNG, GIF or BMP)") from None
    return tf.image.resize(tf.cast(image, tf.float32), (size, size))


def _cache_key(backbone_path, size, image_paths):
    digest = hashlib.sha256()
    with open(backbone_path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    digest.update(f"{size}\n".encode())
    for path in image_paths:
        digest.update(f"{Path(path).name}\n".encode())
    return digest.hexdigest()[:20]


def image_features(backbone_path, image_paths, cache_dir, batch_size=32, log=print):
    """Feature grids `(len(image_paths), H * W, C)` float16, from the cache when it has them."""
    import tensorflow as tf

    backbone = load_backbone(backbone_path)
    size = backbone.input.shape[1]
    cache = Path(cache_dir) / f"features-{_cache_key(backbone_path, size, image_paths)}.npy"
    if cache.exists():
        return np.load(cache, mmap_mode="r")
    batches = []
    for start in range(0, len(image_paths), batch_size):
        images = tf.stack([read_image(path, size) for path in image_paths[start : start + batch_size]])
        grid = backbone(images, training=False)
        batches.append(np.asarray(tf.reshape(grid, (grid.shape[0], -1, grid.shape[-1])), np.float16))
        log(f"Image features: {min(start + batch_size, len(image_paths))}/{len(image_paths)}")
    features = np.concatenate(batches) if batches else np.zeros((0, 0, 0), np.float16)
    cache.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=cache.parent, suffix=".npy.tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            np.save(handle, features)
        os.replace(temporary, cache)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return features
