"""Training text as people type it: transforms of a share of the training examples, drawn afresh every epoch.

A recipe's `data.augment` gives each transform its share. Each epoch every
training example draws anew whether each transform applies to it, from
random numbers set by the recipe's seed, the epoch and the example's index
alone (`draws`), so the same seed and epoch give the same examples and a
resumed run trains on what an uninterrupted one would. Transforms of
sentence pairs (`augment_pairs`, translation):

- `lower_case`: the source lower-cased, the target as it is;
- `upper_case`, `title_case`: source and target upper-cased, or each word's
  first letter upper-cased and the rest lowered ("I'm Hungry.") (a case transform is drawn
  once per example: their shares add up to at most 1);
- `drop_punctuation`: the source without its final `. ! ? …` and without
  its opening `¿ ¡`, the target as it is;
- `strip_accents`: the source without accents and other combining marks
  ("estación" -> "estacion", "ñ" -> "n"), the target as it is;
- `typos`: one typo in the source, a letter dropped, doubled or swapped
  with the next character;
- `join`: the pair joined with the next pairs of the epoch's order (2 to
  `join_max` pairs, drawn uniformly) into one example, as sentences of one
  text ("Tengo hambre. ¿Y tú?"), or, where every part is a statement ending
  in a full stop, as one sentence joined by a comma or the recipe's
  conjunctions ("Tengo hambre y estoy cansado."); the first letter of a
  later part is lowered unless its first word is one the training data
  writes capitalised inside sentences (`capitalised_words`: "Tom", "I").

Where only the source is changed, the target keeps what a reader wants:
"donde esta la estacion" still teaches "Where is the station?". Joining
comes first, then case, punctuation, accents and typos. Tagging
(`augment_tokens`) lower- or upper-cases a share of the sentences, their
tags unchanged (Mayhew et al. 2019, "ner and pos when nothing is
capitalized").

A text with a NUL character keeps its case: TensorFlow's UTF-8 case
conversions end a string at its first NUL.
"""

import collections
import re

# Columns of an example's draws: one uniform number in [0, 1) each.
_CASE, _PUNCTUATION, _ACCENTS, _TYPO, _TYPO_AT, _TYPO_KIND, _JOIN, _JOIN_COUNT, _JOIN_MODE = range(9)
DRAWS = 9
# Examples augmented together: joined partners are the next examples of the same chunk.
_CHUNK = 1024
_FINAL = "[.!?\u2026]+"
_CLOSERS = "\"'\u201d\u2019\u00bb)\\]"
_OPENERS = "\u00bf\u00a1"
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019-][^\W\d_]+)*")
_STOP = re.compile("[.!?\u2026]")


def capitalised_words(texts):
    """Words that `texts` write capitalised inside a sentence at least as often as lower-cased: names, "I".

    A word counts where it is not the first of its text, and not the first
    after `. ! ? …`. Returns a sorted list.
    """
    capitalised, lowered = collections.Counter(), collections.Counter()
    for text in texts:
        previous = None
        for match in _WORD.finditer(text):
            if previous is not None and not _STOP.search(text[previous : match.start()]):
                word = match.group()
                if word[0].isupper():
                    capitalised[word] += 1
                elif word[0].islower():
                    lowered[word.lower()] += 1
            previous = match.end()
    return sorted(word for word, count in capitalised.items() if count >= lowered[word.lower()])


def draws(seed, epoch, size):
    """`[size, DRAWS]` float32 uniform numbers, each example's row set by `seed` and `epoch` alone."""
    import tensorflow as tf

    seeds = tf.stack([tf.constant(seed, tf.int64), tf.cast(epoch, tf.int64)])
    return tf.random.stateless_uniform([size, DRAWS], seed=seeds, dtype=tf.float32)


def _where(mask, change, texts):
    """`texts` with `change` made to the rows where `mask` holds, computed for those rows alone."""
    import tensorflow as tf

    rows = tf.where(mask)
    return tf.tensor_scatter_nd_update(texts, rows, change(tf.gather_nd(texts, rows)))


def _has_nul(texts):
    import tensorflow as tf

    return tf.strings.regex_full_match(texts, "(?s).*\x00.*")


def _lower(texts):
    import tensorflow as tf

    return tf.where(_has_nul(texts), texts, tf.strings.lower(texts, encoding="utf-8"))


def _upper(texts):
    import tensorflow as tf

    return tf.where(_has_nul(texts), texts, tf.strings.upper(texts, encoding="utf-8"))


