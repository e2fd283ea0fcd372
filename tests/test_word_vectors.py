"""Pretrained word vectors read into an embedding matrix: formats, matching, coverage, errors, memory."""

import gzip
import tracemalloc

import numpy as np
import pytest

from seqtasks.errors import SeqtasksError
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
])
def test_a_file_that_is_not_vectors_is_a_one_line_error_naming_file_and_line(tmp_path, text, dimension, message):
    path = _write(tmp_path, text)
    with pytest.raises(SeqtasksError) as raised:
        embedding_matrix(path, ["paris", "the"], dimension=dimension)
    assert str(raised.value) == message.format(path=path)


def test_files_that_cannot_be_read_are_named(tmp_path):
    with pytest.raises(SeqtasksError, match="no such"):
        embedding_matrix(tmp_path / "absent.txt", ["the"])
    broken = tmp_path / "broken.txt.gz"
    broken.write_bytes(gzip.compress(GLOVE.encode())[:30])
    with pytest.raises(SeqtasksError, match=f"^{broken}: cannot read the vectors"):
        embedding_matrix(broken, ["the"])
    latin = _write(tmp_path, "caf\xe9 1 2 3\n")
    latin.write_bytes("café 1 2 3\n".encode("latin-1"))
    with pytest.raises(SeqtasksError, match="cannot read the vectors"):
        embedding_matrix(latin, ["café"])


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
