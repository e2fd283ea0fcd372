"""Compiling, batch prediction and serving for the text classifier."""

import keras
from keras import ops

from seqtasks.training.losses import SmoothedSparseCrossentropy
from seqtasks.text.special_ids import PAD_ID


@keras.saving.register_keras_serializable(package="seqtasks")
class MemberCrossentropy(SmoothedSparseCrossentropy):
    """`SmoothedSparseCrossentropy` of an ensemble: in training, the sum over its members of each one's loss.

    Logits `(batch, members, classes)` (a `TextClassifierEnsemble` in
    training) give the sum of the members' cross-entropies, so each member's
    gradients are those of a model trained alone; logits `(batch, classes)`
    (the ensemble's mean probabilities, in validation) give their
    cross-entropy.
    """

    def call(self, y_true, y_pred):
        if len(y_pred.shape) == 2:
            return super().call(y_true, y_pred)
        labels = ops.broadcast_to(ops.expand_dims(ops.cast(y_true, "int32"), 1), ops.shape(y_pred)[:2])
        return ops.sum(super().call(labels, y_pred), axis=1)


@keras.saving.register_keras_serializable(package="seqtasks")
class EnsembleAccuracy(keras.metrics.SparseCategoricalAccuracy):
    """Accuracy of the mean probabilities, from an ensemble's member logits `(batch, members, classes)` or logits."""

    def update_state(self, y_true, y_pred, sample_weight=None):
        from seqtasks.models.text_classifier import mean_probability_logits

        if len(y_pred.shape) == 3:
            y_pred = mean_probability_logits(y_pred)
        return super().update_state(y_true, y_pred, sample_weight=sample_weight)


def compile_classifier(model, training):
    from seqtasks.models.text_classifier import TextClassifierEnsemble
    from seqtasks.training.fit import make_optimizer

    if isinstance(model, TextClassifierEnsemble):
        loss, accuracy = MemberCrossentropy(training.label_smoothing), EnsembleAccuracy(name="accuracy")
    else:
        loss = SmoothedSparseCrossentropy(training.label_smoothing)
        accuracy = keras.metrics.SparseCategoricalAccuracy(name="accuracy")
    model.compile(optimizer=make_optimizer(training), loss=loss, metrics=[accuracy])


def _padded_ids(encode, text):
    import tensorflow as tf

    ids = encode(text).to_tensor(default_value=PAD_ID)
    # At least one column, so an all-empty batch still has a time axis.
    return tf.pad(ids, [[0, 0], [0, tf.maximum(0, 1 - tf.shape(ids)[1])]])


def predict_probabilities(model, encode, texts, batch_size):
    """Class probabilities `(len(texts), classes)`, in length-sorted batches (`seqtasks.training.compiled`)."""
    import numpy as np
    import tensorflow as tf
    from keras import ops

    from seqtasks.training.compiled import CompiledFunction, pad_batch
    from seqtasks.evaluation.prediction_loop import predict_in_batches

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


def classifier_attention_maps(model, encode, texts):
    """The attention maps (`TextClassifier.attention_maps`, an ensemble's averaged over its members) of `texts`
    as NumPy arrays by name, and the token ids they were read from `(texts, time)`."""
    import numpy as np
    import tensorflow as tf

    ids = _padded_ids(encode, tf.constant(texts)).numpy()
    members = [member.attention_maps(ids) for member in getattr(model, "member_models", [model])]
    return {name: np.mean([np.asarray(each[name], np.float32) for each in members], axis=0) for name in members[0]}, ids


def make_classifier_server(model, tokenizer, encode, names, max_length, keep="first"):
    """A `tf.Module` whose `serve` maps `text` `[None]` to `label` and `probabilities`.

    Texts are cut to their first (`keep="first"`) or last
    `text_character_limit(max_length)` characters before `encode`. A text with no subwords (empty, blank) gets
    the label `""` and equal probabilities: there is nothing to classify.

    With attention pooling, `serving_signatures()` adds `attention`: the
    outputs of `serve` with the subwords read, `tokens` `[None, T]` (padded
    with ""), and the pooling weights over them, `attention` `[None, T]`
    (an ensemble's: the mean of its members' weights).
    """
    import tensorflow as tf

    from seqtasks.export.signatures import ATTENTION_SIGNATURE
    from seqtasks.encoder_decoder.server import token_strings
    from seqtasks.export.serving_limits import cut_text

    members = getattr(model, "member_models", [model])
    text_spec = tf.TensorSpec([None], tf.string, name="text")

    class ClassifierServer(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = model
            self.tokenizer = tokenizer
            self.names = tf.constant(names)
            # Saved with the export, so a server can name the probabilities' classes.
            self.label_names = tf.Variable(names, trainable=False, dtype=tf.string)
            # Only then: saving traces every tf.function a module holds.
            if members[0].attention_pooling is not None:
                self.attention = tf.function(self._attention, input_signature=[text_spec], autograph=False)

        @tf.function(input_signature=[text_spec], autograph=False)
        def serve(self, text):
            return self._classify(_padded_ids(encode, cut_text(text, max_length, keep)))

        def _attention(self, text):
            ids = _padded_ids(encode, cut_text(text, max_length, keep))
            weights = [tf.cast(member.text_vectors(ids, training=False)[1], tf.float32) for member in members]
            mask = tf.not_equal(ids, PAD_ID)
            outputs = self._classify(ids)
            outputs.update(
                tokens=token_strings(tokenizer, ids, mask),
                attention=tf.where(mask, tf.add_n(weights) / len(weights), 0.0),
            )
            return outputs

        def serving_signatures(self):
            signatures = {"serving_default": self.serve}
            if hasattr(self, "attention"):
                signatures[ATTENTION_SIGNATURE] = self.attention
            return signatures

        def _classify(self, ids):
            probabilities = tf.nn.softmax(tf.cast(self.model(ids, training=False), tf.float32))
            label = tf.gather(self.names, tf.argmax(probabilities, axis=-1, output_type=tf.int32))
            empty = tf.reduce_all(tf.equal(ids, PAD_ID), axis=1)
            return {
                "label": tf.where(empty, "", label),
                "probabilities": tf.where(empty[:, None], 1.0 / len(names), probabilities),
            }

    return ClassifierServer()
