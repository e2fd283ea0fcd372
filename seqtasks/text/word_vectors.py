"""Pretrained word vectors (GloVe, word2vec text, fastText `.vec`) as an embedding matrix for any vocabulary.

The file is read once, line by line, plain or gzip: only the rows the
vocabulary asks for are kept, so a 400,000 x 300 file needs a few MB, not
several GB. A vocabulary word takes, as the NER literature matches words
(Lample et al. 2016), the file's vector of the word itself, else of the word
lower-cased, else lower-cased with every digit read as 0; a vocabulary word
that is itself lower-cased or reads digits as 0 ("german", "0000") takes
the first file word that does ("German", "1990": the most frequent in the
file's order) unless the file has it as it is. Words the file does
not have start from a small random vector of the file's scale (the standard
deviation of the vectors kept). A word2vec or fastText header line
(`count dim`) is skipped; a line of another length, or numbers that are not
numbers, is an error naming the file and line.

>>> matrix, coverage = embedding_matrix("glove.6B.50d.txt.gz", ["[PAD]", "[UNK]", "the", "Paris"],
...                                     reserved=2)  # doctest: +SKIP
>>> matrix.shape, coverage.found  # doctest: +SKIP
((4, 50), 2)
"""

import gzip
import io
import re
from dataclasses import asdict, dataclass

import numpy as np

from seqtasks.errors import SeqtasksError
from seqtasks.utils.regular_files import open_regular_file, reading_errors

MAX_VECTORS_BYTES = 64 * 1024**3
# The rows of a matrix for reserved entries (padding, unknown words) are zeros: padding is masked, and an
# unknown word has no meaning of its own to start from.
_DIGIT = re.compile(r"\d")


@dataclass
class Coverage:
    """How much of a vocabulary (and of the tokens it was counted on) a vectors file covers.

    Attributes:
        file: the vectors file.
        dimension: its vectors' size.
        words: vocabulary entries asked for (reserved ones left out).
        found: of them, those the file has a vector for; `exact`, `lower`
            and `digits` count them by how they matched.
        tokens, tokens_found: with token counts given, the training tokens
            and those of words found.
        scale: the standard deviation of the vectors kept: the scale of the
            random start of the words not found.
    """

    file: str
    dimension: int
    words: int
    found: int
    exact: int
    lower: int
    digits: int
    tokens: int = 0
    tokens_found: int = 0
    scale: float = 0.0

    @property
    def word_rate(self):
        return self.found / self.words if self.words else 0.0

    @property
    def token_rate(self):
        return self.tokens_found / self.tokens if self.tokens else 0.0

    def as_json(self):
        return {**asdict(self), "word_rate": round(self.word_rate, 4), "token_rate": round(self.token_rate, 4)}

    def describe(self):
        line = (f"Word vectors: {self.file} ({self.dimension} dimensions) cover {self.found:,} of {self.words:,} "
                f"vocabulary words ({100 * self.word_rate:.1f}%")
        if self.tokens:
            line += f"; {100 * self.token_rate:.1f}% of the training tokens"
        return line + f"; {self.exact:,} exact, {self.lower:,} lower-cased, {self.digits:,} with digits as 0)"


def candidates(word):
    """The file words that may stand for `word`, best first: itself, lower-cased, lower-cased with digits as 0."""
    lower = word.lower()
    return word, lower, _DIGIT.sub("0", lower)


