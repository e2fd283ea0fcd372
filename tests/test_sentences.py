"""The sentence splitter and sentence case on hand-written cases, and the graph against Python on generated text."""

import random

import pytest

from seqtasks.text.sentences import (
    sentence_case,
    sentence_case_graph,
    split_sentences,
    split_sentences_graph,
    upper_case_graph,
)

# (text, its sentences, the separators around them)
CASES = [
    ("Dr. López llegó a las 3.30. Luego se fue.", ["Dr. López llegó a las 3.30.", "Luego se fue."], ["", " ", ""]),
    ("¿Vienes? ¡Claro!", ["¿Vienes?", "¡Claro!"], ["", " ", ""]),
    ("Dijo: «Hola.» Y se fue.", ["Dijo: «Hola.»", "Y se fue."], ["", " ", ""]),
    ("«Hola. ¿Qué tal?» Y se fue.", ["«Hola. ¿Qué tal?»", "Y se fue."], ["", " ", ""]),
    ('Dijo "hola. Adiós." Luego "Sí. No." Fin.', ['Dijo "hola. Adiós."', 'Luego "Sí. No."', "Fin."],
     ["", " ", " ", ""]),
    ("“Ven. Ya.” Vino. 'Ya.' Bien.", ["“Ven. Ya.”", "Vino.", "'Ya.'", "Bien."], ["", " ", " ", " ", ""]),
    ("«Dijo “hola. Adiós” y se fue. Luego.» Fin.", ["«Dijo “hola. Adiós” y se fue. Luego.»", "Fin."],
     ["", " ", ""]),
    ('Abrió "la puerta. Entró.', ['Abrió "la puerta.', "Entró."], ["", " ", ""]),
    ("«Uno ‹dos “tres. Cuatro.” Cinco.› Seis. Siete.» Fin.",
     ["«Uno ‹dos “tres. Cuatro.” Cinco.› Seis. Siete.»", "Fin."], ["", " ", ""]),
    # Deeper than `QUOTATION_LEVELS`: the outermost quotation splits.
    ("«a «b «c «d. E.» F.» G.» H.» I.", ["«a «b «c «d. E.» F.» G.»", "H.»", "I."], ["", " ", " ", ""]),
    ('"' + "Ab. " * 2500 + '"', ['"' + "Ab. " * 2500 + '"'], ["", ""]),
    ("Bueno... ya veremos.", ["Bueno... ya veremos."], ["", ""]),
    ("Bueno… Ya veremos.", ["Bueno…", "Ya veremos."], ["", " ", ""]),
    ("¿En serio?! (Sí.) [Nota] 3 gatos. ¡Ay!", ["¿En serio?!", "(Sí.)", "[Nota] 3 gatos.", "¡Ay!"],
     ["", " ", " ", " ", ""]),
    ("Sr. Dr. López y la Sra. Gómez, etc. Todo bien.",
     ["Sr. Dr. López y la Sra. Gómez, etc. Todo bien."], ["", ""]),
    ("Mr. and Mrs. Smith came. They left.", ["Mr. and Mrs. Smith came.", "They left."], ["", " ", ""]),
    ("Frutas, p. ej. Manzanas. Y peras.", ["Frutas, p. ej. Manzanas.", "Y peras."], ["", " ", ""]),
    ("J. K. Rowling escribió. Costó 1.000 euros.",
     ["J. K. Rowling escribió.", "Costó 1.000 euros."], ["", " ", ""]),
    ("EL DR. LÓPEZ VINO. SE FUE.", ["EL DR. LÓPEZ VINO.", "SE FUE."], ["", " ", ""]),
    ("Ayer fui. compré pan. Volví a las 9. 30 minutos después", ["Ayer fui. compré pan.", "Volví a las 9.",
                                                                  "30 minutos después"], ["", " ", " ", ""]),
    ("Sin punto final", ["Sin punto final"], ["", ""]),
    ("", [], [""]),
    (" \t\n\u00a0 ", [], [" \t\n\u00a0 "]),
    ("  Hola.   Adiós.\n\nOtra vez.\n", ["Hola.", "Adiós.", "Otra vez."], ["  ", "   ", "\n\n", "\n"]),
    ("Uno.\u3000Dos.\r\nΤρία. Четыре.", ["Uno.", "Dos.", "Τρία.", "Четыре."],
     ["", "\u3000", "\r\n", " ", ""]),
]


@pytest.mark.parametrize("text,sentences,separators", CASES)
def test_hand_written_cases(text, sentences, separators):
    assert split_sentences(text) == (sentences, separators)


def _joined(sentences, separators):
    return separators[0] + "".join(sentence + separator for sentence, separator in zip(sentences, separators[1:]))


def _graph(texts):
    import tensorflow as tf

    sentences, separators = split_sentences_graph(tf.constant(texts, tf.string))
    return [
        ([s.decode() for s in row_sentences], [s.decode() for s in row_separators])
        for row_sentences, row_separators in zip(sentences.to_list(), separators.to_list())
    ]


