import numpy as np
import pytest
import tensorflow as tf

from seqtasks.special_ids import END_ID, RESERVED_TOKENS, START_ID, UNK_ID
from seqtasks.text.subword_tokenizer import SubwordTokenizer, learn_vocabulary

TEXTS = [
    "I don't know, do you?",
    "Where is the bathroom?",
    "¿Dónde está el baño?",
    "Tom's dog (a big one) is 3% faster.",
    "She makes me happy.",
] * 20


@pytest.fixture(scope="module")
def tokenizer():
    return SubwordTokenizer(learn_vocabulary(TEXTS, 300, lower_case=True), lower_case=True)


def test_vocabulary_starts_with_the_reserved_tokens(tokenizer):
    assert tokenizer.vocab[: len(RESERVED_TOKENS)] == list(RESERVED_TOKENS)
    assert tokenizer.vocab[START_ID] == "[START]" and tokenizer.vocab[END_ID] == "[END]"


def test_round_trip_gives_the_normalised_text(tokenizer):
    ids = tokenizer.tokenize(tf.constant(TEXTS[:5]))
    text = [t.decode() for t in tokenizer.detokenize(ids).numpy()]
    assert text == [
        "i don't know, do you?",
        "where is the bathroom?",
        "¿dónde está el baño?",
        "tom's dog (a big one) is 3% faster.",
        "she makes me happy.",
    ]


def test_unseen_words_split_into_known_pieces(tokenizer):
    ids = tokenizer.tokenize(tf.constant(["bathtoms"])).to_list()[0]
    assert len(ids) > 1 and UNK_ID not in ids
    assert tokenizer.detokenize(tf.constant([ids])).numpy()[0].decode() == "bathtoms"


def test_detokenize_stops_at_end_and_drops_reserved_tokens(tokenizer):
    ids = tokenizer.tokenize(tf.constant(["she makes me happy."])).to_list()[0]
    row = [START_ID] + ids + [END_ID] + ids + [0, 0]
    assert tokenizer.detokenize(tf.constant([row])).numpy()[0].decode() == "she makes me happy."


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
