"""Pretrained word vectors read into an embedding matrix: formats, matching, coverage, errors, memory."""

import gzip
import re
import tracemalloc

import numpy as np
import pytest

from seqtasks.errors import SeqtasksError
from seqtasks.text import word_vectors
from seqtasks.text.word_vectors import candidates, embedding_matrix, first_words

GLOVE = "the 0.1 0.2 0.3\nparis 1 2 3\nfrance -1 -2 -3\n1990 4 5 6\n0000 7 8 9\n"


def _write(tmp_path, text, name="vectors.txt", compress=False):
    path = tmp_path / name
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def test_rows_follow_the_vocabulary_and_reserved_rows_are_zeros(tmp_path):
    path = _write(tmp_path, GLOVE)
    matrix, coverage = embedding_matrix(path, ["[PAD]", "[UNK]", "paris", "the", "unseen"], reserved=2, seed=3)
    assert matrix.shape == (5, 3) and matrix.dtype == np.float32
    np.testing.assert_array_equal(matrix[:2], 0.0)
    np.testing.assert_allclose(matrix[2], [1, 2, 3])
    np.testing.assert_allclose(matrix[3], [0.1, 0.2, 0.3])
    kept = np.array([[1, 2, 3], [0.1, 0.2, 0.3]], np.float32)
    assert coverage.scale == pytest.approx(float(kept.std()), rel=1e-5)
    assert 0 < np.abs(matrix[4]).max() < 10 * kept.std()  # a small random start of the file's scale
    again, _ = embedding_matrix(path, ["[PAD]", "[UNK]", "paris", "the", "unseen"], reserved=2, seed=3)
    np.testing.assert_array_equal(matrix, again)
    assert (coverage.words, coverage.found, coverage.dimension) == (3, 2, 3)


def test_words_match_exactly_then_lower_cased_then_with_digits_as_zero(tmp_path):
    # "Paris" appears lower-cased first and exactly later: the exact line wins wherever it stands.
    path = _write(tmp_path, "paris 1 1 1\nParis 2 2 2\nfrance 3 3 3\n0000 4 4 4\n1999 5 5 5\n")
    words = ["Paris", "France", "1990", "1999", "Zzz"]
    matrix, coverage = embedding_matrix(path, words)
    np.testing.assert_allclose(matrix[:4], [[2, 2, 2], [3, 3, 3], [4, 4, 4], [5, 5, 5]])
    assert (coverage.exact, coverage.lower, coverage.digits, coverage.found) == (2, 1, 1, 4)
    assert candidates("Año-1990") == ("Año-1990", "año-1990", "año-0000")
    # A vocabulary that itself reads digits as 0 takes the first such file word; its own "0000" line wins.
    path = _write(tmp_path, "1990 1 1 1\n1991 2 2 2\nx9 3 3 3\n", "numbers.txt")
    matrix, coverage = embedding_matrix(path, ["0000", "x0", "00"])
    np.testing.assert_allclose(matrix[:2], [[1, 1, 1], [3, 3, 3]])
    assert (coverage.found, coverage.digits) == (2, 2)
    path = _write(tmp_path, "1990 1 1 1\n0000 5 5 5\n", "zeros.txt")
    np.testing.assert_allclose(embedding_matrix(path, ["0000"])[0], [[5, 5, 5]])
    # A lower-cased vocabulary and a cased file: the first cased line stands in, a lower-cased one wins.
    path = _write(tmp_path, "German 1 1 1\nGERMAN 2 2 2\nBerlin 3 3 3\nberlin 4 4 4\nRoute66 5 5 5\n", "cased.txt")
    matrix, coverage = embedding_matrix(path, ["german", "berlin", "route00"])
    np.testing.assert_allclose(matrix, [[1, 1, 1], [4, 4, 4], [5, 5, 5]])
    assert (coverage.exact, coverage.lower, coverage.digits) == (1, 1, 1)


@pytest.mark.parametrize("header, compress, name", [
    ("", False, "glove.txt"),
    ("5 3\n", False, "word2vec.txt"),  # word2vec text: a "count dim" first line
    ("5 3\n", True, "wiki.en.vec.gz"),  # fastText .vec, gzip
    ("", True, "glove.txt.gz"),
])
def test_glove_word2vec_and_fasttext_files_plain_or_gzip(tmp_path, header, compress, name):
    path = _write(tmp_path, header + GLOVE, name, compress)
    matrix, coverage = embedding_matrix(path, ["france", "the"], dimension=3)
    np.testing.assert_allclose(matrix, [[-1, -2, -3], [0.1, 0.2, 0.3]])
    assert coverage.found == 2


def test_coverage_of_the_vocabulary_and_of_the_training_tokens(tmp_path):
    path = _write(tmp_path, GLOVE)
    vocabulary = ["[PAD]", "the", "paris", "rare"]
    _, coverage = embedding_matrix(path, vocabulary, reserved=1, counts={"the": 90, "paris": 6, "rare": 4})
    assert (coverage.words, coverage.found, coverage.tokens, coverage.tokens_found) == (3, 2, 100, 96)
    assert coverage.word_rate == pytest.approx(2 / 3) and coverage.token_rate == pytest.approx(0.96)
    summary = coverage.as_json()
    assert summary["word_rate"] == 0.6667 and summary["token_rate"] == 0.96 and summary["file"] == str(path)
    assert coverage.describe() == (
        f"Word vectors: {path} (3 dimensions) cover 2 of 3 vocabulary words (66.7%; 96.0% of the training "
        "tokens; 2 exact, 0 lower-cased, 0 with digits as 0)"
    )


