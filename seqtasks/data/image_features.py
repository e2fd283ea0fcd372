"""Image feature grids from a frozen backbone, computed once per image and cached on disk.

Captioning trains on the grids, not the pixels, so the backbone runs once per
image set: the features go to `<cache_dir>/<key>.npy`, where the key hashes
the backbone (its file or its name and weights), the input size and the image
list, and later runs load them.
"""

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np

from seqtasks.errors import SeqtasksError
from seqtasks.utils.regular_files import open_regular_file, reading_errors

MAX_BACKBONE_BYTES = 4 * 1024**3


def load_backbone(path):
    """A `.keras` image model (safe mode) whose output is a `(batch, H, W, C)` feature map."""
    import keras

    path = Path(path)
    with reading_errors(path, "model file", "a .keras model file"):
        with open_regular_file(path, MAX_BACKBONE_BYTES, "a backbone model file"):
            pass  # a device never ends and a FIFO never starts: refused before Keras reads them
    try:
        model = keras.saving.load_model(path, safe_mode=True, compile=False)
    except Exception as error:  # Keras raises many types for a file that is not a model
        raise SeqtasksError(f"{path}: cannot load a Keras model: {error}") from None
    inputs = tuple(model.input_shape[1:])
    if len(inputs) != 3 or inputs[2] != 3 or not isinstance(inputs[0], int) or inputs[0] != inputs[1]:
        raise SeqtasksError(f"{path}: expected a model of square RGB images (size, size, 3); its input is {inputs}")
    shape = model.compute_output_shape((None,) + tuple(model.input_shape[1:]))
    if len(shape) != 4:
        raise SeqtasksError(f"{path}: expected an output feature map (batch, H, W, C); got {shape}")
    return model


def read_image(path, size):
    """Decodes a JPEG/PNG/GIF/BMP file to float32 RGB `(size, size, 3)` in 0..255."""
    import tensorflow as tf

    try:
        return _decode(tf.io.read_file(str(path)), size)
    except tf.errors.NotFoundError:
        raise SeqtasksError(f"{path}: no such image file") from None
    except tf.errors.InvalidArgumentError:
        raise SeqtasksError(f"{path}: not a readable image (JPEG, PNG, GIF or BMP)") from None


# keras.applications models whose preprocessing is not inside the model: the module holding it.
# (EfficientNet, ConvNeXt and MobileNetV3 take 0..255 pixels themselves.)
_PREPROCESSING_MODULES = {
    "ResNet": "resnet", "VGG16": "vgg16", "VGG19": "vgg19", "InceptionV3": "inception_v3",
    "InceptionResNetV2": "inception_resnet_v2", "Xception": "xception", "MobileNetV2": "mobilenet_v2",
    "MobileNet": "mobilenet", "DenseNet": "densenet", "NASNet": "nasnet",
}


def _application_preprocessing(name):
    import keras

    if name.startswith("ResNet") and name.endswith("V2"):
        return keras.applications.resnet_v2.preprocess_input
    for prefix, module in _PREPROCESSING_MODULES.items():
        if name.startswith(prefix) and not name.startswith("MobileNetV3"):
            return getattr(keras.applications, module).preprocess_input
    return None


class FrozenBackbone:
    """A frozen image model: `(batch, size, size, 3)` RGB in 0..255 -> grids `(batch, H * W, C)`.

    `identity` names the model and its weights for the feature cache's key.
    """

    def __init__(self, model, size, identity, preprocess=None, flatten=True):
        self.model = model
        self.size = size
        self.identity = identity
        self.preprocess = preprocess
        self.flatten = flatten

    def split(self, layer_name):
        """`(frozen, head)`: this backbone up to the layer `layer_name`, giving unflattened maps, and the rest.

        The head is a Keras model from that layer's output to the backbone's
        output, to be trained with a captioner (fine-tuning its last stages).
        """
        import keras

        names = [layer.name for layer in self.model.layers]
        if layer_name not in names or layer_name == names[-1]:
            raise SeqtasksError(
                f"model.backbone.fine_tune_from: expected a layer of the backbone before its last one, "
                f"e.g. {_split_suggestion(self.model)!r}; got {layer_name!r}"
            )
        middle = self.model.get_layer(layer_name).output
        if len(middle.shape) != 4:
            raise SeqtasksError(
                f"model.backbone.fine_tune_from: {layer_name!r} gives {middle.shape}; expected a feature map (batch, H, W, C)"
            )
        frozen = keras.Model(self.model.input, middle, name="frozen_backbone")
        head = keras.Model(middle, self.model.output, name="backbone_head")
        return (
            FrozenBackbone(frozen, self.size, f"{self.identity}:{layer_name}", self.preprocess, flatten=False),
            head,
        )

    @classmethod
    def from_file(cls, path):
        model = load_backbone(path)
        digest = hashlib.sha256()
        with open(path, "rb") as handle:  # load_backbone refused anything but a regular file within the limit
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return cls(model, model.input.shape[1], f"file:{digest.hexdigest()}")

    @classmethod
    def from_application(cls, name, weights, size):
        """A `keras.applications` model without its classifier; ImageNet weights come from Keras' cache or download."""
        import keras

        names = sorted(n for n in dir(keras.applications) if n[:1].isupper())
        if name not in names:
            raise SeqtasksError(f"model.backbone.name: expected a keras.applications model ({', '.join(names)}); got {name!r}")
        try:
            model = getattr(keras.applications, name)(
                include_top=False, weights=None if weights == "none" else weights, input_shape=(size, size, 3)
            )
        except ValueError as error:
            raise SeqtasksError(f"model.backbone: {name} cannot be built: {error}") from None
        except Exception as error:  # a failed weights download raises several types
            raise SeqtasksError(f"model.backbone: {name} weights {weights!r} unavailable: {error}") from None
        return cls(model, size, f"application:{name}:{weights}", _application_preprocessing(name))

    def __call__(self, images):
        """Grids `(batch, H * W, C)` (maps `(batch, H, W, C)` unless `flatten`) of images `(batch, size, size, 3)` in 0..255."""
        from keras import ops

        if self.preprocess is not None:
            images = self.preprocess(images)
        grid = self.model(images, training=False)
        if not self.flatten:
            return grid
        shape = ops.shape(grid)
        return ops.reshape(grid, (shape[0], shape[1] * shape[2], shape[3]))


