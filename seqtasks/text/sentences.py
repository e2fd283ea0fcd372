"""Sentences of a text, and the case of a shouted one, the same in Python and in a TensorFlow graph.

A text splits after a run of `.`, `!`, `?` or `…` (`"?!"`, `"..."`), any
closing quotes and brackets after it, then whitespace, when the next
character starts a sentence: an upper-case letter, a digit, an opening
quote or bracket, or `¿`, `¡`. It does not split after the abbreviations
`ABBREVIATIONS` ("Dr.", "Sra.", "etc.", "p. ej.", in any case) nor a single
capital initial ("J. K. Rowling"), nor inside a quotation that closes later
in the text (`«`, `“` and `‹` with their closing quotes, and `"` paired from
the start of the text), to `QUOTATION_LEVELS` levels of quotations inside
quotations: «Hola. ¿Qué tal?» is one sentence. A stop inside a number
("3.30", "1.000") has no whitespace after it, so it never splits.

As `seqtasks.text.pretokenizers` does, the rules are regular-expression
rewrites that insert a mark at each boundary, written in the part of the
syntax where Python's `re` and RE2 (`tf.strings.regex_replace`) agree:
literal characters and ranges in classes, no look-around, no `\\w`, `\\s`,
`\\b` or `$`. They make a fixed number of passes over a text, so the cost
grows with its length alone. Upper-case letters are those of ASCII,
Latin-1, Greek and Cyrillic. The pieces are then cut from the input
itself, so joining a text's separators and sentences in turn gives it back
exactly. `tests/test_sentences.py` checks the two engines agree on
thousands of generated strings.
"""

import re

from seqtasks.text.pretokenizers import WHITESPACE

ABBREVIATIONS = (
    "Dr", "Dra", "Sr", "Sra", "Srta", "Sres", "Mr", "Mrs", "Ms", "Prof", "St", "Jr", "Ud", "Uds", "Vd", "Vds",
    "etc", "ej", "vs", "e.g", "i.e",
)

# Private-use characters: the boundary mark, the text's two ends (`$` differs between the engines), a quotation's
# opening and closing, where the text is cut around them, and what a text's own characters of this range are read as.
_MARK, _START, _END, _OPEN, _CLOSE, _CUT, _OTHER = "\ue000", "\ue001", "\ue002", "\ue003", "\ue004", "\ue005", "\ue006"
_RESERVED = "[\ue000-\ue005]"
# Quotations inside quotations, outermost included, whose stops are kept from splitting.
QUOTATION_LEVELS = 3
_ENDS = ".!?\u2026"
_CLOSERS = "\"'\u201d\u2019\u00bb\u203a)\\]"
_OPENERS = "\"'\u201c\u2018\u00ab\u2039(\\[\u00bf\u00a1"
_UPPER = "A-Z\u00c0-\u00d6\u00d8-\u00de\u0386\u0388-\u038f\u0391-\u03a9\u0400-\u042f"
_LETTERS = _UPPER + "a-z\u00df-\u00f6\u00f8-\u00ff\u0390\u03ac-\u03ce\u0430-\u045f"


def _any_case(word):
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in word)


_ABBREVIATION = "|".join(_any_case(word) for word in sorted(ABBREVIATIONS, key=len, reverse=True))

_BOUNDARIES = [
    (f"([{_ENDS}]+[{_CLOSERS}]*)([{WHITESPACE}]+[{_UPPER}0-9{_OPENERS}])", f"\\1{_MARK}\\2"),
    # The character before the word is kept out of the match's end, so "Sr. Dr. López" loses both marks.
    (f"([^{_LETTERS}])((?:{_ABBREVIATION}|[{_UPPER}])\\.){_MARK}", "\\1\\2"),
    ('"([^"]*)"', f"{_OPEN}\\1{_CLOSE}"),
    ("[\u00ab\u201c\u2039]", _OPEN),
    ("[\u00bb\u201d\u203a]", _CLOSE),
]
_QUOTE = (f"([{_OPEN}{_CLOSE}])", f"{_CUT}\\1{_CUT}")
# Marks around every separator: the whitespace between sentences and at the text's two ends.
_PIECES = [
    (f"{_MARK}([{WHITESPACE}]+)", f"{_MARK}\\1{_MARK}"),
    (f"{_START}([{WHITESPACE}]*)", f"{_START}{_MARK}\\1{_MARK}"),
    (f"([^{WHITESPACE}{_MARK}])([{WHITESPACE}]*){_END}", f"\\1{_MARK}\\2{_MARK}{_END}"),
]


