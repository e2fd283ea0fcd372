"""Pre-tokenizers: raw text -> tokens with character offsets, the same in Python and in a TensorFlow graph.

A pre-tokenizer is a list of regular-expression rewrites that only insert a
boundary mark between characters; tokens are then the runs of characters
that are neither whitespace nor a mark. Since no character of the text is
changed or dropped, every token is a piece of the text, and its offsets are
its position in the marked text less the marks before it. The rules are
written in the part of the syntax where Python's `re` and RE2 (TensorFlow's
`tf.strings.regex_replace`) agree: no look-around, no `\\w`, `\\d`, `\\s` or
`\\b` (whose meaning differs between them: Python's `\\d` takes "٣" and "３"
for digits, RE2's does not), only literal characters and explicit ranges in
classes (`[0-9]`). `tests/text/test_pretokenizers.py` checks the two engines
agree on thousands of generated strings, digits, letters and punctuation
beyond ASCII among them.

Offsets count Unicode code points, as Python's `str` indexes do:
`text[start:end] == token` for every token.

- `whitespace`: split at whitespace only (the exports before recipes named
  a pre-tokenizer).
- `treebank`: the Penn Treebank conventions CoNLL-2003 and SST were made
  with: brackets, quotes, `;!?`, ellipses and dashes (`--`, `—`, `–`) stand
  alone (a quote after a space or an opening bracket opens a word: "(‘Hi’)");
  commas and colons are split off except between digits ("1,000", "3:30");
  the clitics `'s 'm 'd 'll 're 've n't` are split from their word ("does
  n't"); a full stop is split off at the end of the text (before closing
  quotes and brackets) and after three lower-case letters before a capital
  ("... home. Then"), so "U.S.", "Mr.", "vs.", "a.m." and "3.5" stay whole; hyphens stay inside words ("e-mail", "4-55");
  `$ £ € ¥` before and `%` after a number are split off; each emoji stands alone.
- `tweet`: URLs of any scheme (with the brackets they open and close:
  "x_(y)"), e-mail addresses, @mentions, #hashtags, emoticons (":)",
  ";-P", "<3"), emoji, HTML entities ("&lt;", as tweets were collected),
  numbers and words with digits ("10:30", "1,000", "v1.2.3", "web2.0") are
  kept whole; an emoticon is one only before a space, the end, punctuation,
  another emoticon, an emoji, a mention or a hashtag ("going:D" is split,
  "Re:Done" is not); brackets, quotes, `,;!?`, ellipses and a full stop or
  colon before whitespace are split off; `'s` is split off ("sam 's") but
  other contractions stay whole ("I'm", "don't"), as most of WNUT-17's
  training tweets have them.
"""

import re

# Whitespace as Python's `str.isspace` knows it (a regex class body; `seqtasks.text.sentences` reads it too).
WHITESPACE = "\t\n\v\f\r \x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# The boundary mark the rules insert, and the sentinel put around the text so a
# rule can see where it ends without `$` (which differs between the engines).
_MARK = "\ue000"
_EDGE = "\ue001"
# Both are read as whitespace where a text holds them (private-use characters).
_SEPARATORS = WHITESPACE + _MARK + _EDGE
_SEP = f"[{_SEPARATORS}]"
_NONSEP = f"[^{_SEPARATORS}]"
_M = _MARK

_EMOJI = "\U0001f000-\U0001faff\u2600-\u27bf\u2300-\u23ff\u2b00-\u2bff"
_EMOJI_RUN = f"[\U0001f1e6-\U0001f1ff][\U0001f1e6-\U0001f1ff]|[{_EMOJI}][\ufe0f\u20e3\U0001f3fb-\U0001f3ff]*(?:\u200d[{_EMOJI}][\ufe0f]*)*"
# Em and en dashes stand alone too ("Paris—the" -> `Paris` `—` `the`).
_ALONE = "()\\[\\]{}\"\u201c\u201d\u201e\u00ab\u00bb;!?\u00bf\u00a1\u2026\u2014\u2013"
_APOSTROPHE = "'\u2019"
# Latin-1 letters: RE2 and Python disagree on \\p{...}, so the letters beyond ASCII are listed.
_UPPER = "\u00c0-\u00d6\u00d8-\u00de"
_LOWER = "\u00df-\u00f6\u00f8-\u00ff"
# The currency signs split off a number that follows them, as `$` is ("$5", "£5", "€5", "¥5").
_CURRENCY = "$\u00a3\u20ac\u00a5"
# What opens a quotation: a quote right after one of them opens a word, as after a space ("(‘Hello’)").
_OPENERS = "(\\[{\u201c\u201e\u00ab"