def test_the_graph_gives_the_hand_written_cases():
    assert _graph([text for text, _, _ in CASES]) == [(sentences, separators) for _, sentences, separators in CASES]


_ALPHABET = (
    list("abcXYZÉÑ019") + [" ", " ", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\x85", "\u2028"]
    + list(".!?…,;:\"'()[]«»“”‘’‹›¿¡-") + [". ", "? ", "! ", "... ", "?! ", ".» ", '." ', ".) "]
    + ["Dr", "Sra", "etc", "p", "ej", "e.g", "J", "3.30", "1.000", "hola", "Hola", "EL", "Él", "Σ", "д", "Д"]
    + ["\ue000", "\ue001", "\ue002", "\ue003", "\ue004", "\ue005", "\ue006", "\x00", "😀", "日本"]
)


def _generated(count, seed):
    generator = random.Random(seed)
    return ["".join(generator.choice(_ALPHABET) for _ in range(generator.randint(0, 30))) for _ in range(count)]


def test_graph_equals_python_on_generated_text_and_joining_gives_the_text_back():
    texts = _generated(4000, 11)
    graph = _graph(texts)
    for text, (sentences, separators) in zip(texts, graph):
        assert (sentences, separators) == split_sentences(text), repr(text)
        assert _joined(sentences, separators) == text, repr(text)
        assert len(separators) == len(sentences) + 1
        assert all(sentence and sentence.strip() == sentence for sentence in sentences), repr(text)
        assert all(separator.strip() == "" for separator in separators), repr(text)
        assert all(separator for separator in separators[1:-1]), repr(text)
    assert sum(len(sentences) > 1 for sentences, _ in graph) > len(texts) // 10


def test_the_graph_keeps_invalid_utf8_bytes_in_place():
    import tensorflow as tf

    text = b"Hola.\xff Adi\xf3s. Ya.  Fin"
    sentences, separators = split_sentences_graph(tf.constant([text]))
    sentences, separators = sentences.to_list()[0], separators.to_list()[0]
    assert sentences == [b"Hola.\xff Adi\xf3s.", b"Ya.", b"Fin"]
    assert separators[0] + b"".join(s + p for s, p in zip(sentences, separators[1:])) == text


def test_a_text_that_is_not_a_string_is_refused():
    with pytest.raises(TypeError, match=r"Expected a str\. Received: text=b'x'"):
        split_sentences(b"x")


@pytest.mark.parametrize("sentence,expected", [
    ("EL PERRO ESTÁ EN EL JARDÍN.", ("El perro está en el jardín.", True)),
    ("¿DÓNDE ESTÁ LA ESTACIÓN?", ("¿Dónde está la estación?", True)),
    ("«3 GATOS»", ("«3 Gatos»", True)),
    ("ΟΔΟΣ.", ("Οδος.", True)),
    ("OK", ("Ok", True)),
    ("el perro está en el jardín", ("el perro está en el jardín", False)),
    ("El perro de la ONU.", ("El perro de la ONU.", False)),
    ("A", ("A", False)),
    ("A 1 2 3", ("A 1 2 3", False)),
    ("STRAßE", ("STRAßE", False)),
    ("3 1 4", ("3 1 4", False)),
    ("\x00HOLA\x00 ΟΔΟΣ", ("\x00Hola\x00 οδος", True)),
    ("", ("", False)),
])
def test_sentence_case_of_hand_written_sentences(sentence, expected):
    assert sentence_case(sentence) == expected


def test_sentence_case_graph_equals_python_on_generated_text():
    import tensorflow as tf

    generator = random.Random(5)
    alphabet = list("abzABZáÁñÑßΣσςΔдДİı019 .,¿?«»") + ["ǅ", "ǆ", "Ǆ", "😀", "日", "\x00"]
    texts = ["".join(generator.choice(alphabet) for _ in range(generator.randint(0, 12))) for _ in range(3000)]
    # Mostly shouted ones: upper-cased and digits.
    texts += [text.upper() for text in texts[:1500]]
    cased, shouted = sentence_case_graph(tf.constant(texts))
    graph = [(text.decode(), bool(flag)) for text, flag in zip(cased.numpy(), shouted.numpy())]
    assert graph == [sentence_case(text) for text in texts]
    assert sum(flag for _, flag in graph) > 1000


def test_upper_case_graph_is_str_upper_nul_characters_included():
    import tensorflow as tf

    texts = [["hello. we went\x00 home", "", "\x00"], ["straße οδος", "i'm 35", "ǆ\x00ǆ"]]
    upper = [[text.decode() for text in row] for row in upper_case_graph(tf.constant(texts)).numpy()]
    assert upper == [[text.upper() for text in row] for row in texts]
