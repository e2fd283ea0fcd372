"""The sentence splitter and sentence case on hand-written cases, and the graph against Python on generated text."""

import random
import re

import pytest

from seqtasks.text.sentences import (
    _any_case,
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
    # Every closing quote or bracket may follow the stop, and several of them; ‹ › are a quotation as « » are.
    ("Le dijo ‘basta.’ Y se fue.", ["Le dijo ‘basta.’", "Y se fue."], ["", " ", ""]),
    ("Dijo ‹sí.› Y fue.", ["Dijo ‹sí.›", "Y fue."], ["", " ", ""]),
    ("[Nota.] Sigue. [Otra.]", ["[Nota.]", "Sigue.", "[Otra.]"], ["", " ", " ", ""]),
    ("(Dijo «basta.») Luego.", ["(Dijo «basta.»)", "Luego."], ["", " ", ""]),
    ("‹Hola. Adiós.› Fin.", ["‹Hola. Adiós.›", "Fin."], ["", " ", ""]),
    # Every opening quote, `¿` and a digit start a sentence, as upper-case letters of each script do.
    ('Fin. "Hola," dijo.', ["Fin.", '"Hola," dijo.'], ["", " ", ""]),
    ("Fin. “Hola”, dijo.", ["Fin.", "“Hola”, dijo."], ["", " ", ""]),
    ("Fin. ‘Hola’, dijo.", ["Fin.", "‘Hola’, dijo."], ["", " ", ""]),
    ("Fin. «Hola», dijo.", ["Fin.", "«Hola», dijo."], ["", " ", ""]),
    ("Fin. ‹Hola›, dijo.", ["Fin.", "‹Hola›, dijo."], ["", " ", ""]),
    ("Hola. ¿Vienes?", ["Hola.", "¿Vienes?"], ["", " ", ""]),
    ("Empataron. 0 a 0. 9 jugadores.", ["Empataron.", "0 a 0.", "9 jugadores."], ["", " ", " ", ""]),
    ("Ànima. Ödön. Ørsted. Þór. Άρης. Έλα. Ώρα. Αλφα. Ωμέγα. Аня. Яблоко. Zeta.",
     ["Ànima.", "Ödön.", "Ørsted.", "Þór.", "Άρης.", "Έλα.", "Ώρα.", "Αλφα.", "Ωμέγα.", "Аня.", "Яблоко.", "Zeta."],
     ["", " ", " ", " ", " ", " ", " ", " ", " ", " ", " ", " ", ""]),
    # Every abbreviation keeps its stop from splitting.
    ("La Dra. Ruiz, la Srta. Gil, los Sres. Paz, Mr. Li, Ms. Wu, el Prof. Kim, St. Louis, John Jr. Smith, "
     "Ud. Y Uds. Y Vd. Y Vds. Saben, A vs. B, e.g. Ana, i.e. Eva.",
     ["La Dra. Ruiz, la Srta. Gil, los Sres. Paz, Mr. Li, Ms. Wu, el Prof. Kim, St. Louis, John Jr. Smith, "
      "Ud. Y Uds. Y Vd. Y Vds. Saben, A vs. B, e.g. Ana, i.e. Eva."], ["", ""]),
    # An abbreviation or a capital that ends a longer word, after a lower-case letter of any script, is neither.
    ("Mucha salud. Nos vemos.", ["Mucha salud.", "Nos vemos."], ["", " ", ""]),
    ("Hon har en vacker röst. Hon sjunger.", ["Hon har en vacker röst.", "Hon sjunger."], ["", " ", ""]),
    ("Vi reiser mot øst. Det er kaldt.", ["Vi reiser mot øst.", "Det er kaldt."], ["", " ", ""]),
    ("Η απόφαση του ΣτΕ. Ήταν σαφής.", ["Η απόφαση του ΣτΕ.", "Ήταν σαφής."], ["", " ", ""]),
    ("Трудился на ЗиЛ. Потом уехал.", ["Трудился на ЗиЛ.", "Потом уехал."], ["", " ", ""]),
    ("Ένα ΐΑ. Τέλος.", ["Ένα ΐΑ.", "Τέλος."], ["", " ", ""]),
    # The private-use characters the splitter marks with are a text's own characters like any other.
    ("Uno\ue000 dos. Tres\ue005 cuatro. «Cinco\ue001. Seis\ue002.» Siete\ue003. Ocho\ue004. Nueve\ue006.",
     ["Uno\ue000 dos.", "Tres\ue005 cuatro.", "«Cinco\ue001. Seis\ue002.»", "Siete\ue003.", "Ocho\ue004.",
      "Nueve\ue006."], ["", " ", " ", " ", " ", " ", ""]),
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


@pytest.mark.parametrize("word,matched,unmatched", [
    ("e.g", ["e.g", "E.G", "e.G", "E.g"], ["exg", "e g", "eg", "e.gx", "E..G"]),
    ("Sra", ["Sra", "SRA", "sra", "sRa"], ["Sr", "Sras", "Sr a"]),
])
def test_an_abbreviation_is_matched_in_any_case_and_its_stops_only_as_stops(word, matched, unmatched):
    pattern = _any_case(word)
    assert [w for w in matched + unmatched if re.fullmatch(pattern, w)] == matched


def test_an_empty_batch_gives_empty_results():
    import tensorflow as tf

    sentences, separators = split_sentences_graph([])
    assert (sentences.to_list(), separators.to_list()) == ([], [])
    assert sentences.dtype == separators.dtype == tf.string
    cased, shouted = sentence_case_graph([])
    assert (cased.numpy().tolist(), shouted.numpy().tolist()) == ([], [])
    assert (cased.dtype, shouted.dtype) == (tf.string, tf.bool)
    upper = upper_case_graph([])
    assert (upper.numpy().tolist(), upper.dtype) == ([], tf.string)


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