_TREEBANK = [
    (f"({_EMOJI_RUN})", f"{_M}\\1{_M}"),
    (f"([{_ALONE}]|\\.\\.+|--+)", f"{_M}\\1{_M}"),
    ("([0-9])(%)", f"\\1{_M}\\2"),
    (f"([{_CURRENCY}])([0-9])", f"\\1{_M}\\2"),
    ("([,:])([^0-9])", f"{_M}\\1{_M}\\2"),
    ("([^0-9])([,:])", f"\\1{_M}\\2{_M}"),
    (f"({_NONSEP})([nN][{_APOSTROPHE}][tT])([^A-Za-z])", f"\\1{_M}\\2\\3"),
    (f"([^{_SEPARATORS}{_APOSTROPHE}])([{_APOSTROPHE}](?:s|S|m|M|d|D|ll|LL|re|RE|ve|VE))([^A-Za-z])", f"\\1{_M}\\2\\3"),
    # A quote closing a word ("players'") or opening one ("'Hello").
    (f"([^{_SEPARATORS}{_APOSTROPHE}\u2018])([{_APOSTROPHE}\u2018]+)([{_SEPARATORS}.,;:!?)\\]}}])", f"\\1{_M}\\2\\3"),
    (f"([{WHITESPACE}{_EDGE}]|[{_OPENERS}]{_M})([{_APOSTROPHE}\u2018`]+)([^{_SEPARATORS}{_APOSTROPHE}\u2018`])",
     f"\\1\\2{_M}\\3"),
    (f"([^{_SEPARATORS}.])(\\.)([{_SEPARATORS}{_APOSTROPHE}\u2018\"\u201d)\\]}}]*{_EDGE})", f"\\1{_M}\\2\\3"),
    (f"([a-z{_LOWER}][a-z{_LOWER}][a-z{_LOWER}])(\\.)([{_SEPARATORS}\"\u201d{_APOSTROPHE})\\]]*[{WHITESPACE}][{_SEPARATORS}]*[A-Z{_UPPER}\"\u201c{_APOSTROPHE}\u00bf\u00a1])",
     f"\\1{_M}\\2\\3"),
]

_PUNCTUATION = ",;!?()\\[\\]{}\"\u201c\u201d\u201e\u00ab\u00bb\u00bf\u00a1\u2026"
# A URL of any scheme ("ftp://", "git+ssh://") or "www.": it holds brackets in balanced pairs ("x_(y)"), so it ends
# before a ")" it did not open ("(see https://a.b)"); an unclosed "(" ends it ("a(b"). It ends before the punctuation
# that follows it.
_PAREN = f"\\([^{_SEPARATORS}()]*\\)"
_URL_LAST = f"[^{_SEPARATORS}.,;:!?()\\[\\]{{}}\"'\u2019\u201d\u2026]"
_URL = (f"(?:[A-Za-z][A-Za-z0-9+-]*://|www\\.)(?:{_PAREN}|[^{_SEPARATORS}()])*"
        f"(?:{_PAREN}|{_URL_LAST}|\\([^{_SEPARATORS}()]*{_URL_LAST})")
