"""The captioning task's image inputs: the mirrored pixels the CNN reads."""

import numpy as np
import tensorflow as tf


def test_mirrored_pixels_for_the_trained_cnn_are_the_images_flipped_left_to_right(tmp_path):
    from seqtasks.tasks.captioning.image_inputs import image_inputs

    pixels = np.random.default_rng(6).integers(0, 256, (8, 8, 3), dtype=np.uint8)
    (tmp_path / "a.png").write_bytes(tf.io.encode_png(pixels).numpy())
    (tmp_path / "b.png").write_bytes(tf.io.encode_png(np.ascontiguousarray(pixels[:, ::-1])).numpy())
    plain = image_inputs(None, 8, [tmp_path / "a.png", tmp_path / "b.png"], tmp_path / "cache")
    mirrored = image_inputs(None, 8, [tmp_path / "a.png"], tmp_path / "cache", mirror=True)
    np.testing.assert_array_equal(plain[0], pixels)
    np.testing.assert_array_equal(mirrored[0], plain[1])
    assert mirrored.dtype == np.uint8
