"""The text classifier's export: texts in, a label and the probabilities of every class out."""

from seqtasks.text.special_ids import PAD_ID


def make_classifier_module(model, tokenizer, encode, names, max_length, keep="first"):
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
    from seqtasks.encoder_decoder.export import token_strings
    from seqtasks.export.serving_limits import cut_text
    from seqtasks.tasks.sentiment.prediction import padded_ids

    members = getattr(model, "member_models", [model])
    text_spec = tf.TensorSpec([None], tf.string, name="text")

    class ClassifierModule(tf.Module):
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
            return self._classify(padded_ids(encode, cut_text(text, max_length, keep)))

        def _attention(self, text):
            ids = padded_ids(encode, cut_text(text, max_length, keep))
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

    return ClassifierModule()