def _split_suggestion(model):
    """A layer `split` accepts, about a tenth of the layers from the end: one giving a feature map, not the last."""
    import keras

    # The input layer of an image model gives a map: one is always there, if nothing else is.
    maps = [layer for layer in model.layers[:-1] if len(layer.output.shape) == 4]
    inner = [layer.name for layer in maps if not isinstance(layer, keras.layers.InputLayer)] or [layer.name for layer in maps]
    return inner[-max(1, len(model.layers) // 10)]


def _decode(data, size):
    import tensorflow as tf

    image = tf.io.decode_image(data, channels=3, expand_animations=False)
    return tf.image.resize(tf.cast(image, tf.float32), (size, size))


def _cache_key(backbone, image_paths):
    digest = hashlib.sha256()
    digest.update(f"{backbone.identity}\n{backbone.size}\n".encode())
    for path in image_paths:
        digest.update(f"{Path(path).name}\n".encode())
    return digest.hexdigest()[:20]


def image_features(backbone, image_paths, cache_dir, batch_size=32, log=print, mirror=False):
    """Feature grids `(len(image_paths), H * W, C)` float16 of a `FrozenBackbone` (maps `(N, H, W, C)`
    unless it flattens), from the cache when it has them; with `mirror`, those of the images flipped
    left to right, cached apart."""
    import tensorflow as tf

    from seqtasks.utils.progress import progress_bar

    kind = "features-mirrored" if mirror else "features"
    cache = Path(cache_dir) / f"{kind}-{_cache_key(backbone, image_paths)}.npy"
    if cache.exists():
        log(f"Image features: {len(image_paths)} from the cache {cache}")
        return np.load(cache)
    paths = [str(path) for path in image_paths]
    if not paths:
        # tf.data cannot read an empty list of paths (nor TensorFlow convolve an empty batch):
        # the grid of one blank image gives the shape.
        return np.asarray(backbone(np.zeros((1, backbone.size, backbone.size, 3), "float32")), np.float16)[:0]
    for path in paths:
        if not Path(path).is_file():
            raise SeqtasksError(f"{path}: no such image file")
    # Decoding runs in parallel in tf.data and the backbone in one traced
    # function; a file that does not decode is named by reading it alone.
    data = tf.data.Dataset.from_tensor_slices(paths).map(
        lambda path: _decode(tf.io.read_file(path), backbone.size), num_parallel_calls=tf.data.AUTOTUNE
    )
    if mirror:
        data = data.map(tf.image.flip_left_right)
    data = data.batch(batch_size).prefetch(2)
    grid_of = tf.function(backbone.__call__, reduce_retracing=True)
    batches, done = [], 0
    iterator = iter(data)
    with progress_bar(len(paths), "Image features") as bar:
        while done < len(paths):
            try:
                images = next(iterator)
            except tf.errors.InvalidArgumentError:
                for path in paths[done : done + batch_size]:
                    read_image(path, backbone.size)
                raise
            batches.append(np.asarray(grid_of(images), np.float16))
            done += len(images)
            bar.update(len(images))
    log(f"Image features: {done}{' mirrored' if mirror else ''} computed, cached in {cache}")
    features = np.concatenate(batches)
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
