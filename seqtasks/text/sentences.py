"""Sentences of a text, and the case of a shouted one, the same in Python and in a TensorFlow graph.

Rules, for Spanish and English text as people write and paste it:

- A text splits after a run of `.`, `!`, `?` or `…` (`"?!"`, `"..."`) and
  any closing quotes and brackets after it, then whitespace, where the next
  character starts a sentence: an upper-case letter, a digit, an opening
  quote or bracket, `¿`, `¡`, a list bullet (`•`, `*`, ...) or a dash
  (`-`, `–`, `—`, ...) that opens a reply. A dash followed by a lower-case
  letter on the same line is the narrator's aside, which continues the
  sentence ("—¿Vienes? —preguntó." is one sentence); at the start of a line
  any dash opens one ("—¿Vienes? —Sí, claro. —Vamos." is three).
- It does not split after an abbreviation of `ABBREVIATIONS` (titles,
  "Dr.", "Dña.", "Lic.", "Prof."; addresses, "Av.", "Sto.", "Col.";
  "Cía."; "EE." of "EE. UU."; "p. ej.", "vs.", "e.g.", in any case), nor
  after one of `NUMBER_ABBREVIATIONS` before a digit (references, "Art. 5",
  "pág. 5", "Núm. 5", "No. 5", "Fig. 3", "Vol. 2", "aprox. 5 km", and the
  months and weekdays of dates, "Jan. 5", "5 de ago. 2025", "mié. 5": many
  are ordinary words too, "No.", "art.", "ago.", "mar.", "Sun.", so before
  a capital they end a sentence), nor after a single letter of either case
  (initials, "J. K. Rowling", "U. S.", "U.S.", and one-letter
  abbreviations, "p. 5", "s. XX"), nor after the number of a numbered list
  at the start of a line ("1. Introducción"). The two-letter abbreviations
  of `FINAL_ABBREVIATIONS` ("a. C.", "d. C.", "a. m.", "p. m.", "S. A.",
  spaced or not, in that case) keep their inner stop from splitting and end a sentence
  before a capital ("Nació en el 63 a. C. Murió..."), as "EE. UU.",
  "etc.", "Inc.", "Ltd.", "Co." and "Corp." do: those very often close a
  sentence and seldom stand before a name or a number, so they are in
  neither list.
- It does not split inside a quotation that closes later in the text (`«`,
  `“` and `‹` with their closing quotes, and `"` paired from the start of
  the text), to `QUOTATION_LEVELS` levels of quotations inside quotations:
  «Hola. ¿Qué tal?» is one sentence. A stop inside a number ("3.30",
  "1.000") has no whitespace after it, so it never splits.
- A line without final punctuation (its last character, before the line
  break, is not one of `. ! ? …` and closing quotes and brackets after
  them) ends its sentence where the next line starts as a sentence does,
  or with any dash or bullet: a heading over its text, a list of lines,
  "Querido Juan:" over the letter. Where the next line starts otherwise (a
  lower-case letter, as a wrapped line does, or any other character) the
  sentence goes on.
- A blank line (a line break, optional whitespace, another line break) is
  always a boundary, whatever comes before it, an abbreviation or an open
  quotation included. A line break is one of the characters `str.splitlines`
  breaks at, `"\\r\\n"` counting as one.

Separators are the whitespace between sentences, kept exactly (line breaks
included), and the whitespace at the text's two ends.

`ABBREVIATIONS` and `NUMBER_ABBREVIATIONS` (178 abbreviations) were
written for this module from the abbreviations of ordinary text in the
Real Academia Española's Diccionario panhispánico de dudas (appendix 2,
"Lista de abreviaturas convencionales") and the English and Spanish
sentence-break suppressions of Unicode CLDR (`segments/en.xml`, `es.xml`),
keeping those that stand before the name or number they belong to, and
leaving out those that are also a common word at the end of a sentence
("gen.", "ave.", "ft.") or that follow what they abbreviate ("Ave.",
"Rd.", "Hnos.", "min."). Each is matched as a whole word ending in its
stop, in any case.

As `seqtasks.text.pretokenizers` does, the rules are regular-expression
rewrites that insert a mark at each boundary (and take back the marks that
an abbreviation, a quotation or a lower-case line start cancels), written
in the part of the syntax where Python's `re` and RE2
(`tf.strings.regex_replace`) agree: literal characters and ranges in
classes (digits are `0-9` alone, letters those of ASCII, Latin-1, Greek
and Cyrillic), no look-around, no `\\w`, `\\s`, `\\d`,
`\\b` or `$`. They make a fixed number of passes over a text, so the cost
grows with its length alone. The pieces are then cut from the input
itself, so joining a text's separators and sentences in turn gives it back
exactly. `tests/text/test_sentences.py` checks the two engines agree on
thousands of generated strings.
"""

