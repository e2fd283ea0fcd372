"""What the captioner reads per image: a frozen backbone's cached feature grid, or pixels for the trained CNN."""

import numpy as np


def make_backbone(config):
    """`(frozen, head)` for a recipe's `model.backbone`.

    `frozen` is the `FrozenBackbone` whose features are cached (`None` for the
    CNN trained with the captioner); `head` is the part trained with the
    captioner when `fine_tune_from` names a layer, else `None`.
    """
    from seqtasks.data.image_features import FrozenBackbone

    if config.type == "cnn":
        return None, None
    if config.type == "file":
        backbone = FrozenBackbone.from_file(config.path)
    else:
        backbone = FrozenBackbone.from_application(config.name, config.weights, config.image_size)
    if config.fine_tune_from:
        return backbone.split(config.fine_tune_from)
    return backbone, None


def image_inputs(backbone, image_size, paths, cache_dir, log=print, mirror=False):
    """The captioner's inputs for the images: cached feature grids, or uint8 pixels for the trained CNN;
    with `mirror`, those of the images flipped left to right."""
    from seqtasks.data.image_features import image_features, read_image

    if backbone is not None:
        return image_features(backbone, paths, cache_dir, log=log, mirror=mirror)
    pixels = np.stack([np.clip(np.round(np.asarray(read_image(path, image_size))), 0, 255) for path in paths])
    return (pixels[:, :, ::-1] if mirror else pixels).astype(np.uint8)


def input_shape(backbone, image_size):
    """The shape of one image's input to the captioner: a feature grid, or pixels for the trained CNN."""
    if backbone is None:
        return (image_size, image_size, 3)
    shape = tuple(backbone.model.output_shape[1:])
    return (shape[0] * shape[1], shape[2]) if backbone.flatten else shape


def served_image_size(backbone_config, backbone):
    """The side images are resized to: the backbone's own input size, else the recipe's."""
    return backbone.size if backbone is not None else backbone_config.image_size