def split_sentences(text):
    """The sentences of one text and the whitespace around them (Python's `re`; the reference).

    Args:
        text: a `str`.

    Returns:
        `(sentences, separators)`: lists of `str`, with one separator more
        than sentences: the whitespace before the first sentence, between
        each two, and after the last (a text without sentences, empty or
        blank, is one separator). Sentences start and end with a character
        other than whitespace, and
        `separators[0] + sentences[0] + separators[1] + ... + separators[-1] == text`.

    >>> split_sentences("Dr. López llegó a las 3.30.  ¿Y tú? ")
    (['Dr. López llegó a las 3.30.', '¿Y tú?'], ['', '  ', ' '])
    """
    if not isinstance(text, str):
        raise TypeError(f"Expected a str. Received: text={text!r}")
    marked = _START + re.sub(_RESERVED, _OTHER, text) + _END
    for pattern, replacement in _BOUNDARIES:
        marked = re.sub(pattern, replacement, marked)
    for _ in range(QUOTATION_LEVELS):
        # Pieces alternate text and quote; a text between an opening and a closing is an innermost quotation.
        pieces = re.sub(*_QUOTE, marked).split(_CUT)
        inner = [0 < i < len(pieces) - 1 and i % 2 == 0 and pieces[i - 1] == _OPEN and pieces[i + 1] == _CLOSE
                 for i in range(len(pieces))]
        for i in range(len(pieces)):
            if inner[i]:
                pieces[i] = pieces[i].replace(_MARK, "")
            elif 0 < i < len(pieces) - 1 and (inner[i - 1] or inner[i + 1]):
                pieces[i] = _OTHER
        marked = "".join(pieces)
    for pattern, replacement in _PIECES:
        marked = re.sub(pattern, replacement, marked)
    pieces, start = [], 0
    for piece in marked.split(_MARK)[1:-1]:
        pieces.append(text[start : start + len(piece)])
        start += len(piece)
    return pieces[1::2], pieces[0::2]


def split_sentences_graph(texts):
    """`split_sentences` of a `[batch]` string tensor, in TensorFlow ops.

    Args:
        texts: a string tensor `[batch]` (UTF-8; an invalid byte counts as
            one character and is kept).

    Returns:
        `(sentences, separators)`: string ragged tensors `[batch, None]`,
        each row as `split_sentences` gives it (a row of separators has one
        more entry than its row of sentences).
    """
    import tensorflow as tf

    texts = tf.convert_to_tensor(texts, tf.string)
    marked = tf.strings.join([_START, tf.strings.regex_replace(texts, _RESERVED, _OTHER), _END])
    for pattern, replacement in _BOUNDARIES:
        marked = tf.strings.regex_replace(marked, pattern, replacement)
    for _ in range(QUOTATION_LEVELS):
        # As in `split_sentences`: a text piece between an opening and a closing is an innermost quotation.
        pieces = tf.strings.split(tf.strings.regex_replace(marked, *_QUOTE), sep=_CUT)
        flat = pieces.flat_values
        index = tf.range(tf.size(flat, out_type=tf.int64))
        position = _positions(pieces)
        last = tf.gather(pieces.row_lengths(), pieces.value_rowids()) - 1
        within = tf.logical_and(position > 0, position < last)
        previous = tf.gather(flat, tf.maximum(index - 1, 0))
        following = tf.gather(flat, tf.minimum(index + 1, tf.size(flat, out_type=tf.int64) - 1))
        inner = tf.logical_and(
            tf.logical_and(within, tf.equal(position % 2, 0)),
            tf.logical_and(tf.equal(previous, _OPEN), tf.equal(following, _CLOSE)),
        )
        padded = tf.pad(inner, [[1, 1]])
        around = tf.logical_and(within, tf.logical_or(padded[:-2], padded[2:]))
        flat = tf.where(inner, tf.strings.regex_replace(flat, _MARK, ""), tf.where(around, _OTHER, flat))
        marked = tf.strings.reduce_join(pieces.with_flat_values(flat), axis=1)
    for pattern, replacement in _PIECES:
        marked = tf.strings.regex_replace(marked, pattern, replacement)
    pieces = tf.strings.split(marked, sep=_MARK)[:, 1:-1]
    lengths = tf.strings.length(pieces.flat_values, unit="UTF8_CHAR")
    rows = pieces.value_rowids()
    # Every row holds at least one piece, so a row's first piece is where its offsets start from.
    offsets = tf.cumsum(lengths, exclusive=True)
    starts = offsets - tf.gather(tf.gather(offsets, pieces.row_starts()), rows)
    cut = pieces.with_flat_values(tf.strings.substr(tf.gather(texts, rows), starts, lengths, unit="UTF8_CHAR"))
    position = _positions(pieces)
    is_separator = pieces.with_flat_values(tf.equal(position % 2, 0))
    return (tf.ragged.boolean_mask(cut, tf.logical_not(is_separator)), tf.ragged.boolean_mask(cut, is_separator))


