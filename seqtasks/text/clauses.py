"""A sentence longer than a model reads, in parts it reads whole: cut after clause punctuation, else between words.

A sentence of at most `limit` tokens is one part. A longer one is read word
by word (a word with the whitespace after it) and packed into parts
greedily: a part takes words while their tokens fit in `limit`; when the
next word does not fit, the part ends after its last word that closes a
clause (`, ; :` and the closing quotes or brackets after them), else before
the word that does not fit. A single word longer than `limit` is a part of
its own (the reader then cuts it). Each word's tokens are counted alone, so
a part's count is that of its words. Joining a sentence's parts with the
whitespace between them (`separators`) gives the sentence back.

`split_long` (Python, the reference) and `split_long_graph` (TensorFlow
ops, inside an export) agree; `tests/text/test_clauses.py` checks it on
generated sentences.
"""

import re

from seqtasks.text.pretokenizers import WHITESPACE

CLAUSE_PUNCTUATION = ",;:"
_CLOSERS = "\"'\u201d\u2019\u00bb\u203a)\\]"
_WORD = re.compile(f"[^{WHITESPACE}]+[{WHITESPACE}]*")
_CLAUSE_END = f"(?s).*[{CLAUSE_PUNCTUATION}][{_CLOSERS}]*"
_MARK = "\ue000"
_TRAILING = re.compile(f"[{WHITESPACE}]+\\Z")


def pack(lengths, clause_ends, limit):
    """The index of the first word of each part of one sentence, packed as the module says.

    Args:
        lengths: each word's tokens.
        clause_ends: whether each word closes a clause.
        limit: most tokens a part holds.

    Returns:
        A list of word indices, starting with 0 (empty for no words).
    """
    starts, running, last = [], 0, None
    for index, (length, closes) in enumerate(zip(lengths, clause_ends)):
        if not starts:
            starts, running = [0], length
        elif running + length <= limit:
            running += length
        elif last is not None and sum(lengths[last + 1 : index + 1]) <= limit:
            starts.append(last + 1)
            running = sum(lengths[last + 1 : index + 1])
        else:
            starts.append(index)
            running = length
        if closes:
            last = index
        elif last is not None and last < starts[-1]:
            last = None
    return starts


def split_long(sentence, count_tokens, limit):
    """`(parts, separators)` of one sentence: `separators` has one entry fewer, the whitespace between parts.

    Args:
        sentence: a `str` without whitespace at either end.
        count_tokens: `count_tokens(text) -> int`, the model's tokens of a text.
        limit: most tokens the model reads of one part.
    """
    if count_tokens(sentence) <= limit:
        return [sentence], []
    words = _WORD.findall(sentence)
    stripped = [_TRAILING.sub("", word) for word in words]
    closes = [re.fullmatch(_CLAUSE_END, word) is not None for word in stripped]
    starts = pack([count_tokens(word) for word in stripped], closes, limit)
    bounds = starts[1:] + [len(words)]
    parts = [_TRAILING.sub("", "".join(words[start:end])) for start, end in zip(starts, bounds)]
    separators = [words[end - 1][len(stripped[end - 1]) :] for end in bounds[:-1]]
    return parts, separators


def split_long_graph(sentences, count_tokens, limit):
    """`split_long` of a `[n]` string tensor, in TensorFlow ops.

    Args:
        sentences: a string tensor `[n]`, none with whitespace at either end.
        count_tokens: `count_tokens(texts) -> [m]` integer tokens of each text of a `[m]` string tensor.
        limit: most tokens a part holds (a Python int).

    Returns:
        `(parts, before)`: string ragged tensors `[n, None]`, each sentence's
        parts and the whitespace before each ("" before its first).
    """
    import tensorflow as tf

    sentences = tf.convert_to_tensor(sentences, tf.string)
    long = tf.cast(count_tokens(sentences), tf.int64) > limit
    marked = tf.strings.regex_replace(sentences, f"([{WHITESPACE}]+)", f"\\1{_MARK}")
    words = tf.strings.split(tf.where(long, marked, sentences), sep=_MARK)
    flat, rows = words.flat_values, words.value_rowids()
    size = tf.size(flat, out_type=tf.int64)
    # A long sentence's words hold whitespace at their end only; a sentence read whole is one word, as it is.
    cut = tf.gather(long, rows)
    stripped = tf.where(cut, tf.strings.regex_replace(flat, f"[{WHITESPACE}]+", ""), flat)
    trailing = tf.where(cut, tf.strings.regex_replace(flat, f"[^{WHITESPACE}]+", ""), "")
    lengths = tf.cast(count_tokens(stripped), tf.int64)
    closes = tf.strings.regex_full_match(stripped, _CLAUSE_END)
    index = tf.range(size)
    first = tf.equal(index, tf.gather(words.row_starts(), rows))
    total = tf.cumsum(lengths)

    def step(state, word):
        start, last, running = state
        i, length, clause, opens = word
        fits = running + length <= limit
        # Words from the last clause end on, the word that does not fit included.
        tail = total[i] - tf.gather(total, tf.maximum(last, 0))
        by_clause = tf.logical_and(last >= start, tail <= limit)
        new_start = tf.where(opens, i, tf.where(fits, start, tf.where(by_clause, last + 1, i)))
        new_running = tf.where(opens, length, tf.where(fits, running + length, tf.where(by_clause, tail, length)))
        new_last = tf.where(clause, i, tf.where(last < new_start, tf.constant(-1, tf.int64), last))
        return new_start, new_last, new_running

    zero = tf.constant(0, tf.int64)
    starts, _, _ = tf.scan(step, (index, lengths, closes, first), initializer=(zero, zero - 1, zero))
    # Every start a step chose is a part's first word: a word's part is the latest start at or before it.
    marks = tf.scatter_nd(tf.expand_dims(starts, 1), tf.ones_like(starts), tf.expand_dims(size, 0))
    group = tf.cumsum(tf.minimum(marks, 1)) - 1
    groups = tf.reduce_max(tf.concat([group, [-1]], 0)) + 1
    following = tf.concat([group[1:], [-1]], 0)
    last_word = tf.not_equal(group, following)
    text = tf.strings.unsorted_segment_join(tf.where(last_word, stripped, flat), group, groups)
    part_rows = tf.math.unsorted_segment_max(rows, group, groups)
    after = tf.strings.unsorted_segment_join(tf.where(last_word, trailing, ""), group, groups)
    same_row = tf.equal(part_rows, tf.concat([[-1], part_rows], 0)[:-1])
    before = tf.where(same_row, tf.concat([[""], after], 0)[:-1], "")
    nrows = tf.shape(sentences, out_type=tf.int64)[0]
    return (tf.RaggedTensor.from_value_rowids(text, part_rows, nrows=nrows),
            tf.RaggedTensor.from_value_rowids(before, part_rows, nrows=nrows))