import re

from seqtasks.text.pretokenizers import WHITESPACE

# Abbreviations that do not end a sentence, whatever starts the next word ("Sr." is "señor" and "senior", "St."
# "Saint", "Col." "colonia" and "Colonel").
ABBREVIATIONS = (
    # Titles and forms of address.
    "Sr", "Sra", "Srta", "Sres", "Sras", "Srs", "Srtas", "Dña", "Dr", "Dra", "Dres", "Dras", "Lic", "Lcdo", "Lcda",
    "Ldo", "Lda", "Ing", "Arq", "Prof", "Profa", "Mtro", "Mtra", "Ud", "Uds", "Vd", "Vds", "Excmo", "Excma", "Ilmo",
    "Ilma", "Rvdo", "Rvda", "Pbro", "Mons", "Hno", "Hna", "Sto", "Sta", "Pdte", "Gral", "Cnel", "Tte", "Sgto",
    "Cmdte", "Almte", "Fdo", "Atte",
    "Mr", "Mrs", "Ms", "Mx", "Messrs", "Mmes", "Jr", "St", "Mt", "Fr", "Rev", "Hon", "Sen", "Rep", "Gov", "Pres",
    "Supt", "Capt", "Col", "Maj", "Lt", "Sgt", "Cpl", "Pvt", "Cmdr", "Adm",
    # Addresses, places and a company ("Bs. As.", "EE. UU.": their last part ends a sentence, as "etc." does).
    "Av", "Avd", "Avda", "Blvd", "Calz", "Ctra", "Cra", "Pza", "Plza", "Pje", "Psje", "Urb", "Edif", "Dpto",
    "Depto", "Esq", "Apdo", "Bldg", "Bs", "EE", "Cía",
    # Latin and other references.
    "ej", "vs", "cf", "cfr", "viz", "e.g", "i.e", "Cód",
)
# Abbreviations that do not end a sentence before a digit only: before a capital they are read as ending it.
NUMBER_ABBREVIATIONS = (
    "Art", "Arts", "Núm", "Núms", "Nro", "No", "Nos", "Vol", "Vols", "Fig", "Figs", "Pág", "Págs", "pp", "Cap",
    "Caps", "Chap", "Ch", "Sec", "Secc", "Párr", "Tab", "Lám", "Eq", "Eqs", "Op", "Ref", "Exp", "Tel", "Teléf",
    "Tfno", "Tlf", "Ext", "Apt", "Ste", "Km", "Est", "ca", "aprox", "approx",
    # Months and weekdays: a date's, "5 de ago. 2025", "Jan. 5", "mié. 5"; "de lun. a vie. Cerrado el dom." ends.
    "ene", "feb", "mar", "abr", "may", "jun", "jul", "ago", "sep", "sept", "set", "oct", "nov", "dic", "Jan", "Apr",
    "Aug", "Dec", "lun", "mié", "miér", "jue", "vie", "sáb", "dom", "Mon", "Tue", "Tues", "Wed", "Thu", "Thur",
    "Thurs", "Fri", "Sat", "Sun",
)
# Abbreviations of two single-letter parts, spaced or not and in the case written here (so that initials, "A. C.
# Grayling", are not read as one), whose inner stop does not end a sentence and whose last one may: "63 a. C. Murió".
FINAL_ABBREVIATIONS = (("a", "C"), ("d", "C"), ("a", "m"), ("p", "m"), ("S", "A"), ("S", "L"))

