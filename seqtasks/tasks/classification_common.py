"""Compiling, batch prediction and serving for the text classifier."""

from seqtasks.special_ids import PAD_ID


def compile_classifier(model, training):
    import keras

    from seqtasks.losses import SmoothedSparseCrossentropy
    from seqtasks.training import make_optimizer

    model.compile(
        optimizer=make_optimizer(training),
        loss=SmoothedSparseCrossentropy(training.label_smoothing),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )


def _padded_ids(encode, text):
    import tensorflow as tf

    ids = encode(text).to_tensor(default_value=PAD_ID)
    # At least one column, so an all-empty batch still has a time axis.
    return tf.pad(ids, [[0, 0], [0, tf.maximum(0, 1 - tf.shape(ids)[1])]])


def predict_probabilities(model, encode, texts, batch_size):
    """Class probabilities `(len(texts), classes)`, in length-sorted batches (`seqtasks.compiled`)."""
    import numpy as np
    import tensorflow as tf
    from keras import ops

    from seqtasks.compiled import CompiledFunction, pad_batch
    from seqtasks.tasks.prediction_loop import predict_in_batches

    compiled = CompiledFunction(
        lambda ids: ops.softmax(ops.cast(model(ids, training=False), "float32")), model, [((None, None), "int32")]
    )

    def predict(batch):
        ids = _padded_ids(encode, tf.constant(batch)).numpy()
        if compiled.compiles_per_shape:
            ids = pad_batch(ids, (None, None), batch_size, PAD_ID)
        return compiled(ids)[: len(batch)]

    rows = predict_in_batches(predict, texts, batch_size, "Classifying", [len(t) for t in texts])
    return np.stack(rows) if rows else np.zeros((0, model.num_classes), np.float32)


def make_classifier_server(model, tokenizer, encode, names, max_length, keep="first"):
    """A `tf.Module` whose `serve` maps `text` `[None]` to `label` and `probabilities`.

    Texts are cut to their first (`keep="first"`) or last
    `text_character_limit(max_length)` characters before `encode`. A text with no subwords (empty, blank) gets
    the label `""` and equal probabilities: there is nothing to classify.
    """
    import tensorflow as tf

    from seqtasks.tasks.serving_limits import cut_text

    class ClassifierServer(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = model
            self.tokenizer = tokenizer
            self.names = tf.constant(names)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            ids = _padded_ids(encode, cut_text(text, max_length, keep))
            probabilities = tf.nn.softmax(tf.cast(self.model(ids, training=False), tf.float32))
            label = tf.gather(self.names, tf.argmax(probabilities, axis=-1, output_type=tf.int32))
            empty = tf.reduce_all(tf.equal(ids, PAD_ID), axis=1)
            return {
                "label": tf.where(empty, "", label),
                "probabilities": tf.where(empty[:, None], 1.0 / len(names), probabilities),
            }

    return ClassifierServer()
