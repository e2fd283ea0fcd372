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
    """Class probabilities `(len(texts), classes)`, in length-sorted batches, traced once."""
    import numpy as np
    import tensorflow as tf

    from seqtasks.tasks.prediction_loop import predict_in_batches

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def predict(text):
        return tf.nn.softmax(tf.cast(model(_padded_ids(encode, text), training=False), tf.float32))

    rows = predict_in_batches(
        lambda batch: predict(tf.constant(batch)).numpy(), texts, batch_size, "Classifying", [len(t) for t in texts]
    )
    return np.stack(rows) if rows else np.zeros((0, model.num_classes), np.float32)


def make_classifier_server(model, tokenizer, encode, names):
    """A `tf.Module` whose `serve` maps `text` `[None]` to `label` and `probabilities`."""
    import tensorflow as tf

    class ClassifierServer(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = model
            self.tokenizer = tokenizer
            self.names = tf.constant(names)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            logits = self.model(_padded_ids(encode, text), training=False)
            probabilities = tf.nn.softmax(tf.cast(logits, tf.float32))
            label = tf.gather(self.names, tf.argmax(probabilities, axis=-1, output_type=tf.int32))
            return {"label": label, "probabilities": probabilities}

    return ClassifierServer()
