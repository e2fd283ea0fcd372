"""How much of one input every export reads: the limits a model card cites.

A request's memory grows with its inputs, so each export bounds them before
the expensive work: a text is cut to `text_character_limit(data.max_length)`
characters before tokenizing, and an image whose header declares more than
`MAX_IMAGE_PIXELS` pixels is refused before decoding.
"""

# Characters of a served text that are read, at least: 10,000 for every recipe of
# `data.max_length` up to 200 tokens.
MAX_TEXT_CHARACTERS = 10_000
# Characters read per token kept (`data.max_length`) for longer limits: far more than a real
# token takes (a WordPiece word longer than 100 bytes is one [UNK]), so the cut only changes
# what is served for texts padded with thousands of blanks.
CHARACTERS_PER_TOKEN = 50
# Sentences of a served text translated each on its own; later ones are read with the last of them, as one
# (cut to `data.max_length` tokens). A 10,000-character text of one-word sentences would otherwise be
# thousands of searches.
MAX_SENTENCES = 64
# Width times height an encoded image may declare; a 48-megapixel photo must be scaled down first.
MAX_IMAGE_PIXELS = 40_000_000


def text_character_limit(max_length):
    """Characters (Unicode code points; an invalid UTF-8 byte counts as one) read of each served text.

    `max(MAX_TEXT_CHARACTERS, CHARACTERS_PER_TOKEN * max_length)`, for the
    recipe's `data.max_length` tokens.
    """
    return max(MAX_TEXT_CHARACTERS, CHARACTERS_PER_TOKEN * max_length)


def cut_text(text, max_length, keep="first"):
    """`text` `[None]` cut to its first (or, with `keep="last"`, last) `text_character_limit(max_length)` characters."""
    import tensorflow as tf

    limit = text_character_limit(max_length)
    if keep == "first":
        return tf.strings.substr(text, 0, limit, unit="UTF8_CHAR")
    start = tf.maximum(0, tf.strings.length(text, unit="UTF8_CHAR") - limit)
    return tf.strings.substr(text, start, tf.fill(tf.shape(start), limit), unit="UTF8_CHAR")
