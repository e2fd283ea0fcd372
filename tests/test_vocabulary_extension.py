"""Extending a lower-cased vocabulary from a cased vectors file (`model.word_vectors.extend_vocabulary`).

The file's words are added as the task looks words up (lower-cased; NER
also reads digits as 0), once each, and each added word starts from the
vector `embedding_matrix` picks for it: the file's own lower-cased word
when the file has one, else the first cased form in the file.
"""

import numpy as np

from seqtasks.models.pretrained_vectors import extended_vocabulary
from seqtasks.recipe.schema import WordVectorsConfig
from seqtasks.text.word_vectors import embedding_matrix

# "Paris" comes before "paris"; "London" and "Berlin"/"BERLIN" are cased only; "The" is a training word.
VECTORS = {
    "The": [0.25, 0.125, 0.75],  # values a float32 holds exactly
    "Paris": [1.0, 0.0, 0.0],
    "paris": [2.0, 0.0, 0.0],
    "London": [0.0, 1.0, 0.0],
    "Berlin": [0.0, 0.0, 1.0],
    "BERLIN": [0.0, 0.0, 2.0],
    "1990": [3.0, 3.0, 3.0],
    "2001": [4.0, 4.0, 4.0],
    "Cat": [0.5, 0.5, 0.5],
}


def _vectors_file(path):
    path.write_text("".join(f"{word} {' '.join(map(str, vector))}\n" for word, vector in VECTORS.items()))
    return path


def test_a_lower_cased_vocabulary_gains_the_files_words_lower_cased_once_each(tmp_path):
    config = WordVectorsConfig(path=str(_vectors_file(tmp_path / "vectors.txt")), extend_vocabulary=6)
    vocabulary = ["[PAD]", "[UNK]", "the", "cat"]
    extended = extended_vocabulary(vocabulary, config, str.lower)  # as the sentiment task calls it
    # The first 6 file words: The (known as "the"), Paris and paris (one word), London, Berlin and BERLIN (one).
    assert extended == vocabulary + ["paris", "london", "berlin"]
    matrix, coverage = embedding_matrix(config.path, extended, reserved=2)
    rows = dict(zip(extended, matrix))
    np.testing.assert_array_equal(rows["paris"], VECTORS["paris"])  # the file's own, though "Paris" comes first
    np.testing.assert_array_equal(rows["london"], VECTORS["London"])
    np.testing.assert_array_equal(rows["berlin"], VECTORS["Berlin"])  # the first cased form, not "BERLIN"
    np.testing.assert_array_equal(rows["the"], VECTORS["The"])
    assert (coverage.found, coverage.exact, coverage.lower) == (5, 1, 4)


def test_without_normalizing_the_cased_words_are_added_as_they_are(tmp_path):
    config = WordVectorsConfig(path=str(_vectors_file(tmp_path / "vectors.txt")), extend_vocabulary=3)
    assert extended_vocabulary(["[PAD]", "[UNK]", "the"], config) == ["[PAD]", "[UNK]", "the", "The", "Paris", "paris"]


def test_the_ner_task_extends_its_lower_cased_vocabulary_with_lower_cased_words_and_their_vectors(tmp_path):
    from seqtasks.recipe import load_recipe
    from seqtasks.tasks import make_task

    vectors = _vectors_file(tmp_path / "vectors.txt")
    (tmp_path / "ner.yaml").write_text(
        "task: ner\ndata:\n  path: x.conll\nmodel:\n  word_embedding_dim: 3\n"
        f"  word_vectors:\n    path: {vectors}\n    extend_vocabulary: {len(VECTORS)}\n"
    )
    task = make_task(load_recipe(tmp_path / "ner.yaml"))
    sentences = [(["The", "cat", "saw", "Paris"], ["O", "O", "O", "B-LOC"])]
    task.prepare(sentences, sentences, tmp_path)
    vocab = (tmp_path / "word_vocab.txt").read_text().split()
    trained = ["[PAD]", "[UNK]", "cat", "paris", "saw", "the"]
    # Lower-cased, digits as 0 ("1990" and "2001" are one word), none twice, none already trained on.
    assert vocab == trained + ["london", "berlin", "0000"]
    rows = dict(zip(vocab, task.initial_vectors))
    np.testing.assert_array_equal(rows["paris"], VECTORS["paris"])
    np.testing.assert_array_equal(rows["london"], VECTORS["London"])
    np.testing.assert_array_equal(rows["berlin"], VECTORS["Berlin"])
    np.testing.assert_array_equal(rows["0000"], VECTORS["1990"])  # the first file word that reads as it
    np.testing.assert_array_equal(rows["cat"], VECTORS["Cat"])
