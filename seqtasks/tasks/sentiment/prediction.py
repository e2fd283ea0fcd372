"""The text classifier's class probabilities and attention maps, in batches, for evaluation."""

from seqtasks.text.special_ids import PAD_ID


def padded_ids(encode, text):
    """`encode(text)` as a dense id batch padded with `PAD_ID`, with at least one column."""
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
        ids = padded_ids(encode, tf.constant(batch)).numpy()
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

    ids = padded_ids(encode, tf.constant(texts)).numpy()
    members = [member.attention_maps(ids) for member in getattr(model, "member_models", [model])]
    return {name: np.mean([np.asarray(each[name], np.float32) for each in members], axis=0) for name in members[0]}, ids
