"""Words <-> ids through a fixed vocabulary, in the graph: whitespace-separated, or words as GloVe reads them.

With `split="whitespace"` a text's tokens are what whitespace separates (the
toy task's digits). With `split="words"` the text is normalised as
`SubwordTokenizer` normalises it (NFKC, case folding when `lower_case`) and
punctuation and the clitics of English (`n't`, `'s`, `'re`, `'ve`, `'ll`,
`'d`, `'m`) become tokens of their own, as in the Penn Treebank tokenisation
that pretrained word vectors such as GloVe were trained on.
"""

import tensorflow as tf

from seqtasks.text.special_ids import RESERVED_TOKENS, UNK_ID
from seqtasks.text.subword_tokenizer import content_ids, normalize

SPLITS = ("whitespace", "words")
# RE2 patterns: a clitic after a letter, then any character that is neither a letter, a digit, a space nor
# an apostrophe (an apostrophe left between letters stays in its word, as in "o'clock").
_CLITIC = r"([\pL\pN])(n't|'s|'re|'ve|'ll|'d|'m)(\s|$)"
_PUNCTUATION = r"([^\pL\pN\s'])"
# A clitic already split off, as tokenized data has it ("it 's"): its apostrophe is not a quote.
_LONE_CLITIC = r"(^|\s)'(s|re|ve|ll|d|m)(\s|$)"
_KEPT_APOSTROPHE = "\x00"


def split_words(text, lower_case=True):
    """Strings `[batch]` -> ragged word strings `[batch, None]`, as `WordTokenizer(split="words")` reads them.

    Raw text and its Penn Treebank tokenization split alike: "It's" and "it 's" both give `it 's`."""
    text = tf.strings.regex_replace(normalize(text, lower_case), _PUNCTUATION, r" \1 ")
    text = tf.strings.regex_replace(text, _KEPT_APOSTROPHE, " ")
    # Twice: a match takes the space after it, which may be the one before the next lone clitic.
    for _ in range(2):
        text = tf.strings.regex_replace(text, _LONE_CLITIC, "\\1" + _KEPT_APOSTROPHE + "\\2\\3")
    # Quotes: an apostrophe that starts or ends a word; then the clitics, whose apostrophe is inside one.
    text = tf.strings.regex_replace(text, r"(^|\s)'|'(\s|$)", r"\1 ' \2")
    text = tf.strings.regex_replace(text, _CLITIC, r"\1 \2\3")
    return tf.strings.split(tf.strings.regex_replace(text, _KEPT_APOSTROPHE, "'"))


class WordTokenizer(tf.Module):
    """Splits texts into words and looks them up; unknown words get `[UNK]`.

    The vocabulary starts with the reserved tokens of `SubwordTokenizer`, so
    both tokenizers share the special ids.

    Args:
        words: the vocabulary's words (reserved tokens are put first).
        split: `"whitespace"` or `"words"` (see the module).
        lower_case: with `"words"`, whether texts are case-folded first.
    """

    def __init__(self, words, split="whitespace", lower_case=True):
        super().__init__()
        if split not in SPLITS:
            raise ValueError(f"Expected one of {set(SPLITS)}. Received: split={split!r}")
        self.split = split
        self.lower_case = lower_case
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

    def pieces(self, text):
        """The word strings of `text` `[batch]`, ragged `[batch, None]`."""
        if self.split == "words":
            return split_words(text, self.lower_case)
        return tf.strings.split(text)

    def tokenize(self, text):
        return tf.cast(self.table.lookup(self.pieces(text)), tf.int32)

    def detokenize(self, ids):
        words = tf.gather(self.words, content_ids(ids))
        return tf.strings.reduce_join(words, axis=1, separator=" ")
