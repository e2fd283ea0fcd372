"""The captioning export's images: the sizes their headers declare, read without decoding."""

import numpy as np
import tensorflow as tf

from seqtasks.tasks.captioning.export import declared_size
from tests.support.image_bytes import GIF, bmp_image, png_header


def test_declared_size_reads_jpeg_png_and_bmp_headers_without_decoding():
    pixels = np.zeros((5, 7, 3), "uint8")
    cases = [
        (tf.io.encode_png(pixels).numpy(), [7, 5]),
        (tf.io.encode_jpeg(pixels).numpy(), [7, 5]),
        (bmp_image(pixels), [7, 5]),
        (bmp_image(pixels)[:22] + (-5).to_bytes(4, "little", signed=True), [7, 5]),  # top-down rows
        (png_header(16000, 16000), [16000, 16000]),
        (png_header(2**32 - 1, 1), [2**32 - 1, 1]),
        (GIF, [-1, -1]),
        (b"", [-1, -1]),
        (b"\x89PN", [-1, -1]),
        (b"not an image", [-1, -1]),
    ]
    for data, size in cases:
        assert declared_size(tf.constant(data)).numpy().tolist() == size, data[:12]