# Private-use characters: the boundary mark, the text's two ends (`$` differs between the engines), a quotation's
# opening and closing, where the text is cut around them, and what a text's own characters of this range are read as.
_MARK, _START, _END, _OPEN, _CLOSE, _CUT, _OTHER = "\ue000", "\ue001", "\ue002", "\ue003", "\ue004", "\ue005", "\ue006"
_RESERVED = "[\ue000-\ue005]"
# Quotations inside quotations, outermost included, whose stops are kept from splitting.
QUOTATION_LEVELS = 3
_ENDS = ".!?\u2026"
_CLOSERS = "\"'\u201d\u2019\u00bb\u203a)\\]"
_OPENERS = "\"'\u201c\u2018\u00ab\u2039(\\[\u00bf\u00a1"
_BULLETS = "*\u2022\u2023\u2043\u25aa\u25cf\u25e6"
# Hyphen-minus, hyphen, non-breaking hyphen, figure dash, en dash, em dash, horizontal bar.
_DASHES = "\\-\u2010-\u2015"
_UPPER = "A-Z\u00c0-\u00d6\u00d8-\u00de\u0386\u0388-\u038f\u0391-\u03a9\u0400-\u042f"
_LOWER = "a-z\u00df-\u00f6\u00f8-\u00ff\u0390\u03ac-\u03ce\u0430-\u045f"
_LETTERS = _UPPER + _LOWER
# The whitespace of `WHITESPACE` split into line breaks (those of `str.splitlines`) and the rest.
_LINE_BREAKS = "\n\v\f\r\x1c-\x1e\x85\u2028\u2029"
_SPACES = "\t \x1f\xa0\u1680\u2000-\u200a\u202f\u205f\u3000"


def _any_case(word):
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in word)


def _alternatives(words):
    return "|".join(_any_case(word) for word in sorted(set(words), key=len, reverse=True))


# What may follow a sentence's final punctuation: whitespace and a character that starts a sentence, a dash not
# followed by a lower-case letter, or a line break and any dash.
_STARTER = f"{_UPPER}0-9{_OPENERS}{_BULLETS}"
_NEXT = (f"[{WHITESPACE}]+(?:[{_STARTER}]|[{_DASHES}][^{_LOWER}])"
         f"|[{_SPACES}]*[{_LINE_BREAKS}][{WHITESPACE}]*[{_DASHES}]")
# Two line breaks with spaces between them, "\r\n" being one (a lone "\r" is one only where "\n" does not follow).
_BLANK_LINE = (f"(?:(?:\r\n|[{_LINE_BREAKS.replace(chr(13), '')}])[{_SPACES}]*|\r[{_SPACES}]+)[{_LINE_BREAKS}]"
               f"|\r[{_LINE_BREAKS.replace(chr(10), '')}]")
_FINAL = "|".join(f"{first}\\.[{WHITESPACE}]*{last}" for first, last in FINAL_ABBREVIATIONS)

