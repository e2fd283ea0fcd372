"""The captioning export: encoded image bytes in, captions out, the backbone inside the graph."""


def make_server(model, decode_fn, tokenizer, backbone, image_size):
    """A `tf.Module` whose `serve` maps encoded images `image` `[None]` to `caption` and `score`."""
    import tensorflow as tf

    def decode_image(data):
        # Same decoding and resizing as training's `read_image`; a corrupt or
        # unknown encoding fails the request with InvalidArgumentError.
        image = tf.io.decode_image(data, channels=3, expand_animations=False)
        return tf.image.resize(tf.cast(image, tf.float32), (image_size, image_size))

    class CaptionServer(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = model
            self.tokenizer = tokenizer
            self.backbone = backbone.model if backbone is not None else None

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="image")])
        def serve(self, image):
            pixels = tf.map_fn(
                decode_image, image, fn_output_signature=tf.TensorSpec([image_size, image_size, 3], tf.float32)
            )
            # An empty batch runs as one blank image (convolutions reject batches of 0), then is cut off.
            count = tf.shape(image)[0]
            pixels = tf.concat([pixels, tf.zeros([tf.maximum(0, 1 - count), image_size, image_size, 3])], 0)
            if backbone is None:
                inputs = tf.cast(tf.round(tf.clip_by_value(pixels, 0.0, 255.0)), tf.uint8)
            else:
                # Rounded through float16 like the cached features training read.
                inputs = tf.cast(backbone(pixels), tf.float16)
            ids, _, scores = decode_fn(inputs)
            return {"caption": self.tokenizer.detokenize(ids)[:count], "score": scores[:count]}

    return CaptionServer()
