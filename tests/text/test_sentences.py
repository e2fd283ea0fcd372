"""The sentence splitter and sentence case on hand-written cases, and the graph against Python on generated text."""

import random
import re

import pytest

import seqtasks.text.sentences as sentences_module
from seqtasks.text.pretokenizers import WHITESPACE
from seqtasks.text.sentences import (
    ABBREVIATIONS,
    FINAL_ABBREVIATIONS,
    NUMBER_ABBREVIATIONS,
    _alternatives,
    _any_case,
    _LINE_BREAKS,
    _SPACES,
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
    # "etc." very often ends a sentence and seldom stands before a name: before a capital it ends one.
    ("Sr. Dr. López y la Sra. Gómez, etc. Todo bien.",
     ["Sr. Dr. López y la Sra. Gómez, etc.", "Todo bien."], ["", " ", ""]),
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

# Spanish and English as people write it: abbreviations, dialogue, lines and paragraphs (issue 64).
TEXT_CASES = [
    # An abbreviation stands before the name or number it belongs to.
    ("Vivo en EE. UU. desde 2010.", ["Vivo en EE. UU. desde 2010."], ["", ""]),
    ("Saludé a Dña. María en la puerta.", ["Saludé a Dña. María en la puerta."], ["", ""]),
    ("Hablé con el Lic. Pérez. Luego salí.", ["Hablé con el Lic. Pérez.", "Luego salí."], ["", " ", ""]),
    ("Vive en la Av. Libertador 1234. Es alto.", ["Vive en la Av. Libertador 1234.", "Es alto."], ["", " ", ""]),
    ("Nació en Sto. Domingo. Después emigró.", ["Nació en Sto. Domingo.", "Después emigró."], ["", " ", ""]),
    ("Trabaja en la Cía. Telefónica desde joven.", ["Trabaja en la Cía. Telefónica desde joven."], ["", ""]),
    ("El Gral. San Martín cruzó los Andes con el Cnel. Las Heras.",
     ["El Gral. San Martín cruzó los Andes con el Cnel. Las Heras."], ["", ""]),
    ("Lo dijo el Excmo. Sr. Presidente. Nadie aplaudió.", ["Lo dijo el Excmo. Sr. Presidente.", "Nadie aplaudió."],
     ["", " ", ""]),
    ("La Profa. Ruiz y el Ing. Gil viven en la Col. Roma.",
     ["La Profa. Ruiz y el Ing. Gil viven en la Col. Roma."], ["", ""]),
    ("Vino el Sr.\nGómez.", ["Vino el Sr.\nGómez."], ["", ""]),
    ("Frutas, p. ej. Peras y uvas. Y más.", ["Frutas, p. ej. Peras y uvas.", "Y más."], ["", " ", ""]),
    ("En el s. XX hubo dos guerras.", ["En el s. XX hubo dos guerras."], ["", ""]),
    ("Lo escribió J. R. R. Tolkien. Es largo.", ["Lo escribió J. R. R. Tolkien.", "Es largo."], ["", " ", ""]),
    ("Mr. Smith met Dr. Jones. They talked.", ["Mr. Smith met Dr. Jones.", "They talked."], ["", " ", ""]),
    ("Prof. Smith and Capt. Hook sailed with Sgt. Pepper.", ["Prof. Smith and Capt. Hook sailed with Sgt. Pepper."],
     ["", ""]),
    ("The U. S. Navy and the U.S. Army came.", ["The U. S. Navy and the U.S. Army came."], ["", ""]),
    # Before a digit only: references, months and weekdays, which are also words that end a sentence.
    ("Según el Art. 5 de la ley, no. Según el art. 6, sí.", ["Según el Art. 5 de la ley, no.", "Según el art. 6, sí."],
     ["", " ", ""]),
    ("Véase la pág. 5 del informe.", ["Véase la pág. 5 del informe."], ["", ""]),
    ("Expediente Núm. 5 archivado. Fin.", ["Expediente Núm. 5 archivado.", "Fin."], ["", " ", ""]),
    ("Recorrimos aprox. 5 km a pie.", ["Recorrimos aprox. 5 km a pie."], ["", ""]),
    ("Son 5 km aprox. Luego descansamos.", ["Son 5 km aprox.", "Luego descansamos."], ["", " ", ""]),
    ("Véanse las págs. 10-12 y la Fig. 3. Allí está.", ["Véanse las págs. 10-12 y la Fig. 3.", "Allí está."],
     ["", " ", ""]),
    ("Tel. 555 1234. Llame ya.", ["Tel. 555 1234.", "Llame ya."], ["", " ", ""]),
    ("Leí el Cap. 3. Era largo.", ["Leí el Cap. 3.", "Era largo."], ["", " ", ""]),
    ("Vence el 5 de ago. 2025 sin prórroga.", ["Vence el 5 de ago. 2025 sin prórroga."], ["", ""]),
    ("Nos vemos el mié. 5 de mayo.", ["Nos vemos el mié. 5 de mayo."], ["", ""]),
    ("Abierto de lun. a vie. Cerrado el dom.", ["Abierto de lun. a vie.", "Cerrado el dom."], ["", " ", ""]),
    ("See Fig. 3 and Vol. 2, No. 5. Then read on.", ["See Fig. 3 and Vol. 2, No. 5.", "Then read on."],
     ["", " ", ""]),
    ("The meeting is on Jan. 5 at noon.", ["The meeting is on Jan. 5 at noon."], ["", ""]),
    ("He left on Jan. 5. She stayed.", ["He left on Jan. 5.", "She stayed."], ["", " ", ""]),
    ("It weighs approx. 5 kg. Read ch. 5 tonight.", ["It weighs approx. 5 kg.", "Read ch. 5 tonight."],
     ["", " ", ""]),
    ("I said no. No one listened.", ["I said no.", "No one listened."], ["", " ", ""]),
    ("I love modern art. Art. 5 says so.", ["I love modern art.", "Art. 5 says so."], ["", " ", ""]),
    ("It happened two years ago. Then it stopped.", ["It happened two years ago.", "Then it stopped."],
     ["", " ", ""]),
    ("Open Mon. to Fri. Closed Sun.", ["Open Mon. to Fri.", "Closed Sun."], ["", " ", ""]),
    # Abbreviations that close a sentence as often as not end it before a capital; their inner stops never do.
    ("Vivo en EE. UU. Me gusta mucho.", ["Vivo en EE. UU.", "Me gusta mucho."], ["", " ", ""]),
    ("Vivo en EE.UU. Me gusta.", ["Vivo en EE.UU.", "Me gusta."], ["", " ", ""]),
    ("Roma cayó en el 476 d. C. Fue el fin.", ["Roma cayó en el 476 d. C.", "Fue el fin."], ["", " ", ""]),
    ("Nació en el 63 a. C. y murió en el 14 d. C. Fue el primero.",
     ["Nació en el 63 a. C. y murió en el 14 d. C.", "Fue el primero."], ["", " ", ""]),
    ("Nació hacia el 63 a.C. Murió en Nola.", ["Nació hacia el 63 a.C.", "Murió en Nola."], ["", " ", ""]),
    ("A. C. Grayling escribió. Fin.", ["A. C. Grayling escribió.", "Fin."], ["", " ", ""]),
    ("La reunión es a las 10 a. m. Llegaré tarde.", ["La reunión es a las 10 a. m.", "Llegaré tarde."],
     ["", " ", ""]),
    ("We met at 5 p.m. Then we left.", ["We met at 5 p.m.", "Then we left."], ["", " ", ""]),
    ("Lo publicó Gredos, S.A. En 1990 cerró.", ["Lo publicó Gredos, S.A.", "En 1990 cerró."], ["", " ", ""]),
    ("Vivo en Bs. As. Me encanta.", ["Vivo en Bs. As.", "Me encanta."], ["", " ", ""]),
    ("Compré pan, leche, etc. Luego volví a casa.", ["Compré pan, leche, etc.", "Luego volví a casa."],
     ["", " ", ""]),
    ("Apples, pears, etc. Everything was fresh.", ["Apples, pears, etc.", "Everything was fresh."], ["", " ", ""]),
    ("He works at Acme Inc. The pay is good.", ["He works at Acme Inc.", "The pay is good."], ["", " ", ""]),
    ("She founded Widgets Ltd. It grew fast.", ["She founded Widgets Ltd.", "It grew fast."], ["", " ", ""]),
    # Dialogue: a dash after the final punctuation opens a reply, unless the narrator's aside goes on in lower case.
    ("—¿Vienes? —Sí, claro. —Vamos.", ["—¿Vienes?", "—Sí, claro.", "—Vamos."], ["", " ", " ", ""]),
    ("—¿Vienes? —preguntó Juan.", ["—¿Vienes? —preguntó Juan."], ["", ""]),
    ("—No sé —dijo ella—. Quizá mañana.", ["—No sé —dijo ella—.", "Quizá mañana."], ["", " ", ""]),
    ("–¿Y tú? –Yo no. – Bueno.", ["–¿Y tú?", "–Yo no.", "– Bueno."], ["", " ", " ", ""]),
    ("Dijo:\n—Vamos ya.\n—Espera.", ["Dijo:", "—Vamos ya.", "—Espera."], ["", "\n", "\n", ""]),
    ("Fin del capítulo.\n—dijo el narrador.", ["Fin del capítulo.", "—dijo el narrador."], ["", "\n", ""]),
    ("“Coming?” “Yes.”", ["“Coming?”", "“Yes.”"], ["", " ", ""]),
    # Lines: one without final punctuation ends where the next starts a sentence; a wrapped line goes on.
    ("Ingredientes\n- harina\n- agua\n- sal", ["Ingredientes", "- harina", "- agua", "- sal"],
     ["", "\n", "\n", "\n", ""]),
    ("Compré:\n• pan\n• leche", ["Compré:", "• pan", "• leche"], ["", "\n", "\n", ""]),
    ("Shopping list\n* milk\n* eggs", ["Shopping list", "* milk", "* eggs"], ["", "\n", "\n", ""]),
    ("1. Introducción\n2. Métodos\n3. Resultados", ["1. Introducción", "2. Métodos", "3. Resultados"],
     ["", "\n", "\n", ""]),
    ("Pasos:\n  1. Abrir\n  2. Cerrar", ["Pasos:", "1. Abrir", "2. Cerrar"], ["", "\n  ", "\n  ", ""]),
    # A year is no list's number.
    ("Lista\n10. Diez\n1999. Fue el año.", ["Lista", "10. Diez", "1999.", "Fue el año."], ["", "\n", "\n", " ", ""]),
    ("Capítulo 1\nEl comienzo de todo", ["Capítulo 1", "El comienzo de todo"], ["", "\n", ""]),
    ("TITLE\n2024 was a good year.", ["TITLE", "2024 was a good year."], ["", "\n", ""]),
    ("Esta línea sigue\nen la siguiente sin cortar.", ["Esta línea sigue\nen la siguiente sin cortar."], ["", ""]),
    ("This line is wrapped,\nand continues here.", ["This line is wrapped,\nand continues here."], ["", ""]),
    ("Hola.\nadiós", ["Hola.\nadiós"], ["", ""]),
    ("Línea uno\r\nLínea dos\r\nsigue aquí.", ["Línea uno", "Línea dos\r\nsigue aquí."], ["", "\r\n", ""]),
    ("Q: Is it here?\nA: Yes.", ["Q: Is it here?", "A: Yes."], ["", "\n", ""]),
    ("Nota (ver abajo)\n«Texto citado»", ["Nota (ver abajo)", "«Texto citado»"], ["", "\n", ""]),
    ("One\n\tTwo\u2028Three", ["One", "Two", "Three"], ["", "\n\t", "\u2028", ""]),
    ("a\nB\nC\nd", ["a", "B", "C\nd"], ["", "\n", "\n", ""]),
    # A blank line is always a boundary, with all its whitespace as the separator.
    ("Querido Juan:\n\nTe escribo para contarte algo.", ["Querido Juan:", "Te escribo para contarte algo."],
     ["", "\n\n", ""]),
    ("Dear John,\n\nI am writing to you.", ["Dear John,", "I am writing to you."], ["", "\n\n", ""]),
    ("Primer párrafo sin punto\n  \nsegundo párrafo", ["Primer párrafo sin punto", "segundo párrafo"],
     ["", "\n  \n", ""]),
    ("Lo firmó el Dr.\n\nLópez lo leyó.", ["Lo firmó el Dr.", "López lo leyó."], ["", "\n\n", ""]),
    ("Hola.\n\nadiós.", ["Hola.", "adiós."], ["", "\n\n", ""]),
    ("«Empieza la cita.\n\nSigue otra.» Fin.", ["«Empieza la cita.", "Sigue otra.»", "Fin."], ["", "\n\n", " ", ""]),
    ("Hola\nmundo.\n\n¿Qué tal?\n", ["Hola\nmundo.", "¿Qué tal?"], ["", "\n\n", "\n"]),
    ("Intro\n\n\nBody \r\n\r\n Más", ["Intro", "Body", "Más"], ["", "\n\n\n", " \r\n\r\n ", ""]),
    ("Fin.\r\rdos\u2029\u2029tres", ["Fin.", "dos", "tres"], ["", "\r\r", "\u2029\u2029", ""]),
    ("Fin.\r \nsigue\r\nigual", ["Fin.", "sigue\r\nigual"], ["", "\r \n", ""]),
]


@pytest.mark.parametrize("text,sentences,separators", CASES + TEXT_CASES)
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
    cases = CASES + TEXT_CASES
    assert _graph([text for text, _, _ in cases]) == [(sentences, separators) for _, sentences, separators in cases]


def test_every_abbreviation_keeps_its_stop_from_splitting_where_its_list_says_on_both_engines():
    texts, expected = [], []
    for word in ABBREVIATIONS:
        for written in (word, word.upper()):
            texts += [f"Vino el {written}. Pérez.", f"Vino el {written}. 5 veces."]
            expected += [[f"Vino el {written}. Pérez."], [f"Vino el {written}. 5 veces."]]
    for word in NUMBER_ABBREVIATIONS:
        texts += [f"Ver {word}. 5 aquí. Otra.", f"Dijo {word}. Luego."]
        expected += [[f"Ver {word}. 5 aquí.", "Otra."], [f"Dijo {word}.", "Luego."]]
    for first, last in FINAL_ABBREVIATIONS:
        for written in (f"{first}. {last}.", f"{first}.{last}."):
            texts += [f"Fue en 5 {written} Luego.", f"Fue en 5 {written} y luego."]
            expected += [[f"Fue en 5 {written}", "Luego."], [f"Fue en 5 {written} y luego."]]
    python = [split_sentences(text)[0] for text in texts]
    assert [(text, found) for text, found, wanted in zip(texts, python, expected) if found != wanted] == []
    assert [sentences for sentences, _ in _graph(texts)] == python
    # A word that only ends like one is no abbreviation.
    words = split_sentences("Lo dijo Kav. Pérez vino. Uno tr. Dos.")[0]
    assert words == ["Lo dijo Kav.", "Pérez vino.", "Uno tr.", "Dos."]


def test_the_abbreviation_lists_do_not_overlap_and_are_as_documented():
    general = {word.lower() for word in ABBREVIATIONS}
    number = {word.lower() for word in NUMBER_ABBREVIATIONS}
    assert len(general) == len(ABBREVIATIONS) and len(number) == len(NUMBER_ABBREVIATIONS)
    assert not general & number
    # Words that end sentences are held before a digit only; those that close one as often as not in neither list.
    assert not general & {"no", "art", "cap", "mar", "may", "ago", "sat", "sun", "jan", "aprox"}
    assert not (general | number) & {"etc", "inc", "ltd", "co", "corp", "uu", "hnos", "gen", "ave", "ft", "rd", "min"}
    assert f"({len(general | number)} abbreviations)" in " ".join(sentences_module.__doc__.split())


def test_the_whitespace_is_line_breaks_and_spaces():
    def members(body):
        return {chr(i) for i in range(0x10000) if re.fullmatch(f"[{body}]", chr(i))}

    assert members(_LINE_BREAKS) == {c for c in members(WHITESPACE) if len(f"a{c}b".splitlines()) == 2}
    assert members(_SPACES) == members(WHITESPACE) - members(_LINE_BREAKS)


_ALPHABET = (
    list("abcXYZÉÑ019") + [" ", " ", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\x85", "\u2028"]
    + list(".!?…,;:\"'()[]«»“”‘’‹›¿¡-") + [". ", "? ", "! ", "... ", "?! ", ".» ", '." ', ".) "]
    + ["Dr", "Sra", "etc", "p", "ej", "e.g", "J", "3.30", "1.000", "hola", "Hola", "EL", "Él", "Σ", "д", "Д"]
    + ["\ue000", "\ue001", "\ue002", "\ue003", "\ue004", "\ue005", "\ue006", "\x00", "😀", "日本"]
    # Line breaks, alone, doubled and after a stop; dashes and bullets, at a line's start too.
    + ["\n", "\n\n", "\r", "\r\n\r\n", "\n \n", "\v", "\f", "\x1c", "\x1f", "\u2029", ".\n", "\n- ", "\n— ", "\n1. "]
    + list("—–‐―•*") + [" —", " –", "—¿", ":\n"]
    # The new abbreviations' letters and words, and the parts of "EE. UU.", "a. C.", "p. m.", "S.A.".
    + ["EE", "UU", "a. C", "d", "C", "S", "A", "m", "No", "no", "Art", "pág", "Núm", "aprox", "Fig", "Vol", "Jan"]
    + ["Dña", "Cía", "Sto", "Av", "Lic", "mié", "ago", "Inc", "Ltd", "ñ", "ß", "ø", "ΐ", "я"]
    # Digits and punctuation no rule names: Arabic-Indic, extended Arabic-Indic, fullwidth.
    + ["٣", "٠", "۵", "３", "０", "．", "！", "？", "＂", "（", "）", "「", "」", "。", "、"]
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


def test_the_abbreviations_become_one_alternation_longest_first_each_once():
    # Longest first, so "Núm." is tried before "No." could match its start; each word once, in any case.
    pattern = _alternatives(["No", "Núm", "EE. UU", "No"])
    assert pattern == "[Ee][Ee]\\.\\ [Uu][Uu]|[Nn][Úú][Mm]|[Nn][Oo]"
    assert re.match(pattern, "núm. 5")[0] == "núm" and re.match(pattern, "EE. UU.")[0] == "EE. UU"


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


# (sentence, its sentence case, whether it is shouted): two words or more in capitals, no lower-case letter.
SHOUTING = [
    ("EL PERRO ESTÁ EN EL JARDÍN.", "El perro está en el jardín.", True),
    ("¿DÓNDE ESTÁ LA ESTACIÓN?", "¿Dónde está la estación?", True),
    ("¿DÓNDE ESTÁ?", "¿Dónde está?", True),
    ("I AM HERE.", "I am here.", True),
    ("¡HOLA, JUAN!", "¡Hola, juan!", True),
    ("«3 GATOS NEGROS»", "«3 Gatos negros»", True),
    ("ΟΔΟΣ ΠΑΝΕΠΙΣΤΗΜΙΟΥ.", "Οδος πανεπιστημιου.", True),
    ("A B", "A b", True),
    ("3 PM ET", "3 Pm et", True),
    ("HOLA\u00a0ADIÓS", "Hola\u00a0adiós", True),
    ("  HOLA \n ADIÓS ", "  Hola \n adiós ", True),
    ("\x00HOLA\x00 ΟΔΟΣ", "\x00Hola\x00 οδος", True),
    # A single word in capitals is an acronym, a unit or a word read as written: "«3 GATOS»", "ΟΔΟΣ." and "OK"
    # were read as shouted when two letters were enough.
    ("OK.", "OK.", False),
    ("OK", "OK", False),
    ("USA.", "USA.", False),
    ("U.S.A.", "U.S.A.", False),
    ("3 PM.", "3 PM.", False),
    ("«3 GATOS»", "«3 GATOS»", False),
    ("ΟΔΟΣ.", "ΟΔΟΣ.", False),
    ("¡HOLA!", "¡HOLA!", False),
    ("HOLA-ADIÓS", "HOLA-ADIÓS", False),
    ("HOLA\x00ADIÓS", "HOLA\x00ADIÓS", False),
    ("1 2 3 GO", "1 2 3 GO", False),
    ("el perro está en el jardín", "el perro está en el jardín", False),
    ("El perro de la ONU.", "El perro de la ONU.", False),
    ("EL Perro", "EL Perro", False),
    ("A", "A", False),
    ("A 1 2 3", "A 1 2 3", False),
    ("STRAßE", "STRAßE", False),
    ("STRAßE NUEVA", "STRAßE NUEVA", False),
    ("3 1 4", "3 1 4", False),
    ("", "", False),
]


@pytest.mark.parametrize("sentence,cased,shouted", SHOUTING)
def test_sentence_case_of_hand_written_sentences(sentence, cased, shouted):
    assert sentence_case(sentence) == (cased, shouted)


def test_sentence_case_graph_gives_the_hand_written_sentences():
    import tensorflow as tf

    cased, shouted = sentence_case_graph(tf.constant([sentence for sentence, _, _ in SHOUTING]))
    graph = [(text.decode(), bool(flag)) for text, flag in zip(cased.numpy(), shouted.numpy())]
    assert graph == [(text, flag) for _, text, flag in SHOUTING]


def test_sentence_case_graph_equals_python_on_generated_text():
    import tensorflow as tf

    generator = random.Random(5)
    alphabet = list("abzABZáÁñÑßΣσςΔдДİı019 .,¿?«»") + ["ǅ", "ǆ", "Ǆ", "😀", "日", "\x00"]
    # Whitespace of several kinds between words, and characters that only sit next to a word.
    alphabet += [" ", " ", " ", "\n", "\u00a0", "\u3000", "\x1f", "\x1c", "-", "３", "٣"]
    texts = ["".join(generator.choice(alphabet) for _ in range(generator.randint(0, 12))) for _ in range(3000)]
    # Mostly shouted ones: upper-cased and digits.
    texts += [text.upper() for text in texts]
    cased, shouted = sentence_case_graph(tf.constant(texts))
    graph = [(text.decode(), bool(flag)) for text, flag in zip(cased.numpy(), shouted.numpy())]
    assert graph == [sentence_case(text) for text in texts]
    assert sum(flag for _, flag in graph) > 1000


def test_upper_case_graph_is_str_upper_nul_characters_included():
    import tensorflow as tf

    texts = [["hello. we went\x00 home", "", "\x00"], ["straße οδος", "i'm 35", "ǆ\x00ǆ"]]
    upper = [[text.decode() for text in row] for row in upper_case_graph(tf.constant(texts)).numpy()]
    assert upper == [[text.upper() for text in row] for row in texts]