def _characters(texts):
    """`(characters, cased, first)`: the texts' characters `[n, None]`, whether each is a cased letter, and
    whether it is the first character of its row."""
    import tensorflow as tf

    characters = tf.strings.unicode_split(texts, "UTF-8")
    flat = characters.flat_values
    cased = tf.not_equal(tf.strings.upper(flat, encoding="utf-8"), tf.strings.lower(flat, encoding="utf-8"))
    index = tf.range(tf.size(flat, out_type=tf.int64))
    first = tf.equal(index, tf.gather(characters.row_starts(), characters.value_rowids()))
    return characters, cased, first


def title_case(texts):
    """Each word's first letter upper-cased and its other letters lowered (a word: a run of cased letters and
    apostrophes, "I'm")."""
    import tensorflow as tf

    characters, cased, first = _characters(_lower(texts))
    flat = characters.flat_values
    inside = tf.logical_or(cased, tf.strings.regex_full_match(flat, "['\u2019]"))
    previous = tf.concat([[False], inside[:-1]], 0)
    starts = tf.logical_and(cased, tf.logical_or(first, tf.logical_not(previous)))
    flat = tf.where(starts, tf.strings.upper(flat, encoding="utf-8"), flat)
    titled = tf.strings.reduce_join(characters.with_flat_values(flat), axis=1)
    return tf.where(_has_nul(texts), texts, titled)


def lower_first_letter(texts):
    """The first cased letter of each text lowered ("¿Vienes?" -> "¿vienes?")."""
    import tensorflow as tf

    characters, cased, _ = _characters(texts)
    flat = characters.flat_values
    counts = tf.cumsum(characters.with_flat_values(tf.cast(cased, tf.int32)), axis=1).flat_values
    target = tf.logical_and(cased, tf.equal(counts, 1))
    flat = tf.where(target, tf.strings.lower(flat, encoding="utf-8"), flat)
    return tf.where(_has_nul(texts), texts, tf.strings.reduce_join(characters.with_flat_values(flat), axis=1))


def drop_punctuation(texts):
    """The texts without their final `. ! ? …` (closing quotes and brackets after it kept) nor `¿ ¡`."""
    import tensorflow as tf

    texts = tf.strings.regex_replace(texts, f"[{_OPENERS}]", "")
    texts = tf.strings.regex_replace(texts, f"[ ]*{_FINAL}([{_CLOSERS}]*)[ ]*$", "\\1")
    return tf.strings.strip(texts)