def test_a_word_with_spaces_keeps_its_numbers_last(tmp_path):
    path = _write(tmp_path, "the 1 2 3\nat name@domain.com 4 5 6\n")
    matrix, _ = embedding_matrix(path, ["at name@domain.com"])
    np.testing.assert_allclose(matrix, [[4, 5, 6]])


@pytest.mark.parametrize("text, dimension, message", [
    ("", None, "{path}: no vectors in the file"),
    ("5 3\n", None, "{path}: no vectors in the file"),
    (GLOVE, 50, "{path}: vectors of 3 dimensions; the model's embeddings have 50"),
    ("the 1 2 3\nparis 1 2\n", None, "{path}:2: expected 3 numbers after the word; got 2"),
    ("the 1 2 3\nparis 1 x 3\n", None, "{path}:2: expected numbers after the word"),
    ("the 1 2 3\nparis 1 nan 3\n", None, "{path}:2: a value that is not a finite number"),
    ("the 1 2 3\n\n", None, "{path}:2: expected a word and its numbers, separated by spaces"),
    ("the 1 2 3\nparis\n", None, "{path}:2: expected a word and its numbers, separated by spaces"),
    ("the 1 2 3\n 4 5 6\n", None, "{path}:2: expected a word and its numbers, separated by spaces"),
    ("the\t1\t2\t3\n", None, "{path}:1: expected a word and its numbers, separated by spaces"),
    ("the 1 2 3\nparis 1 2 3X\n", None, "{path}:2: expected numbers after the word"),
])
def test_a_file_that_is_not_vectors_is_a_one_line_error_naming_file_and_line(tmp_path, text, dimension, message):
    path = _write(tmp_path, text)
    with pytest.raises(SeqtasksError) as raised:
        embedding_matrix(path, ["paris", "the"], dimension=dimension)
    assert str(raised.value) == message.format(path=path)


def test_files_that_cannot_be_read_are_named(tmp_path):
    absent = tmp_path / "absent.txt"
    with pytest.raises(SeqtasksError, match=f"^{re.escape(str(absent))}: no such word vectors file$"):
        embedding_matrix(absent, ["the"])
    with pytest.raises(SeqtasksError, match=f"^{re.escape(str(tmp_path))}: is a folder, expected a word vectors file$"):
        embedding_matrix(tmp_path, ["the"])
    broken = tmp_path / "broken.txt.gz"
    broken.write_bytes(gzip.compress(GLOVE.encode())[:30])
    with pytest.raises(SeqtasksError, match=f"^{broken}: cannot read the vectors"):
        embedding_matrix(broken, ["the"])
    latin = _write(tmp_path, "caf\xe9 1 2 3\n")
    latin.write_bytes("café 1 2 3\n".encode("latin-1"))
    with pytest.raises(SeqtasksError, match="cannot read the vectors"):
        embedding_matrix(latin, ["café"])


def test_a_file_over_the_size_limit_is_refused_before_reading(tmp_path, monkeypatch):
    path = _write(tmp_path, GLOVE)
    monkeypatch.setattr(word_vectors, "MAX_VECTORS_BYTES", 10)
    with pytest.raises(SeqtasksError) as raised:
        embedding_matrix(path, ["the"])
    assert str(raised.value) == f"{path}: {len(GLOVE)} bytes, more than the 10 bytes a word vectors file may have"


@pytest.mark.parametrize("compress", [False, True])
def test_lines_end_at_newlines_only_and_trailing_spaces_and_carriage_returns_are_dropped(tmp_path, compress):
    # fastText ends its lines with a space, Windows files with "\r\n"; a lone "\r" or a no-break space is part
    # of a word (web-crawled files have such words), not a line or field separator.
    text = "the 1 2 3 \r\nparis 4 5 6 \na\rb 7 8 9\nc\xa0d 1 1 1\n"
    path = _write(tmp_path, text, "vectors.txt.gz" if compress else "vectors.txt", compress)
    matrix, coverage = embedding_matrix(path, ["the", "paris", "a\rb", "c\xa0d"], dimension=3)
    np.testing.assert_allclose(matrix, [[1, 2, 3], [4, 5, 6], [7, 8, 9], [1, 1, 1]])
    assert coverage.found == 4


def test_any_whitespace_that_ends_a_line_is_dropped_not_read_as_a_field(tmp_path):
    # Left in place, a tab after the last number made the header a one-number vector line (and so every
    # vector one-dimensional), and silently moved the word's first number into the word.
    path = _write(tmp_path, "2 3\t\nthe 1 2 3\nparis 4 5 6 \t\n")
    matrix, coverage = embedding_matrix(path, ["paris", "the"])
    np.testing.assert_allclose(matrix, [[4, 5, 6], [1, 2, 3]])
    assert (coverage.dimension, coverage.found) == (3, 2)