def embedding_matrix(path, vocabulary, reserved=0, counts=None, dimension=None, seed=0):
    """`(matrix, coverage)`: a float32 `(len(vocabulary), dim)` matrix whose row `i` is `vocabulary[i]`'s vector.

    Args:
        path: the vectors file: `word v1 ... vD` a line, plain or gzip,
            optionally after a `count dim` header line.
        vocabulary: the words, in row order.
        reserved: how many first rows are reserved entries (padding,
            unknown words): zeros, not looked up.
        counts: optional `{word: training count}` for the token coverage.
        dimension: the size the model expects; a file of another is an error.
        seed: the seed of the random rows of words the file does not have.

    Returns:
        The matrix and a `Coverage`.
    """
    wanted, by_word = {}, {}
    for index, word in enumerate(vocabulary[reserved:], start=reserved):
        for level, key in enumerate(candidates(word)):
            wanted.setdefault(key, []).append((index, level))
        by_word.setdefault(word, []).append(index)
    rows, levels, size = {}, {}, None
    for parts, number in _read(path):
        if size is None:
            size = len(parts) - 1
            if dimension is not None and size != dimension:
                raise SeqtasksError(f"{path}: vectors of {size} dimensions; the model's embeddings have {dimension}")
        elif len(parts) - 1 < size:
            raise SeqtasksError(f"{path}:{number}: expected {size} numbers after the word; got {len(parts) - 1}")
        # A few words of some files hold spaces ("at name@domain.com" in GloVe 840B): the numbers are the last.
        word, values = " ".join(parts[:-size]), parts[-size:]
        found = list(wanted.get(word, ()))
        # A vocabulary read lower-cased (and digits as 0) takes a cased file's first "German" ("1990").
        _, lower, digits = candidates(word)
        for level, key in ((3, lower), (4, digits)):
            if key != word:
                found += [(index, level) for index in by_word.get(key, ())]
        for index, level in found:
            if level < levels.get(index, 5):
                rows[index], levels[index] = _numbers(values, path, number), level
    if size is None:
        raise SeqtasksError(f"{path}: no vectors in the file")
    kept = np.stack(list(rows.values())) if rows else np.zeros((0, size), np.float32)
    scale = float(kept.std()) if len(kept) else 0.1
    matrix = np.random.default_rng(seed).normal(0.0, scale, (len(vocabulary), size)).astype(np.float32)
    matrix[:reserved] = 0.0
    for index, row in rows.items():
        matrix[index] = row
    exact, lower, digits = (sum(1 for level in levels.values() if level in group) for group in ({0}, {1, 3}, {2, 4}))
    coverage = Coverage(
        str(path), size, len(vocabulary) - reserved, len(rows), exact, lower, digits, scale=round(scale, 6)
    )
    if counts:
        coverage.tokens = sum(counts.values())
        coverage.tokens_found = sum(counts.get(vocabulary[index], 0) for index in rows)
    return matrix, coverage


def first_words(path, count):
    """The words of the first `count` vectors of the file (GloVe's and fastText's are the most frequent first)."""
    import itertools

    words = []
    for parts, number in itertools.islice(_read(path), count):
        words.append(parts[0])
    return words


def _numbers(values, path, number):
    try:
        row = np.array(values, dtype=np.float32)
    except ValueError:
        raise SeqtasksError(f"{path}:{number}: expected numbers after the word") from None
    if not np.isfinite(row).all():
        raise SeqtasksError(f"{path}:{number}: a value that is not a finite number")
    return row


def _read(path):
    """`(the line's fields, line number)` of each vector line; a `count dim` first line is skipped."""
    with reading_errors(path, "word vectors file", "a word vectors file"):
        raw = open_regular_file(path, MAX_VECTORS_BYTES, "a word vectors file")
    with raw:
        magic = raw.read(2)
        raw.seek(0)
        stream = gzip.open(raw, "rt", encoding="utf-8", newline="\n") if magic == b"\x1f\x8b" else None
        if stream is None:
            stream = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
        try:
            for number, line in enumerate(stream, 1):
                parts = line.rstrip().split(" ")
                if number == 1 and len(parts) == 2 and all(part.isdigit() for part in parts):
                    continue  # word2vec / fastText: "count dim"
                if len(parts) < 2 or not parts[0]:
                    raise SeqtasksError(f"{path}:{number}: expected a word and its numbers, separated by spaces")
                yield parts, number
        except (UnicodeDecodeError, EOFError, OSError, gzip.BadGzipFile) as error:
            raise SeqtasksError(f"{path}: cannot read the vectors: {error}") from None


__all__ = ["Coverage", "candidates", "embedding_matrix", "first_words"]