def strip_accents(texts):
    """The texts without combining marks: NFD, the marks (`\\p{Mn}`) dropped, NFC."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    decomposed = tf_text.normalize_utf8(texts, "NFD")
    return tf_text.normalize_utf8(tf.strings.regex_replace(decomposed, "\\p{Mn}", ""), "NFC")


def typo(texts, at, kind):
    """One typo in each text: at its letter number `floor(at * letters)`, by `kind` in [0, 1): below 1/3 the
    letter is dropped, below 2/3 doubled, else swapped with the character after it (doubled when it is the last).
    A text without a letter is kept."""
    import tensorflow as tf

    characters, cased, _ = _characters(texts)
    flat, rows = characters.flat_values, characters.value_rowids()
    letters = tf.reduce_sum(characters.with_flat_values(tf.cast(cased, tf.int32)), axis=1)
    chosen = tf.minimum(tf.cast(at * tf.cast(letters, tf.float32), tf.int32), tf.maximum(letters - 1, 0))
    number = tf.cumsum(characters.with_flat_values(tf.cast(cased, tf.int32)), axis=1, exclusive=True).flat_values
    here = tf.logical_and(cased, tf.equal(number, tf.gather(chosen, rows)))
    row_kind = tf.gather(kind, rows)
    index = tf.range(tf.size(flat, out_type=tf.int64))
    last = tf.equal(index, tf.gather(characters.row_limits(), rows) - 1)
    swap = tf.logical_and(here, tf.logical_and(row_kind >= 2 / 3, tf.logical_not(last)))
    # A swap takes the next character here and this one there.
    swapped_in = tf.concat([[False], swap[:-1]], 0)
    order = tf.where(swap, index + 1, tf.where(swapped_in, index - 1, index))
    flat = tf.gather(flat, order)
    repeats = tf.where(tf.logical_and(here, row_kind < 1 / 3), 0, 1)
    repeats = tf.where(tf.logical_and(here, tf.logical_and(row_kind >= 1 / 3, tf.logical_not(swap))), 2, repeats)
    kept = tf.repeat(flat, repeats)
    new_rows = tf.repeat(rows, repeats)
    rebuilt = tf.RaggedTensor.from_value_rowids(kept, new_rows, nrows=characters.nrows())
    return tf.strings.reduce_join(rebuilt, axis=1)


def _tokens_of(texts, changed, ids, tokenize):
    """Ragged `ids` of `texts` `[n]`, those of the `changed` texts tokenized anew (the others' are `ids`')."""
    import tensorflow as tf

    rows = tf.where(changed)[:, 0]
    fresh = tf.cast(tokenize(tf.gather(texts, rows)), ids.dtype)
    size = tf.shape(texts, out_type=tf.int64)[0]
    pick = tf.where(changed, size + tf.cumsum(tf.cast(changed, tf.int64), exclusive=True), tf.range(size))
    return tf.gather(tf.concat([ids, fresh], 0), pick)


def _ends_with_stop(texts):
    import tensorflow as tf

    return tf.strings.regex_full_match(texts, f"(?s).*[^.!?\u2026]\\.[{_CLOSERS}]*")


def _first_word(texts):
    import tensorflow as tf

    return tf.strings.regex_replace(texts, "(?s)^[^\\pL]*(\\pL[\\pL\\pM'\u2019-]*).*$", "\\1")


def _names_table(words):
    import tensorflow as tf

    keys = tf.constant(list(words) or [""], tf.string)
    values = tf.ones([len(list(words)) or 1], tf.int32) if words else tf.zeros([1], tf.int32)
    return tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, values), default_value=0)


def _later_part(texts, names):
    """A part joined after another in one sentence: its first letter lowered unless its first word is a name."""
    import tensorflow as tf

    is_name = tf.equal(names.lookup(_first_word(texts)), 1)
    return tf.where(is_name, texts, lower_first_letter(texts))


def _without_stop(texts):
    import tensorflow as tf

    return tf.strings.regex_replace(texts, f"\\.([{_CLOSERS}]*)$", "\\1")


class PairAugmenter:
    """The transforms of a recipe's `data.augment` for sentence pairs (translation); see the module.

    Args:
        config: the recipe's `data.augment` (shares, `join_max`, `conjunctions`).
        seed: the recipe's seed.
        source_names, target_names: words kept capitalised at the start of a
            joined part (`capitalised_words` of each side's training texts).
    """

    def __init__(self, config, seed, source_names=(), target_names=()):
        self.config = config
        self.seed = seed
        self.source_names = list(source_names)
        self.target_names = list(target_names)
        self._tables = None

    @property
    def joins(self):
        """Most pairs one training example holds."""
        return self.config.join_max if self.config.join > 0 else 1

    def _names(self):
        if self._tables is None:
            self._tables = (_names_table(self.source_names), _names_table(self.target_names))
        return self._tables

    def __call__(self, draws, sources, targets):
        """`(sources, targets)` `[n]` transformed by `draws` `[n, DRAWS]` (`draws`' rows for these examples)."""
        import tensorflow as tf

        c = self.config
        if c.join > 0:
            sources, targets = self._join(draws, sources, targets)
        case = draws[:, _CASE]
        lower = case < c.lower_case
        upper = tf.logical_and(case >= c.lower_case, case < c.lower_case + c.upper_case)
        title = tf.logical_and(case >= c.lower_case + c.upper_case, case < c.lower_case + c.upper_case + c.title_case)
        for share, mask, change, both in ((c.upper_case, upper, _upper, True), (c.title_case, title, title_case, True),
                                          (c.lower_case, lower, _lower, False)):
            if share > 0:
                sources = _where(mask, change, sources)
                targets = _where(mask, change, targets) if both else targets
        if c.drop_punctuation > 0:
            sources = _where(draws[:, _PUNCTUATION] < c.drop_punctuation, drop_punctuation, sources)
        if c.strip_accents > 0:
            sources = _where(draws[:, _ACCENTS] < c.strip_accents, strip_accents, sources)
        if c.typos > 0:
            rows = tf.where(draws[:, _TYPO] < c.typos)
            typed = typo(tf.gather_nd(sources, rows), tf.gather_nd(draws[:, _TYPO_AT], rows),
                         tf.gather_nd(draws[:, _TYPO_KIND], rows))
            sources = tf.tensor_scatter_nd_update(sources, rows, typed)
        return sources, targets

    def _join(self, draws, sources, targets):
        import tensorflow as tf

        c = self.config
        source_names, target_names = self._names()
        # Only the rows that join are computed: each with the rows after it (the chunk's first ones after its last).
        rows = tf.where(draws[:, _JOIN] < c.join)[:, 0]
        draws = tf.gather(draws, rows)
        count = 2 + tf.minimum(tf.cast(draws[:, _JOIN_COUNT] * (c.join_max - 1), tf.int32), c.join_max - 2)
        modes = 3 if c.conjunctions else 2
        mode = tf.minimum(tf.cast(draws[:, _JOIN_MODE] * modes, tf.int32), modes - 1)
        size = tf.size(sources, out_type=tf.int64)
        parts = [(tf.gather(sources, (rows + shift) % size), tf.gather(targets, (rows + shift) % size))
                 for shift in range(c.join_max)]
        # One sentence only where every part of the join is a statement ending in a full stop, on both sides.
        statements = [tf.logical_and(_ends_with_stop(s), _ends_with_stop(t)) for s, t in parts]
        every = tf.math.cumprod(tf.cast(tf.stack(statements, 1), tf.int32), axis=1)
        one_sentence = tf.logical_and(mode > 0, tf.equal(tf.gather(every, count - 1, batch_dims=1), 1))
        if c.conjunctions:
            source_word, target_word = c.conjunctions
            source_glue = tf.where(mode == 2, f" {source_word} ", ", ")
            target_glue = tf.where(mode == 2, f" {target_word} ", ", ")
        else:
            source_glue = target_glue = tf.constant(", ")
        source, target = parts[0]
        for shift, (part_source, part_target) in enumerate(parts[1:], start=1):
            in_sentence_source = _without_stop(source) + source_glue + _later_part(part_source, source_names)
            in_sentence_target = _without_stop(target) + target_glue + _later_part(part_target, target_names)
            takes = count > shift
            source = tf.where(takes, tf.where(one_sentence, in_sentence_source, source + " " + part_source), source)
            target = tf.where(takes, tf.where(one_sentence, in_sentence_target, target + " " + part_target), target)
        rows = rows[:, None]
        return tf.tensor_scatter_nd_update(sources, rows, source), tf.tensor_scatter_nd_update(targets, rows, target)

    def epochs(self, size, tokenize_source, tokenize_target):
        """The `per_epoch(elements, epoch)` of `seqtasks.data.batching.bucketed_batches` for `(index, source,
        target, source_ids, target_ids)` elements, each pair with its tokens: the epoch's draws transform the
        pairs, and only the texts they change are tokenized again (`tokenize_*`: `[n]` strings to ragged ids).
        Returns `(source_ids, target_ids)` elements."""
        import tensorflow as tf

        def per_epoch(elements, epoch):
            table = draws(self.seed, epoch, size)

            def chunk(index, sources, targets, source_ids, target_ids):
                new_sources, new_targets = self(tf.gather(table, index), sources, targets)
                return (_tokens_of(new_sources, tf.not_equal(new_sources, sources), source_ids, tokenize_source),
                        _tokens_of(new_targets, tf.not_equal(new_targets, targets), target_ids, tokenize_target))

            batched = elements.ragged_batch(_CHUNK)
            return batched.map(chunk, num_parallel_calls=tf.data.AUTOTUNE).unbatch()

        return per_epoch


class TokenAugmenter:
    """The transforms of a recipe's `data.augment` for tagged token lists (NER): a share of the sentences
    lower-cased, another upper-cased, tags unchanged.

    Args:
        config: the recipe's `data.augment` (`lower_case`, `upper_case`).
        seed: the recipe's seed.
    """

    def __init__(self, config, seed):
        self.config = config
        self.seed = seed

    def __call__(self, draws, tokens):
        """Ragged string `tokens` `[n, None]` (or dense `[n, T]`) transformed by `draws` `[n, DRAWS]`."""
        import tensorflow as tf

        c = self.config
        case = draws[:, _CASE]
        lower = case < c.lower_case
        upper = tf.logical_and(case >= c.lower_case, case < c.lower_case + c.upper_case)
        if isinstance(tokens, tf.RaggedTensor):
            rows = tokens.value_rowids()
            flat = tokens.flat_values
            flat = tf.where(tf.gather(lower, rows), _lower(flat), flat)
            flat = tf.where(tf.gather(upper, rows), _upper(flat), flat)
            return tokens.with_flat_values(flat)
        tokens = tf.where(lower[:, None], _lower(tokens), tokens)
        return tf.where(upper[:, None], _upper(tokens), tokens)

    def epochs(self, size):
        """The `per_epoch(elements, epoch)` of `bucketed_batches` for `(index, tokens, tags)` elements."""
        import tensorflow as tf

        def per_epoch(elements, epoch):
            table = draws(self.seed, epoch, size)

            def one(index, tokens, tags):
                return self(tf.gather(table, index)[None], tokens[None])[0], tags

            return elements.map(one, num_parallel_calls=tf.data.AUTOTUNE)

        return per_epoch