def sentence_case(sentence):
    """A shouted sentence in sentence case (Python; the reference of `sentence_case_graph`).

    A sentence is shouted when it has at least two letters (characters whose
    upper and lower case differ) and no lower-case letter (one that upper
    case changes). Its sentence case is its lower case with the first letter
    upper-cased ("¿DÓNDE ESTÁ?" -> "¿Dónde está?"); any other sentence is
    left as it is.

    Args:
        sentence: a `str`.

    Returns:
        `(text, shouted)`: the sentence to read, and whether it was shouted.
    """
    letters = [c for c in sentence if c.upper() != c.lower()]
    if len(letters) < 2 or any(c != c.upper() for c in letters):
        return sentence, False
    lowered = sentence.lower()
    first = next(i for i, c in enumerate(lowered) if c.upper() != c.lower())
    return lowered[:first] + lowered[first].upper() + lowered[first + 1 :], True


def sentence_case_graph(sentences):
    """`sentence_case` of a `[batch]` string tensor, in TensorFlow ops (`tf.strings.lower`/`upper` in UTF-8).

    Args:
        sentences: a string tensor `[batch]`.

    Returns:
        `(texts, shouted)`: string `[batch]` and bool `[batch]`.
    """
    import tensorflow as tf

    sentences = tf.convert_to_tensor(sentences, tf.string)
    characters = tf.strings.unicode_split(sentences, "UTF-8")
    flat = characters.flat_values
    upper, lower = upper_case_graph(flat), _changed(flat, tf.strings.lower)
    letter = tf.not_equal(upper, lower)
    letters = tf.reduce_sum(characters.with_flat_values(tf.cast(letter, tf.int32)), axis=1)
    any_lower = tf.reduce_any(characters.with_flat_values(tf.logical_and(letter, tf.not_equal(flat, upper))), axis=1)
    shouted = tf.logical_and(letters >= 2, tf.logical_not(any_lower))
    # The whole sentence is lowered at once: a Greek final sigma depends on the letters around it.
    lowered = tf.strings.unicode_split(_changed(sentences, tf.strings.lower), "UTF-8")
    flat = lowered.flat_values
    upper = upper_case_graph(flat)
    cased = lowered.with_flat_values(tf.not_equal(upper, _changed(flat, tf.strings.lower)))
    # A column more: `argmax` needs one, even where every sentence is empty.
    table = tf.pad(tf.cast(cased.to_tensor(default_value=False), tf.int32), [[0, 0], [0, 1]])
    first = tf.gather(tf.argmax(table, axis=1, output_type=tf.int64), lowered.value_rowids())
    capitalised = tf.where(tf.equal(_positions(lowered), first), upper, flat)
    return tf.where(shouted, tf.strings.reduce_join(lowered.with_flat_values(capitalised), axis=1), sentences), shouted


def upper_case_graph(texts):
    """`str.upper` of each string of a tensor `[...]`, in TensorFlow ops (`tf.strings.upper` in UTF-8).

    Args:
        texts: a string tensor of any shape.

    Returns:
        A string tensor of the same shape.
    """
    import tensorflow as tf

    return _changed(tf.convert_to_tensor(texts, tf.string), tf.strings.upper)


def _changed(texts, change):
    """`change(texts, encoding="utf-8")` with NUL characters kept: in UTF-8, `tf.strings.lower` and `upper` end a
    string at its first NUL, so each piece between NULs is changed on its own (Python's final sigma does not look
    past a NUL either)."""
    import tensorflow as tf

    shape = tf.shape(texts)
    pieces = tf.strings.split(tf.reshape(texts, [-1]), sep="\x00")
    last = tf.equal(_positions(pieces), tf.gather(pieces.row_lengths(), pieces.value_rowids()) - 1)
    flat = change(pieces.flat_values, encoding="utf-8") + tf.where(last, "", "\x00")
    return tf.reshape(tf.strings.reduce_join(pieces.with_flat_values(flat), axis=1), shape)


def _positions(ragged):
    """Each value's index in its row of a ragged tensor `[batch, None]`, as its flat values (int64)."""
    import tensorflow as tf

    index = tf.range(tf.size(ragged.flat_values, out_type=tf.int64))
    return index - tf.gather(ragged.row_starts(), ragged.value_rowids())
