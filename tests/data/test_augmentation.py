"""`seqtasks.data.augmentation`: each transform on hand-written text, the shares drawn over 10,000 examples, the
draws set by the seed and epoch alone, and a resumed epoch augmented as an uninterrupted one."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf

from seqtasks.data import augmentation
from seqtasks.data.augmentation import DRAWS, PairAugmenter, TokenAugmenter, capitalised_words, draws
from seqtasks.training.position import training_position

NONE = dict(lower_case=0.0, upper_case=0.0, title_case=0.0, drop_punctuation=0.0, strip_accents=0.0, typos=0.0,
            join=0.0, join_max=3, conjunctions=[])


def _config(**shares):
    return SimpleNamespace(**{**NONE, **shares})


def _strings(tensor):
    return [value.decode() for value in tensor.numpy()]


def _draws(rows, **columns):
    """`rows` rows of draws, each column 0.5 but those given (by their names in the module)."""
    table = np.full((rows, DRAWS), 0.5, np.float32)
    for name, value in columns.items():
        table[:, getattr(augmentation, f"_{name.upper()}")] = value
    return tf.constant(table)


@pytest.mark.parametrize("function, texts, expected", [
    (augmentation.title_case, ["hola MUNDO, ¿qué tal?", "", "o'neill 3rd"], ["Hola Mundo, ¿Qué Tal?", "", "O'neill 3Rd"]),
    (augmentation.lower_first_letter, ["¿Vienes?", "Tom vino.", "3 Gatos", ""], ["¿vienes?", "tom vino.", "3 gatos", ""]),
    (augmentation.drop_punctuation, ["¿Dónde está?", "«Hola.»", "Sí...", "¡Ay! ¿Qué?", "Hola", "3.5"],
     ["Dónde está", "«Hola»", "Sí", "Ay! Qué", "Hola", "3.5"]),
    (augmentation.strip_accents, ["¿Dónde está la estación?", "Ñandú, pingüino", "Straße"],
     ["¿Donde esta la estacion?", "Nandu, pinguino", "Straße"]),
    # Letters beyond ASCII are raised too; a ligature, a superscript and a full-width letter, which carry no
    # combining mark, stay as written (composed again as NFC, not folded as NFKC would).
    (augmentation.title_case, ["élan ñandú über"], ["Élan Ñandú Über"]),
    (augmentation.lower_first_letter, ["Ñandú corre.", "ÉL"], ["ñandú corre.", "éL"]),
    (augmentation.strip_accents, ["ﬁn, m², Ａ, é"], ["ﬁn, m², Ａ, e"]),
])
def test_each_transform_of_hand_written_text(function, texts, expected):
    assert _strings(function(tf.constant(texts))) == expected


@pytest.mark.parametrize("at, kind, expected", [
    (0.0, 0.1, "ola, sí"), (0.0, 0.5, "hhola, sí"), (0.0, 0.9, "ohla, sí"),
    # The last letter: dropped, doubled, and swapped with nothing after it, so doubled.
    (0.99, 0.1, "hola, s"), (0.99, 0.5, "hola, síí"), (0.99, 0.9, "hola, síí"),
    # The fourth of six letters, "a": swapped with the comma after it.
    (0.5, 0.9, "hol,a sí"),
])
def test_a_typo_drops_doubles_or_swaps_the_drawn_letter(at, kind, expected):
    typed = augmentation.typo(tf.constant(["hola, sí", "123 !"]), tf.constant([at, at]), tf.constant([kind, kind]))
    assert _strings(typed) == [expected, "123 !"]  # a text without a letter is kept


@pytest.mark.parametrize("function", [augmentation._lower, augmentation._upper, augmentation.title_case,
                                      augmentation.lower_first_letter])
def test_a_text_holding_a_nul_character_is_kept_as_it_is(function):
    # TensorFlow's UTF-8 case mapping ends a string at its first NUL ("Tom\x00XY" would become "tom").
    assert _strings(function(tf.constant(["Tom\x00XY", "Ana"])))[0] == "Tom\x00XY"


@pytest.mark.parametrize("kind, expected", [
    (0.3, "ola, sí"),  # below 1/3: dropped
    (1 / 3, "hhola, sí"),  # from 1/3: doubled
    (2 / 3, "ohla, sí"),  # from 2/3: swapped
])
def test_a_typo_s_kind_changes_at_one_third_and_two_thirds(kind, expected):
    # The boundaries as float32 draws hold them.
    kinds = tf.constant([kind, kind, kind], tf.float32)
    typed = augmentation.typo(tf.constant(["hola, sí", "123 !", ""]), tf.zeros([3]), kinds)
    assert _strings(typed) == [expected, "123 !", ""]  # an empty text is kept, the last row included


def test_capitalised_words_are_those_written_so_inside_sentences_as_often_as_not():
    texts = ["Tom is here. The cat sleeps.", "I think Tom left, and I stayed.", "He went to Boston. Boston is big.",
             "the boston tea", "The the"]
    # "Boston" is capitalised once inside a sentence and lower-cased once; "The" only starts sentences.
    assert capitalised_words(texts) == ["Boston", "I", "Tom"]


def test_capitalised_words_count_each_writing_of_a_word():
    # "Ana" twice capitalised and twice not: kept; "Rosa" and "Ebay" once against twice: left out; "eBay" counts as
    # lower-cased (its first letter), one-letter words ("a", "y") are words too.
    texts = ["Hoy Ana vio a Ana y a ana y a ana.", "Luego Rosa y rosa y rosa.", "Compro en eBay y en eBay y en Ebay."]
    assert capitalised_words(texts) == ["Ana"]


PAIRS = [("Tengo hambre.", "I'm hungry."), ("Tom está aquí.", "Tom is here."),
         ("¿Vienes?", "Are you coming?"), ("Estoy cansado.", "I am tired.")]


def _augment(config, table, pairs=PAIRS, names=((), ())):
    augmenter = PairAugmenter(config, seed=1, source_names=names[0], target_names=names[1])
    sources, targets = augmenter(table, tf.constant([s for s, _ in pairs]), tf.constant([t for _, t in pairs]))
    return list(zip(_strings(sources), _strings(targets)))


@pytest.mark.parametrize("share, column, expected", [
    ("lower_case", dict(case=0.0), [("tengo hambre.", "I'm hungry."), ("tom está aquí.", "Tom is here.")]),
    ("upper_case", dict(case=0.0), [("TENGO HAMBRE.", "I'M HUNGRY."), ("TOM ESTÁ AQUÍ.", "TOM IS HERE.")]),
    ("title_case", dict(case=0.0), [("Tengo Hambre.", "I'm Hungry."), ("Tom Está Aquí.", "Tom Is Here.")]),
    ("drop_punctuation", dict(punctuation=0.0), [("Tengo hambre", "I'm hungry."), ("Tom está aquí", "Tom is here.")]),
    ("strip_accents", dict(accents=0.0), [("Tengo hambre.", "I'm hungry."), ("Tom esta aqui.", "Tom is here.")]),
    ("typos", dict(typo=0.0, typo_at=0.0, typo_kind=0.5), [("TTengo hambre.", "I'm hungry."),
                                                           ("TTom está aquí.", "Tom is here.")]),
])
def test_a_transform_changes_the_source_and_the_target_only_where_it_must(share, column, expected):
    got = _augment(_config(**{share: 0.4}), _draws(2, **column), PAIRS[:2])
    assert got == expected
    # A draw at or above the share leaves the pair as it is.
    assert _augment(_config(**{share: 0.4}), _draws(2, **{name: 0.4 for name in column}), PAIRS[:2]) == PAIRS[:2]


def test_the_case_transforms_share_one_draw():
    config = _config(lower_case=0.2, upper_case=0.3, title_case=0.1)
    by_draw = {0.1: "tengo hambre.", 0.25: "TENGO HAMBRE.", 0.55: "Tengo Hambre.", 0.65: "Tengo hambre."}
    for value, source in by_draw.items():
        assert _augment(config, _draws(1, case=value), PAIRS[:1])[0][0] == source, value


# What `capitalised_words` finds in training text: "I'm" is a word of its own.
NAMES = (["Tom"], ["I", "I'm", "Tom"])


@pytest.mark.parametrize("count, mode, expected", [
    # Two pairs as sentences of one text (mode 0), with a comma (1), with the conjunctions (2).
    (0.0, 0.1, [("Tengo hambre. Tom está aquí.", "I'm hungry. Tom is here."),
                ("Tom está aquí. ¿Vienes?", "Tom is here. Are you coming?"),
                ("¿Vienes? Estoy cansado.", "Are you coming? I am tired."),
                ("Estoy cansado. Tengo hambre.", "I am tired. I'm hungry.")]),
    (0.0, 0.5, [("Tengo hambre, Tom está aquí.", "I'm hungry, Tom is here."),
                # A question cannot be joined into one sentence: the pair is joined as sentences instead.
                ("Tom está aquí. ¿Vienes?", "Tom is here. Are you coming?"),
                ("¿Vienes? Estoy cansado.", "Are you coming? I am tired."),
                # "I" stays capitalised: the training data writes it so inside sentences.
                ("Estoy cansado, tengo hambre.", "I am tired, I'm hungry.")]),
    (0.0, 0.9, [("Tengo hambre y Tom está aquí.", "I'm hungry and Tom is here."),
                ("Tom está aquí. ¿Vienes?", "Tom is here. Are you coming?"),
                ("¿Vienes? Estoy cansado.", "Are you coming? I am tired."),
                ("Estoy cansado y tengo hambre.", "I am tired and I'm hungry.")]),
    # Three pairs: in one sentence only where all three are statements.
    (0.9, 0.9, [("Tengo hambre. Tom está aquí. ¿Vienes?", "I'm hungry. Tom is here. Are you coming?"),
                ("Tom está aquí. ¿Vienes? Estoy cansado.", "Tom is here. Are you coming? I am tired."),
                ("¿Vienes? Estoy cansado. Tengo hambre.", "Are you coming? I am tired. I'm hungry."),
                ("Estoy cansado y tengo hambre y Tom está aquí.", "I am tired and I'm hungry and Tom is here.")]),
])
def test_joined_pairs_are_sentences_of_one_text_or_one_sentence_of_statements(count, mode, expected):
    config = _config(join=0.5, conjunctions=["y", "and"])
    assert _augment(config, _draws(4, join=0.0, join_count=count, join_mode=mode), names=NAMES) == expected
    # Without conjunctions a statement is joined with a comma.
    commas = _augment(_config(join=0.5), _draws(4, join=0.0, join_count=0.0, join_mode=0.9), names=NAMES)
    assert commas[0] == ("Tengo hambre, Tom está aquí.", "I'm hungry, Tom is here.")
    # Without them there are two ways to join, each half the draws: below one half, as sentences.
    sentences = _augment(_config(join=0.5), _draws(4, join=0.0, join_count=0.0, join_mode=0.4), names=NAMES)
    assert sentences[0] == ("Tengo hambre. Tom está aquí.", "I'm hungry. Tom is here.")
    assert _augment(config, _draws(4, join=0.5), names=NAMES) == PAIRS


def test_joining_comes_first_then_the_source_s_case_punctuation_accents_and_typos():
    config = _config(join=1.0, lower_case=1.0, drop_punctuation=1.0, strip_accents=1.0)
    got = _augment(config, _draws(4, join=0.0, join_count=0.0, join_mode=0.0, case=0.0, punctuation=0.0,
                                  accents=0.0), names=NAMES)
    assert got[1] == ("tom esta aqui. vienes", "Tom is here. Are you coming?")


def _within_binomial(count, share, draws_made):
    sigma = math.sqrt(draws_made * share * (1 - share))
    return abs(count - draws_made * share) <= 4 * sigma


@pytest.mark.parametrize("shares", [
    dict(lower_case=0.3, upper_case=0.1, title_case=0.05),
    dict(drop_punctuation=0.25), dict(strip_accents=0.15), dict(typos=0.1), dict(join=0.2),
])
def test_the_shares_are_honoured_over_10000_draws(shares):
    size = 10_000
    pairs = [("¿Dónde está la estación?", "Where is the station?"), ("Él tiene hambre.", "He is hungry.")] * (size // 2)
    got = _augment(_config(**shares, conjunctions=["y", "and"]), draws(7, 3, size), pairs)
    sources = [source for source, _ in got]
    originals = [source for source, _ in pairs]
    titled = dict(zip(originals[:2], _strings(augmentation.title_case(tf.constant(originals[:2])))))
    outcomes = {
        "lower_case": sum(s == o.lower() for s, o in zip(sources, originals)),
        "upper_case": sum(s == o.upper() for s, o in zip(sources, originals)),
        "title_case": sum(s == titled[o] for s, o in zip(sources, originals)),
        "drop_punctuation": sum(s != o for s, o in zip(sources, originals)),
        "strip_accents": sum(s != o for s, o in zip(sources, originals)),
        "typos": sum(s != o for s, o in zip(sources, originals)),
        "join": sum(s != o for s, o in zip(sources, originals)),
    }
    for name, share in shares.items():
        assert _within_binomial(outcomes[name], share, size), (name, outcomes[name])
    if "join" in shares:  # two or three pairs, half each
        three = sum(s.count(".") + s.count("?") + s.count(",") + s.count(" y ") >= 3 for s in sources)
        assert _within_binomial(three, shares["join"] / 2, size), three


def test_the_draws_depend_on_the_seed_and_the_epoch_alone():
    first = draws(5, 2, 100).numpy()
    assert first.shape == (100, DRAWS) and 0 <= first.min() and first.max() < 1
    tf.random.set_seed(99)  # a global seed changes nothing
    np.testing.assert_array_equal(draws(5, 2, 100).numpy(), first)
    np.testing.assert_array_equal(draws(5, tf.constant(2, tf.int64), 100).numpy(), first)
    assert not np.array_equal(draws(5, 3, 100).numpy(), first)
    assert not np.array_equal(draws(6, 2, 100).numpy(), first)


@pytest.fixture
def position():
    yield training_position()
    training_position().start_epoch(0)


def _translation_batches(epoch, batches_done=0, augmenter=True):
    from seqtasks.tasks.translation.task import make_dataset
    from seqtasks.text.word_tokenizer import WordTokenizer

    words = sorted({w for pair in SENTENCES for side in pair for w in side.replace(".", " .").lower().split()})
    tokenizer = WordTokenizer(words)
    config = _config(lower_case=0.3, drop_punctuation=0.3, join=0.3, typos=0.2)
    chosen = PairAugmenter(config, seed=4) if augmenter else None
    training_position().start_epoch(epoch, batches_done)
    data = make_dataset(SENTENCES, tokenizer, tokenizer, 12, 4, shuffle_seed=3, augmenter=chosen)
    return [[part.tolist() for part in (source, target_in, target_out)]
            for (source, target_in), target_out in data.as_numpy_iterator()]


SENTENCES = [(f"el perro {i} come.", f"the dog {i} eats.") for i in range(30)]


def test_a_resumed_epoch_trains_on_the_draws_an_uninterrupted_one_does(position):
    whole = _translation_batches(epoch=1)
    assert _translation_batches(epoch=1, batches_done=3) == whole[3:]
    assert _translation_batches(epoch=1) == whole
    assert _translation_batches(epoch=2) != whole
    # Some examples were joined: a source longer than any pair's (5 tokens).
    assert max(len([t for t in row if t]) for batch in whole for row in batch[0]) > 5
    plain = _translation_batches(epoch=1, augmenter=False)
    assert sum(len(batch[0]) for batch in plain) == sum(len(batch[0]) for batch in whole) == len(SENTENCES)


def test_tagging_lowers_or_raises_a_share_of_the_sentences_and_keeps_their_tags():
    config = SimpleNamespace(lower_case=0.3, upper_case=0.1)
    tokens = tf.ragged.constant([["John", "lives", "in", "New", "York"]] * 10_000)
    changed = TokenAugmenter(config, seed=2)(draws(2, 0, 10_000), tokens).to_list()
    lowered = sum(row == [b"john", b"lives", b"in", b"new", b"york"] for row in changed)
    raised = sum(row == [b"JOHN", b"LIVES", b"IN", b"NEW", b"YORK"] for row in changed)
    assert _within_binomial(lowered, 0.3, 10_000) and _within_binomial(raised, 0.1, 10_000)
    kept = [b"John", b"lives", b"in", b"New", b"York"]
    assert lowered + raised + sum(row == kept for row in changed) == 10_000
    dense = TokenAugmenter(config, seed=2)(_draws(2, case=0.0), tf.constant([["A", "b"], ["C", ""]]))
    assert dense.numpy().tolist() == [[b"a", b"b"], [b"c", b""]]


@pytest.mark.parametrize("lower, upper, case, expected", [
    (0.4, 0.0, 0.4, [b"New", b"york"]),  # a draw equal to the lower-case share is not lowered
    (0.2, 0.2, 0.2, [b"NEW", b"YORK"]),  # the upper-case share starts where the lower-case one ends
    (0.2, 0.2, 0.4, [b"New", b"york"]),  # and ends before their sum
])
def test_tagging_s_case_shares_end_where_the_next_begins(lower, upper, case, expected):
    augmenter = TokenAugmenter(SimpleNamespace(lower_case=lower, upper_case=upper), seed=1)
    tokens = augmenter(_draws(1, case=case), tf.ragged.constant([["New", "york"]]))
    assert tokens.to_list() == [expected]


def test_a_resumed_tagging_epoch_trains_on_the_draws_an_uninterrupted_one_does(position):
    from seqtasks.tasks.ner.task import make_dataset
    from seqtasks.text.token_features import TokenFeaturizer

    sentences = [([f"Word{i}", "in", "Paris"], ["O", "O", "B-LOC"]) for i in range(20)]
    featurizer = TokenFeaturizer(["[PAD]", "[UNK]", "in", "paris"],
                                 ["[PAD]", "[UNK]"] + sorted(set("WORDINPARISwordinparis0123456789")), True, 8)

    def batches(epoch, done=0):
        training_position().start_epoch(epoch, done)
        augmenter = TokenAugmenter(SimpleNamespace(lower_case=0.5, upper_case=0.2), seed=1)
        data = make_dataset(sentences, featurizer, {"O": 0, "B-LOC": 1}, 4, shuffle_seed=2, augmenter=augmenter)
        return [(features["casing"].tolist(), tags.tolist()) for features, tags in data.as_numpy_iterator()]

    whole = batches(1)
    assert batches(1, 2) == whole[2:] and batches(2) != whole
    casing = [row for rows, _ in whole for row in rows]
    assert {1, 2, 3} <= {value for row in casing for value in row}  # lower, upper and title case all occur
    assert all(tags == [0, 0, 1] for _, rows in whole for tags in rows)
