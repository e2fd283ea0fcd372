"""Whitespace-separated words <-> ids through a fixed vocabulary, in the graph."""

import tensorflow as tf

from seqtasks.text.subword_tokenizer import END_ID, PAD_ID, RESERVED_TOKENS, UNK_ID


class WordTokenizer(tf.Module):
    """Splits on whitespace and looks words up; unknown words get `[UNK]`.

    The vocabulary starts with the reserved tokens of `SubwordTokenizer`, so
    both tokenizers share the special ids.
    """

    def __init__(self, words):
        super().__init__()
        self.vocab = RESERVED_TOKENS + [w for w in words if w not in RESERVED_TOKENS]
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(self.vocab), tf.range(len(self.vocab), dtype=tf.int64)
            ),
            default_value=UNK_ID,
        )
        self.words = tf.Variable(self.vocab, trainable=False, dtype=tf.string)

    @property
    def vocab_size(self):
        return len(self.vocab)

    def tokenize(self, text):
        return tf.cast(self.table.lookup(tf.strings.split(text)), tf.int32)

    def detokenize(self, ids):
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=PAD_ID)
        ids = tf.cast(ids, tf.int32)
        before_end = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, END_ID), tf.int32), axis=1), 0)
        keep = tf.logical_and(before_end, ids >= len(RESERVED_TOKENS))
        words = tf.ragged.boolean_mask(tf.gather(self.words, ids), keep)
        return tf.strings.reduce_join(words, axis=1, separator=" ")
