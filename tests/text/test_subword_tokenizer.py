import numpy as np
import pytest
import tensorflow as tf

from seqtasks.text.special_ids import END_ID, RESERVED_TOKENS, START_ID, UNK_ID
from seqtasks.text.subword_tokenizer import SubwordTokenizer, learn_vocabulary, normalize, tidy_punctuation

TEXTS = [
    "I don't know, do you?",
    "Where is the bathroom?",
    "¿Dónde está el baño?",
    "Tom's dog (a big one) is 3% faster.",
    "She makes me happy.",
] * 20


@pytest.fixture(scope="module")
def vocabulary():
    return learn_vocabulary(TEXTS, 300, lower_case=True)


# Built in each test, not once per module: mutmut runs for a mutant of `__init__` only the tests
# during which `__init__` ran, and a module-scoped tokenizer is built during the first test alone.
@pytest.fixture
def tokenizer(vocabulary):
    return SubwordTokenizer(vocabulary, lower_case=True)


def test_vocabulary_starts_with_the_reserved_tokens(tokenizer):
    assert tokenizer.vocab[: len(RESERVED_TOKENS)] == list(RESERVED_TOKENS)
    assert tokenizer.vocab[START_ID] == "[START]" and tokenizer.vocab[END_ID] == "[END]"


def test_round_trip_gives_the_normalised_text(tokenizer):
    ids = tokenizer.tokenize(tf.constant(TEXTS[:5]))
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    text = [t.decode() for t in tokenizer.detokenize(ids).numpy()]
    assert text == [
        "i don't know, do you?",
        "where is the bathroom?",
        "¿dónde está el baño?",
        "tom's dog (a big one) is 3% faster.",
        "she makes me happy.",
    ]


def test_case_is_folded_by_default_and_kept_on_request(vocabulary):
    text = tf.constant(["Where IS Tom?"])
    folded = SubwordTokenizer(vocabulary)
    ids = folded.tokenize(text)
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    assert folded.detokenize(ids).numpy()[0].decode() == "where is tom?"
    kept = SubwordTokenizer(vocabulary, lower_case=False)
    # The vocabulary was learned lower-cased: a word with a capital has no pieces, so it is one [UNK].
    assert kept.tokenize(text).to_list() == [[UNK_ID, UNK_ID, UNK_ID, vocabulary.index("?")]]
    assert kept.detokenize(kept.tokenize(text)).numpy()[0].decode() == "?"


def test_unseen_words_split_into_known_pieces(tokenizer):
    ids = tokenizer.tokenize(tf.constant(["bathtoms"])).to_list()[0]
    assert len(ids) > 1 and UNK_ID not in ids
    assert tokenizer.detokenize(tf.constant([ids])).numpy()[0].decode() == "bathtoms"


def test_detokenize_stops_at_end_and_drops_reserved_tokens(tokenizer):
    ids = tokenizer.tokenize(tf.constant(["she makes me happy."])).to_list()[0]
    row = [START_ID] + ids + [END_ID] + ids + [0, 0]
    assert tokenizer.detokenize(tf.constant([row])).numpy()[0].decode() == "she makes me happy."


def test_tidy_punctuation_undoes_the_spaces_tokenization_added():
    text = tf.constant(["( a ) , b ! ¿ c ? [ d ] : 5 %", "don ' t", "the boys '", "the boys ' 3 dogs", "a '\tb"])
    assert [t.decode() for t in tidy_punctuation(text).numpy()] == [
        "(a), b! ¿c? [d]: 5%",
        "don't",
        "the boys'",
        "the boys' 3 dogs",
        "a'\tb",
    ]


def test_a_trailing_apostrophe_goes_back_onto_its_word(tokenizer):
    ids = tokenizer.tokenize(tf.constant(["where is tom'"]))
    assert tokenizer.detokenize(ids).numpy()[0].decode() == "where is tom'"


def test_empty_and_odd_inputs_do_not_fail(tokenizer):
    ids = tokenizer.tokenize(tf.constant(["", "a" * 2000, "漢字 🙂 \x00\x07"]))
    lengths = [len(row) for row in ids.to_list()]
    assert lengths[0] == 0 and lengths[1] >= 1 and lengths[2] >= 1
    assert np.all(ids.flat_values.numpy() < tokenizer.vocab_size)


def test_vocabulary_without_reserved_tokens_is_refused():
    with pytest.raises(ValueError, match="Expected the vocabulary to start with"):
        SubwordTokenizer(["a", "b"])


def test_a_vocabulary_larger_than_the_data_gives_is_noted(capsys):
    vocab = learn_vocabulary(["a cat sat", "a dog ran"], 500, True, "data.vocab_size")
    assert len(vocab) < 500
    assert capsys.readouterr().out.strip() == (
        f"Note: data.vocab_size is 500, but the training data gives only {len(vocab)} subwords; using {len(vocab)}"
    )


def test_no_note_without_a_field_or_when_the_data_fills_the_vocabulary(capsys):
    texts = ["a cat sat", "a dog ran"]
    size = len(learn_vocabulary(texts, 500, True))
    assert size < 500
    assert len(learn_vocabulary(texts, size, True, "data.vocab_size")) == size
    assert capsys.readouterr().out == ""


def test_normalize_applies_nfkc_and_folds_case_keeping_accents():
    text = tf.constant(["ﬁne ＫÉ Straße"])
    assert normalize(text, False).numpy()[0].decode() == "fine KÉ Straße"
    assert normalize(text, True).numpy()[0].decode() == "fine ké strasse"


def test_the_learned_vocabulary_is_normalised_like_the_text():
    texts = ["The CAT sat", "the ﬁne cat sät"]
    folded = set(learn_vocabulary(texts, 100, lower_case=True)[len(RESERVED_TOKENS) :])
    assert {"t", "c", "s", "f", "ä", "##ä"} <= folded
    assert not folded & {"T", "C", "A", "##A", "ﬁ", "##ﬁ"}
    kept = set(learn_vocabulary(texts, 100, lower_case=False)[len(RESERVED_TOKENS) :])
    assert {"T", "C", "##A", "##T", "t", "f", "ä", "##ä"} <= kept
    assert not kept & {"ﬁ", "##ﬁ"}