@pytest.mark.parametrize("compress", [False, True])
def test_files_are_read_as_utf_8_whatever_the_locale(tmp_path, ascii_locale, compress):
    path = _write(tmp_path, "café 1 2 3\nnaïve 4 5 6\n", "vectors.txt.gz" if compress else "vectors.txt", compress)
    matrix, coverage = embedding_matrix(path, ["naïve", "café"])
    np.testing.assert_allclose(matrix, [[4, 5, 6], [1, 2, 3]])
    assert coverage.exact == 2


def test_vectors_of_one_dimension(tmp_path):
    path = _write(tmp_path, "the 0.5\nparis -1\n")
    matrix, coverage = embedding_matrix(path, ["paris", "the"], dimension=1)
    np.testing.assert_allclose(matrix, [[-1], [0.5]])
    assert (coverage.dimension, coverage.found) == (1, 2)


def test_a_file_without_any_vocabulary_word_starts_every_row_small_and_centred(tmp_path):
    path = _write(tmp_path, GLOVE)
    vocabulary = ["[PAD]"] + [f"unseen{index}" for index in range(400)]
    matrix, coverage = embedding_matrix(path, vocabulary, reserved=1)
    assert (coverage.found, coverage.scale) == (0, 0.1)  # no vectors kept: a scale of 0.1
    assert matrix.shape == (401, 3)
    np.testing.assert_array_equal(matrix[0], 0.0)
    # 1,200 draws of N(0, 0.1): their mean is within 0.02 of 0 and their deviation within 10% of 0.1.
    assert abs(matrix[1:].mean()) < 0.02
    assert matrix[1:].std() == pytest.approx(0.1, rel=0.1)


def test_the_default_seed_is_zero(tmp_path):
    path = _write(tmp_path, GLOVE)
    vocabulary = ["paris", "unseen", "other"]
    np.testing.assert_array_equal(embedding_matrix(path, vocabulary)[0], embedding_matrix(path, vocabulary, seed=0)[0])
    assert not np.array_equal(embedding_matrix(path, vocabulary)[0], embedding_matrix(path, vocabulary, seed=1)[0])


def test_matches_are_counted_by_how_they_matched(tmp_path):
    # "france" takes the cased "France" (a lower-cased vocabulary), "Paris" the lower-cased "paris".
    path = _write(tmp_path, "France 1 1 1\nparis 2 2 2\n")
    matrix, coverage = embedding_matrix(path, ["france", "Paris"])
    np.testing.assert_allclose(matrix, [[1, 1, 1], [2, 2, 2]])
    assert (coverage.exact, coverage.lower, coverage.digits, coverage.found) == (0, 2, 0, 2)


def test_words_without_a_count_cover_no_tokens_and_the_summary_is_rounded(tmp_path):
    path = _write(tmp_path, GLOVE)
    _, coverage = embedding_matrix(path, ["paris", "the", "rare"], counts={"the": 1, "rare": 2})
    assert (coverage.tokens, coverage.tokens_found) == (3, 1)
    summary = coverage.as_json()
    assert (summary["word_rate"], summary["token_rate"]) == (0.6667, 0.3333)
    # The scale of the single vector (1, 2, 3) is sqrt(2/3) = 0.8164966..., reported to 6 decimals.
    _, coverage = embedding_matrix(_write(tmp_path, "paris 1 2 3\n", "one.txt"), ["paris", "unseen"])
    assert coverage.scale == 0.816497 and coverage.as_json()["scale"] == 0.816497


@pytest.mark.slow  # a 20 MB vectors file: not tiny data
def test_only_the_vocabulary_s_rows_are_kept_in_memory(tmp_path):
    # 8,000 words x 300 dimensions, about 20 MB of text: reading it must not hold it.
    rng = np.random.default_rng(0)
    row = " ".join(f"{value:.4f}" for value in rng.normal(size=300))
    path = tmp_path / "big.txt"
    with open(path, "w") as out:
        for index in range(8_000):
            out.write(f"w{index} {row}\n")
    assert path.stat().st_size > 16_000_000
    tracemalloc.start()
    matrix, coverage = embedding_matrix(path, [f"w{index}" for index in range(0, 8_000, 80)])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert matrix.shape == (100, 300) and coverage.found == 100
    assert peak < 5_000_000, peak


@pytest.mark.parametrize("header, compress", [(False, False), (True, True)])
def test_first_words_are_the_file_s_first_words_in_order_after_any_header(tmp_path, header, compress):
    lines = ["the 0.1 0.2", "Of -1 2", "and 3 4", "to 5 6"]
    text = ("4 2\n" if header else "") + "\n".join(lines) + "\n"
    path = tmp_path / ("vectors.txt.gz" if compress else "vectors.txt")
    path.write_bytes(gzip.compress(text.encode()) if compress else text.encode())
    assert first_words(path, 3) == ["the", "Of", "and"]
    assert first_words(path, 10) == ["the", "Of", "and", "to"]
    assert first_words(path, 0) == []
