"""Per-token model inputs for tagging (word ids, character ids, casing), computed in the graph.

`TokenFeaturizer` is a `tf.Module`: its lookup tables are saved inside an
exported SavedModel, which then needs only TensorFlow to tag raw text.
"""

import collections

import tensorflow as tf

from seqtasks.text.special_ids import PAD_ID, RESERVED_TOKENS, UNK_ID

# Words and characters reserve padding and the unknown entry only.
RESERVED = list(RESERVED_TOKENS[: UNK_ID + 1])
# Casing classes; 0 is padding.
CASING_CLASSES = 6
_CASING_PATTERNS = [r"[^\p{L}\p{N}]*\p{Ll}[\p{Ll}\p{N}\p{P}]*", r"[\p{Lu}\p{N}\p{P}]*\p{Lu}[\p{Lu}\p{N}\p{P}]*",
                    r"\p{Lu}[\p{Ll}\p{P}]*", r".*\p{N}.*"]


def normalize_words(tokens, lower_case):
    """Words as looked up: Unicode lower case and every digit as 0 when `lower_case`."""
    if not lower_case:
        return tokens
    return tf.strings.regex_replace(tf.strings.lower(tokens, encoding="utf-8"), r"\p{Nd}", "0")


def casing_ids(tokens):
    """1 lower, 2 UPPER, 3 Title, 4 has digits, 5 anything else, for string tokens of any shape."""
    ids = tf.fill(tf.shape(tokens), 5)
    # Later patterns win: a digit anywhere makes a token numeric.
    for index, pattern in enumerate(_CASING_PATTERNS, start=1):
        ids = tf.where(tf.strings.regex_full_match(tokens, pattern), index, ids)
    return ids


def word_counts(sentences, lower_case):
    """How often each word (as looked up, `normalize_words`) occurs in token lists: a `collections.Counter`."""
    flat = tf.constant([token for sentence in sentences for token in sentence])
    return collections.Counter(t.decode() for t in normalize_words(flat, lower_case).numpy())


def build_vocabularies(sentences, lower_case, min_word_count, singletons_last=False):
    """Word and character vocabularies (reserved entries first) from training token lists.

    Words are sorted; with `singletons_last`, the words seen once come after
    all others (each part sorted), so that they are the ids from
    `len(word_vocab) - singletons` on.
    """
    words = word_counts(sentences, lower_case)
    characters = collections.Counter(c for sentence in sentences for token in sentence for c in token)
    kept = sorted(w for w, n in words.items() if n >= min_word_count)
    if singletons_last:
        kept = [w for w in kept if words[w] > 1] + [w for w in kept if words[w] == 1]
    word_vocab = RESERVED + kept
    char_vocab = RESERVED + sorted(characters)
    return word_vocab, char_vocab


def _table(vocab):
    keys = tf.constant(vocab[len(RESERVED) :], dtype=tf.string)
    values = tf.range(len(RESERVED), len(vocab), dtype=tf.int32)
    if not vocab[len(RESERVED) :]:
        # TensorFlow refuses an empty table; tokens are never empty, so "" changes no lookup.
        keys, values = tf.constant([""]), tf.constant([UNK_ID], tf.int32)
    return tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, values), default_value=UNK_ID)


class TokenFeaturizer(tf.Module):
    """Ragged string tokens `[batch, None]` -> padded model inputs.

    `features(tokens)` returns `{"words": int32 [batch, time], "characters":
    int32 [batch, time, max_word_length], "casing": int32 [batch, time]}`,
    0 at padding.
    """

    def __init__(self, word_vocab, char_vocab, lower_case, max_word_length):
        super().__init__()
        self.word_vocab = list(word_vocab)
        self.char_vocab = list(char_vocab)
        self.lower_case = lower_case
        self.max_word_length = max_word_length
        self.word_table = _table(self.word_vocab)
        self.char_table = _table(self.char_vocab)

    def features(self, tokens):
        words = tf.ragged.map_flat_values(
            lambda t: self.word_table.lookup(normalize_words(t, self.lower_case)), tokens
        )
        characters = tf.strings.unicode_split(tokens, "UTF-8")[:, :, : self.max_word_length]
        characters = tf.ragged.map_flat_values(self.char_table.lookup, characters)
        casing = tf.ragged.map_flat_values(casing_ids, tokens)
        dense = {
            "words": words.to_tensor(PAD_ID),
            "characters": characters.to_tensor(PAD_ID, shape=[None, None, self.max_word_length]),
            "casing": casing.to_tensor(0),
        }
        # At least one (padding) step, so a batch of empty sentences still has a time axis.
        extra = tf.maximum(0, 1 - tf.shape(dense["words"])[1])
        padded = {}
        for name, value in dense.items():
            padded[name] = tf.pad(value, [[0, 0], [0, extra]] + [[0, 0]] * (len(value.shape) - 2))
            padded[name].set_shape([None, None] + value.shape[2:])
        return padded