_BOUNDARIES = [
    (f"([{_ENDS}]+[{_CLOSERS}]*)({_NEXT})", f"\\1{_MARK}\\2"),
    # The end of a line without final punctuation, then the mark taken back where the next line goes on (one line
    # break, then a character that starts no sentence: a lower-case letter, a comma, the text's end).
    (f"([^{WHITESPACE}{_ENDS}{_CLOSERS}{_START}{_MARK}][{_CLOSERS}]*)([{_SPACES}]*[{_LINE_BREAKS}])",
     f"\\1{_MARK}\\2"),
    (f"{_MARK}([{_SPACES}]*(?:\r\n|[{_LINE_BREAKS}])[{_SPACES}]*[^{WHITESPACE}{_STARTER}{_DASHES}])", "\\1"),
    # Marks taken back after an abbreviation or a single letter, after a number's abbreviation before a digit, and
    # after a numbered list's "1." at the start of a line. The character before the word is kept out of the match's
    # end, so "Sr. Dr. López" loses both marks.
    (f"([^{_LETTERS}])(?:((?:{_alternatives(ABBREVIATIONS)}|[{_LETTERS}])\\.){_MARK}"
     f"|((?:{_alternatives(NUMBER_ABBREVIATIONS)})\\.){_MARK}([{WHITESPACE}]+[0-9]))"
     f"|([{_START}{_LINE_BREAKS}][{_SPACES}]*)([0-9]{{1,3}}\\.){_MARK}", "\\1\\2\\3\\4\\5\\6"),
    # The last part of "a. C." is a single letter, whose mark the rule above took: it is put back.
    (f"([^{_LETTERS}](?:{_FINAL})\\.)({_NEXT})", f"\\1{_MARK}\\2"),
    ('"([^"]*)"', f"{_OPEN}\\1{_CLOSE}"),
    ("[\u00ab\u201c\u2039]", _OPEN),
    ("[\u00bb\u201d\u203a]", _CLOSE),
]
_QUOTE = (f"([{_OPEN}{_CLOSE}])", f"{_CUT}\\1{_CUT}")
# After the quotations: a blank line is a boundary, whatever precedes it.
_BLANK_LINES = (f"([^{WHITESPACE}{_START}{_MARK}])([{_SPACES}]*(?:{_BLANK_LINE}))", f"\\1{_MARK}\\2")
# Marks around every separator: the whitespace between sentences and at the text's two ends.
_PIECES = [
    _BLANK_LINES,
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
    >>> split_sentences("Vivo en EE. UU.\\n\\n—¿Vienes? —Sí, claro.")
    (['Vivo en EE. UU.', '—¿Vienes?', '—Sí, claro.'], ['', '\\n\\n', ' ', ''])
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

    A letter is a character whose upper and lower case differ, a lower-case
    letter one that upper case changes, and a word a run of characters
    between whitespace (`WHITESPACE`: the characters of `str.isspace`) that
    holds at least one letter. A sentence is shouted when it has at least
    two words and no lower-case letter ("EL PERRO ESTÁ EN EL JARDÍN.",
    "¿DÓNDE ESTÁ?", "I AM HERE."); a single word in capitals ("OK.",
    "USA.", "3 PM.", "«3 GATOS»") is read as written, as an acronym or a
    unit is.
    Its sentence case is its lower case with the first letter upper-cased
    ("¿DÓNDE ESTÁ?" -> "¿Dónde está?"); any other sentence is left as it is.

    Args:
        sentence: a `str`.

    Returns:
        `(text, shouted)`: the sentence to read, and whether it was shouted.

    >>> sentence_case("¿DÓNDE ESTÁ?"), sentence_case("3 PM.")
    (('¿Dónde está?', True), ('3 PM.', False))
    """
    if any(c.upper() != c.lower() and c != c.upper() for c in sentence):
        return sentence, False
    words = [word for word in re.split(f"[{WHITESPACE}]", sentence) if any(c.upper() != c.lower() for c in word)]
    if len(words) < 2:
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
    any_lower = tf.reduce_any(characters.with_flat_values(tf.logical_and(letter, tf.not_equal(flat, upper))), axis=1)
    # Two words or more: whitespace between the first letter and the last.
    position, rows = _positions(characters), characters.value_rowids()
    first_letter = tf.reduce_min(characters.with_flat_values(tf.where(letter, position, tf.int64.max)), axis=1)
    last_letter = tf.reduce_max(characters.with_flat_values(tf.where(letter, position, -1)), axis=1)
    space = tf.strings.regex_full_match(flat, f"[{WHITESPACE}]")
    between = tf.logical_and(position > tf.gather(first_letter, rows), position < tf.gather(last_letter, rows))
    words = tf.reduce_any(characters.with_flat_values(tf.logical_and(space, between)), axis=1)
    shouted = tf.logical_and(words, tf.logical_not(any_lower))
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
