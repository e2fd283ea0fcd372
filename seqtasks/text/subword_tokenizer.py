"""WordPiece subwords learned from the training data, run in the graph by tensorflow-text.

Unseen words split into known pieces (down to single characters) instead of
collapsing into one unknown token. The tokenizer is a `tf.Module`, so it is
saved inside the exported SavedModel and needs only `tensorflow_text` there.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from seqtasks.text.special_ids import END_ID, PAD_ID, RESERVED_TOKENS

# Characters too rare to learn (e.g. a single emoji) still get a piece.
_MAX_BYTES_PER_WORD = 100


def normalize(text, lower_case):
    """NFKC Unicode normalisation, optionally Unicode case folding (accents are kept)."""
    text = tf_text.normalize_utf8(text, "NFKC")
    if lower_case:
        text = tf_text.case_fold_utf8(text)
    return text


def learn_vocabulary(texts, vocab_size, lower_case, field=None):
    """Learns a WordPiece vocabulary (reserved tokens first) from a list of strings.

    When the texts give fewer subwords than `vocab_size`, the vocabulary is
    smaller and, with `field` (the recipe key), a note says so.
    """
    from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset

    dataset = tf.data.Dataset.from_tensor_slices(list(texts)).batch(1024)
    dataset = dataset.map(lambda batch: normalize(batch, lower_case))
    vocab = bert_vocab_from_dataset.bert_vocab_from_dataset(
        dataset,
        vocab_size=vocab_size,
        reserved_tokens=list(RESERVED_TOKENS),
        bert_tokenizer_params={"lower_case": False},
        learn_params={},
    )
    if field and len(vocab) < vocab_size:
        print(f"Note: {field} is {vocab_size}, but the training data gives only {len(vocab)} subwords; using {len(vocab)}")
    return vocab


class SubwordTokenizer(tf.Module):
    """Text <-> WordPiece ids, with normalisation and punctuation splitting.

    `tokenize` maps strings `[batch]` to a ragged int32 `[batch, None]`
    (punctuation split off words, as BERT does). `detokenize` maps id rows,
    cut at `[END]`, back to readable text.
    """

    def __init__(self, vocab, lower_case=True):
        super().__init__()
        self.vocab = list(vocab)
        if tuple(self.vocab[: len(RESERVED_TOKENS)]) != RESERVED_TOKENS:
            raise ValueError(f"Expected the vocabulary to start with {list(RESERVED_TOKENS)}")
        self.lower_case = lower_case
        self.wordpiece = tf_text.FastWordpieceTokenizer(
            self.vocab,
            token_out_type=tf.int32,
            unknown_token="[UNK]",
            max_bytes_per_word=_MAX_BYTES_PER_WORD,
            support_detokenization=True,
        )

    @property
    def vocab_size(self):
        return len(self.vocab)

    def tokenize(self, text):
        return self.wordpiece.tokenize(normalize(text, self.lower_case))

    def detokenize(self, ids):
        """`ids` `[batch, time]` int32 (dense or ragged) -> strings `[batch]`.

        Everything from the first `[END]` on is dropped, and so are the other
        reserved tokens; spaces the tokenizer put around punctuation go.
        """
        ids = content_ids(ids)
        return tidy_punctuation(self.wordpiece.detokenize(ids))


def content_ids(ids):
    """The ids of each row before its first `[END]`, reserved tokens dropped (ragged)."""
    if isinstance(ids, tf.RaggedTensor):
        ids = ids.to_tensor(default_value=PAD_ID)
    ids = tf.cast(ids, tf.int32)
    before_end = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, END_ID), tf.int32), axis=1), 0)
    return tf.ragged.boolean_mask(ids, tf.logical_and(before_end, ids >= len(RESERVED_TOKENS)))


def tidy_punctuation(text):
    """Undoes the spaces around punctuation that tokenization added."""
    text = tf.strings.regex_replace(text, r" ([.,!?;:%)\]}»…])", r"\1")
    text = tf.strings.regex_replace(text, r"([(\[{«¿¡]) ", r"\1")
    text = tf.strings.regex_replace(text, r"(\pL) ' (\pL)", r"\1'\2")
    return tf.strings.regex_replace(text, r"(\pL) '(\s|$)", r"\1'\2")