_EMAIL = "[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\\.[A-Za-z0-9-]+)+"
_ENTITY = "&[A-Za-z]+;|&#[0-9]+;"
_MENTION = "@[A-Za-z0-9_]+"
_HASHTAG = f"#[^{_SEPARATORS}{_PUNCTUATION}#@.:'\u2019]+"
_EMOTICON = "<3|[:;=][-o'^]?[()\\[\\]dDpPoO/|*3]"
# What may follow an emoticon: a space, the end, punctuation, another emoticon, an emoji, a mention, a hashtag or an
# entity; never a letter or a digit ("Re:Done", "ftp://server", "10:30" hold none).
_AFTER_EMOTICON = (f"[{_SEPARATORS}{_PUNCTUATION}.:;=<'\u2019{_EMOJI}]|{_MENTION}|@|{_HASHTAG}|#|{_ENTITY}|&")
# A word's characters before, between and after its digits (letters of any script, "_", "-", ...): what a version or
# a word with digits is made of ("v1.2.3", "web2.0", "iOS11.2", "10:30", "1,000" are one token each).
_LETTER = f"[^{_SEPARATORS}{_PUNCTUATION}{_EMOJI}0-9.:/'\u2019@#&{_CURRENCY}]"
# Written so that each character has one place in a match: no backtracking beyond one pass per start. (Python's `re`
# still tries each start of a run without spaces afresh, so its time grows with the square of the longest such run;
# RE2's, the graph's, does not.)
_NUMBER_WORD = f"{_LETTER}*[0-9]+(?:{_LETTER}+[0-9]+)*[:.,][0-9]+(?:(?:{_LETTER}+|[:.,])[0-9]+)*"
# An emoticon is marked only before what may follow it (`_AFTER_EMOTICON`), which the match takes too: the rule runs
# twice, for an emoticon right after one ("<3<3", ":):)"). URLs, e-mail addresses, entities, mentions, hashtags and
# numbers are read whole, so no emoticon is found inside them ("?id=3", "&quot;)", "2:3"); the marks go before them,
# as the next rule's do.
_EMOTICONS = (f"({_EMOTICON})({_AFTER_EMOTICON})|({_URL}|{_EMAIL}|{_ENTITY}|{_MENTION}|{_HASHTAG}|{_NUMBER_WORD})",
              f"{_M}\\1{_M}\\2\\3")
_TWEET = [
    _EMOTICONS,
    _EMOTICONS,
    (
        # The emoticons are the ones marked above, kept whole.
        f"({_URL}|{_EMAIL}|{_ENTITY}|{_MENTION}|{_HASHTAG}|{_M}(?:{_EMOTICON}){_M}|{_EMOJI_RUN})"
        f"|([{_PUNCTUATION}]|\\.\\.+)"
        # Numbers and words with digits are matched whole from the start of their word, where the marks go, so no
        # punctuation is split off inside them.
        f"|({_NUMBER_WORD})",
        f"{_M}\\1\\2{_M}\\3",
    ),
    (f"([^{_SEPARATORS}.])([.:])({_SEP})", f"\\1{_M}\\2\\3"),
    # "'s" is split off as WNUT-17's training tweets mostly have it ("sam 's"); "I'm", "don't" stay whole.
    # Only before a space or punctuation: a URL keeps its "'s_page".
    (f"([^{_SEPARATORS}{_APOSTROPHE}])([{_APOSTROPHE}][sS])([{_SEPARATORS}.,;:!?)\\]}}\"])", f"\\1{_M}\\2\\3"),
]

RULES = {"whitespace": [], "treebank": _TREEBANK, "tweet": _TWEET}
PRETOKENIZERS = tuple(RULES)


def _check(name):
    if name not in RULES:
        raise ValueError(f"Expected one of {set(PRETOKENIZERS)}. Received: pretokenizer={name!r}")


def pretokenize(text, name):
    """`[(token, start, end)]` of one text, by the pre-tokenizer `name` (Python's `re`; the reference)."""
    _check(name)
    marked = _EDGE + re.sub(f"[{_MARK}{_EDGE}]", " ", text) + _EDGE
    for pattern, replacement in RULES[name]:
        marked = re.sub(pattern, replacement, marked)
    tokens, inserted, position = [], 0, 0
    for match in re.finditer(f"{_NONSEP}+", marked):
        inserted += sum(1 for c in marked[position : match.start()] if c in (_MARK, _EDGE))
        position = match.start()
        start = match.start() - inserted
        tokens.append((match.group(), start, start + len(match.group())))
    return tokens


