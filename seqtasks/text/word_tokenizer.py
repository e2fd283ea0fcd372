"""Whitespace-separated words <-> ids through a fixed vocabulary, in the graph."""

import tensorflow as tf

from seqtasks.text.special_ids import RESERVED_TOKENS, UNK_ID
from seqtasks.text.subword_tokenizer import content_ids


class WordTokenizer(tf.Module):
    """Splits on whitespace and looks words up; unknown words get `[UNK]`.

    The vocabulary starts with the reserved tokens of `SubwordTokenizer`, so
    both tokenizers share the special ids.
    """

    def __init__(self, words):
        super().__init__()
        self.vocab = list(RESERVED_TOKENS) + [w for w in words if w not in RESERVED_TOKENS]
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
        words = tf.gather(self.words, content_ids(ids))
        return tf.strings.reduce_join(words, axis=1, separator=" ")
