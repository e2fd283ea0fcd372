"""`seqtasks.text.clauses`: a sentence too long to read whole, in parts cut after clause punctuation, else between
words; Python and the graph alike."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqtasks.text.clauses import pack, split_long, split_long_graph


def words(text):
    """Tokens of a text: its whitespace-separated words (an empty text has none)."""
    return len(text.split())


def characters(text):
    return len(text) // 3 + 1


def characters_graph(texts):
    import tensorflow as tf

    return tf.strings.length(texts, unit="UTF8_CHAR") // 3 + 1


@pytest.mark.parametrize("lengths, ends, limit, starts", [
    ([], [], 3, []),
    ([1, 1, 1], [False] * 3, 3, [0]),
    ([1, 1, 1, 1], [False] * 4, 3, [0, 3]),
    # The part ends after its last clause end, not where the tokens run out.
    ([1, 1, 1, 1], [True, False, False, False], 3, [0, 1]),
    ([1, 1, 1, 1, 1, 1, 1], [False, True, False, False, True, False, False], 3, [0, 2, 5]),
    # Unless what follows the clause end would not fit either.
    ([1, 1, 3, 1], [True, False, False, False], 3, [0, 2, 3]),
    # A word longer than the limit is a part of its own.
    ([1, 5, 1], [False] * 3, 3, [0, 1, 2]),
    ([2, 2, 2, 2], [True, True, True, True], 4, [0, 2]),
    # The words after the clause end move to the next part, and a clause end before a part's start is no place
    # to cut it again.
    ([2, 1, 2, 2, 2], [True, False, False, False, False], 3, [0, 1, 3, 4]),
    ([2, 2, 2, 2], [True, False, False, False], 3, [0, 1, 2, 3]),
])
def test_pack_cuts_after_the_last_clause_end_that_leaves_the_rest_in_bounds(lengths, ends, limit, starts):
    assert pack(lengths, ends, limit) == starts


LONG = ("El gobierno anunció ayer que construirá un nuevo hospital en el centro de la ciudad, que tendrá más de "
        "trescientas camas; un servicio de urgencias abierto día y noche y una escuela para formar a los médicos.")


@pytest.mark.parametrize("sentence, limit, parts, separators", [
    ("Tengo hambre.", 2, ["Tengo hambre."], []),
    ("Tengo  mucha hambre.", 2, ["Tengo  mucha", "hambre."], [" "]),
    (LONG, 20, ["El gobierno anunció ayer que construirá un nuevo hospital en el centro de la ciudad,",
                "que tendrá más de trescientas camas;",
                "un servicio de urgencias abierto día y noche y una escuela para formar a los médicos."], [" ", " "]),
    (LONG, 8, ["El gobierno anunció ayer que construirá un nuevo", "hospital en el centro de la ciudad,",
               "que tendrá más de trescientas camas;", "un servicio de urgencias abierto día y noche",
               "y una escuela para formar a los médicos."], [" "] * 4),
    # Closing quotes and brackets after the punctuation end a clause too; any whitespace is kept.
    ("Dijo «sí,»\tluego (no:) y\nal final nada más que eso.", 4,
     ["Dijo «sí,»\tluego (no:)", "y\nal final nada", "más que eso."], [" ", " "]),
])
def test_a_long_sentence_is_cut_after_its_clauses_and_its_parts_give_it_back(sentence, limit, parts, separators):
    assert split_long(sentence, words, limit) == (parts, separators)
    joined = parts[0] + "".join(separator + part for separator, part in zip(separators, parts[1:]))
    assert joined == sentence
    assert all(words(part) <= limit for part in parts)
    _check_graph([sentence], words_graph, limit)


def words_graph(texts):
    import tensorflow as tf

    return tf.strings.split(texts).row_lengths()


def _check_graph(sentences, count_graph, limit, count=None):
    parts, before = split_long_graph(sentences, count_graph, limit)
    for sentence, got_parts, got_before in zip(sentences, parts.to_list(), before.to_list()):
        expected, separators = split_long(sentence, count or words, limit)
        assert [p.decode() for p in got_parts] == expected, sentence
        assert [b.decode() for b in got_before] == [""] + separators, sentence


def test_the_graph_reads_a_batch_of_short_long_and_empty_sentences_alike():
    _check_graph(["Hola.", LONG, "", "uno dos tres cuatro cinco", LONG.upper()], words_graph, 5)


def test_an_empty_batch_gives_empty_parts():
    import tensorflow as tf

    parts, before = split_long_graph(tf.constant([], tf.string), words_graph, 5)
    assert parts.to_list() == [] and before.to_list() == []


SENTENCES = st.text(alphabet=list("ab cé,;:»)\t\n\u00a0xyz.") + ["\u2003"], max_size=80).map(
    lambda text: text.strip())


@settings(max_examples=300)
@given(st.lists(SENTENCES, min_size=1, max_size=5), st.integers(1, 9))
def test_the_graph_equals_python_on_generated_sentences(sentences, limit):
    _check_graph(sentences, characters_graph, limit, count=characters)