def pretokenize_graph(texts, name):
    """`(tokens, starts, ends)` of a `[batch]` string tensor, by the pre-tokenizer `name`, in TensorFlow ops.

    Returns three `[batch, None]` ragged tensors: the tokens (string) and
    each token's start and end (int32) in Unicode characters of its text.
    """
    import tensorflow as tf

    _check(name)
    marked = tf.strings.regex_replace(texts, f"[{_MARK}{_EDGE}]", " ")
    marked = tf.strings.join([_EDGE, marked, _EDGE])
    for pattern, replacement in RULES[name]:
        marked = tf.strings.regex_replace(marked, pattern, replacement)
    # Every separator becomes one space, so the pieces between single spaces keep their character positions.
    # (TensorFlow Text's regex split would do it in one op, but it ends a text at its first NUL character.)
    pieces = tf.strings.split(tf.strings.regex_replace(marked, _SEP, " "), sep=" ")
    lengths = tf.strings.length(pieces, unit="UTF8_CHAR")
    steps = tf.cumsum(lengths.flat_values + 1, exclusive=True)
    positions = steps - tf.gather(steps, tf.gather(pieces.row_starts(), pieces.value_rowids()))
    # Separator k comes after piece k; the marks among them are characters the text does not have.
    separators = tf.strings.unicode_split(tf.strings.regex_replace(marked, f"[^{_SEPARATORS}]", ""), "UTF-8")
    inserted = tf.cast(tf.logical_or(tf.equal(separators, _MARK), tf.equal(separators, _EDGE)), tf.int32)
    marks = tf.cumsum(tf.concat([tf.zeros_like(inserted[:, :1]), inserted], axis=1).to_tensor(), axis=1)
    before = tf.gather(marks, tf.ragged.range(pieces.row_lengths()), batch_dims=1)
    starts = pieces.with_flat_values(positions) - before
    kept = tf.greater(lengths, 0)
    tokens = tf.ragged.boolean_mask(pieces, kept)
    starts = tf.ragged.boolean_mask(starts, kept)
    return tokens, starts, starts + tf.strings.length(tokens, unit="UTF8_CHAR")


# Tokens that attach to the one before (no space) and to the one after, when text is rebuilt from tokens.
_CLOSING = {".", ",", ";", ":", "!", "?", ")", "]", "}", "%", "...", "'s", "'S", "n't", "N'T", "'m", "'M", "'d", "'D",
            "'ll", "'LL", "'re", "'RE", "'ve", "'VE", "'"}
_OPENING = {"(", "[", "{", "$", "\u00a3", "\u20ac", "\u00a5", "``"}
# What follows the apostrophe of a contraction split there ("I ' ve", as WNUT-17's dev tweets have them).
_REMNANTS = {"s", "S", "t", "T", "m", "M", "d", "D", "ll", "LL", "re", "RE", "ve", "VE"}


def detokenize(tokens):
    """`(text, spans)`: tokens joined as a writer would type them, and each token's `(start, end)` in the text.

    The rule, the reverse of the `treebank` pre-tokenizer's: no space before
    closing punctuation (`. , ; : ! ? ) ] } % ...`), the clitics (`'s n't 're`
    ...) and a lone `'`; no space after `( [ { $ £ € ¥`, nor after a lone `'` that
    is followed by the rest of a contraction split at its apostrophe
    (`I ' ve` -> "I've", `don ' t` -> "don't"); a `"` alternately opens (no
    space after) and closes (no space before); one space elsewhere. Used to
    turn a tokenized data set into the raw text a user would send.
    """
    text, spans, glue, quotes = "", [], False, 0
    for index, token in enumerate(tokens):
        closing = token in _CLOSING or (token == '"' and quotes % 2 == 1)
        if text and not glue and not closing:
            text += " "
        spans.append((len(text), len(text) + len(token)))
        text += token
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        glue = token in _OPENING or (token == '"' and quotes % 2 == 0) or (token == "'" and following in _REMNANTS)
        if token == '"':
            quotes += 1
    return text, spans


def agreement(sentences, name):
    """The share of token lists that pre-tokenizer `name` (the graph's, as an export runs it) splits back into
    the same tokens once `detokenize`d: how well it matches the convention a data set was made with."""
    import tensorflow as tf

    if not sentences:
        return 1.0
    tokens, _, _ = pretokenize_graph(tf.constant([detokenize(words)[0] for words in sentences]), name)
    same = sum(row == [word.encode() for word in words] for row, words in zip(tokens.to_list(), sentences))
    return same / len(sentences)
