"""The captioning export: encoded image bytes in, captions out, the backbone inside the graph."""

from seqtasks.export.serving_limits import MAX_IMAGE_PIXELS

# GIF is left out: the decoder allocates every frame at the frame's own size, which only decoding reveals.
FORMATS = "JPEG, PNG or BMP"
# Header bytes read for the declared size; shorter inputs are padded with zeros first.
_HEADER_BYTES = 26


def _number(header, start, size, little_endian):
    """The unsigned integer of `size` bytes at `start` of a scalar string, as int64."""
    import tensorflow as tf

    digits = tf.cast(tf.io.decode_raw(tf.strings.substr(header, start, size), tf.uint8), tf.int64)
    weights = [256**k for k in (range(size) if little_endian else reversed(range(size)))]
    return tf.reduce_sum(digits * tf.constant(weights, tf.int64))


def declared_size(data):
    """`(width, height)` int64 that the header of encoded image bytes `data` (scalar) declares.

    JPEG (read by `tf.image.extract_jpeg_shape`), PNG and BMP headers are
    read; `(-1, -1)` for bytes of any other kind. Nothing is decoded.
    """
    import tensorflow as tf

    header = tf.strings.substr(tf.strings.join([data, b"\0" * _HEADER_BYTES]), 0, _HEADER_BYTES)

    def starts(prefix):
        return tf.equal(tf.strings.substr(header, 0, len(prefix)), prefix)

    def signed(value):  # BMP sizes are int32: a negative height means rows stored top-down
        return tf.abs(tf.where(value >= 2**31, value - 2**32, value))

    def jpeg():
        shape = tf.cast(tf.image.extract_jpeg_shape(data), tf.int64)
        return tf.stack([shape[1], shape[0]])

    return tf.case(
        [
            (starts(b"\xff\xd8\xff"), jpeg),
            (starts(b"\x89PNG\r\n\x1a\n"), lambda: tf.stack([_number(header, 16, 4, False), _number(header, 20, 4, False)])),
            (
                starts(b"BM"),
                lambda: tf.stack([signed(_number(header, 18, 4, True)), signed(_number(header, 22, 4, True))]),
            ),
        ],
        default=lambda: tf.constant([-1, -1], tf.int64),
        exclusive=True,
    )


def checked_decode(index, data, image_size):
    """Image `index` of a request decoded and resized to `(image_size, image_size, 3)` float32 in 0..255.

    Before decoding, bytes that are no JPEG, PNG or BMP image fail the request
    with `image[index]: not a JPEG, PNG or BMP image`, and an image declaring
    more than `MAX_IMAGE_PIXELS` pixels with `image[index]: too large (W x H
    pixels; ...)` (`InvalidArgumentError`, "assertion failed: [...]"), so a
    request's memory stays bounded whatever its bytes claim. Bytes with a
    valid header but broken data still fail in the decoder, with its message.
    """
    import tensorflow as tf

    size = declared_size(data)
    known = tf.debugging.Assert(
        size[0] >= 0,
        [tf.strings.format("image[{}]: not a " + FORMATS + " image", index)],
    )
    with tf.control_dependencies([known]):
        # Each side first: the product of two 32-bit sides can overflow int64.
        fits = tf.logical_and(tf.reduce_all(size <= MAX_IMAGE_PIXELS), size[0] * size[1] <= MAX_IMAGE_PIXELS)
        small = tf.debugging.Assert(
            fits,
            [
                tf.strings.format(
                    "image[{}]: too large ({} x {} pixels; at most {} are read): scale it down first",
                    (index, size[0], size[1], MAX_IMAGE_PIXELS),
                )
            ],
        )
    with tf.control_dependencies([small]):
        image = tf.io.decode_image(data, channels=3, expand_animations=False)
    # Resizing the uint8 pixels gives the float32 values training's `read_image` gets
    # (cast, then resize), without a float32 copy of the full-size image.
    return tf.image.resize(image, (image_size, image_size))


def image_reader(backbone, image_size):
    """A reader of encoded images `image` `[None]` for `seqtasks.encoder_decoder.export.make_encoder_decoder_module`.

    Each image is checked and decoded (`checked_decode`), resized to
    `image_size`, and run through the frozen `backbone` inside the graph (or
    given as pixels to a captioner that trains its own CNN). Its attention
    outputs are the caption's `tokens` `[None, T]` (the end token included,
    padded with ""), `attention` `[None, T, L]` over the image's feature grid
    and `grid` `[None, 2]`, its height and width (the images are resized to
    squares, so the grid is square: L = h * w).
    """
    import tensorflow as tf

    class ImageReader(tf.Module):
        spec = tf.TensorSpec([None], tf.string, name="image")

        def __init__(self):
            super().__init__()
            self.backbone = backbone.model if backbone is not None else None

        def read(self, image):
            count = tf.shape(image)[0]
            pixels = tf.map_fn(
                lambda item: checked_decode(item[0], item[1], image_size),
                (tf.range(count), image),
                fn_output_signature=tf.TensorSpec([image_size, image_size, 3], tf.float32),
            )
            # An empty batch runs as one blank image (convolutions reject batches of 0), then is cut off.
            pixels = tf.concat([pixels, tf.zeros([tf.maximum(0, 1 - count), image_size, image_size, 3])], 0)
            if backbone is None:
                return tf.cast(tf.round(tf.clip_by_value(pixels, 0.0, 255.0)), tf.uint8), count, None
            # Rounded through float16 like the cached features training read.
            return tf.cast(backbone(pixels), tf.float16), count, None

        def attention_outputs(self, inputs, tokens, weights, mask):
            cells = tf.shape(weights)[2]
            side = tf.cast(tf.round(tf.sqrt(tf.cast(cells, tf.float32))), tf.int32)
            rows = tf.shape(weights)[0]
            return {"tokens": tokens, "attention": weights, "grid": tf.tile([[side, cells // side]], [rows, 1])}

    return ImageReader()
