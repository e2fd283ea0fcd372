import numpy as np
import tensorflow as tf

from seqtasks.text.special_ids import END_ID, PAD_ID, RESERVED_TOKENS, START_ID, UNK_ID
from seqtasks.text.word_tokenizer import WordTokenizer


def digits_tokenizer():
    # As the toy task builds it: digit d has id len(RESERVED_TOKENS) + d = 4 + d.
    return WordTokenizer([str(digit) for digit in range(10)])


def test_vocabulary_is_the_reserved_tokens_then_the_words_in_order():
    tokenizer = WordTokenizer(["b", "[UNK]", "a", "[END]", "c"])
    assert tokenizer.vocab == ["[PAD]", "[UNK]", "[START]", "[END]", "b", "a", "c"]
    assert tokenizer.vocab_size == 7
    assert digits_tokenizer().vocab_size == len(RESERVED_TOKENS) + 10


def test_tokenize_splits_on_whitespace_and_maps_unknown_words_to_unk():
    ids = digits_tokenizer().tokenize(tf.constant(["3 1 4", "", "  9\tx 0 12 "]))
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    assert ids.to_list() == [[7, 5, 8], [], [13, UNK_ID, 4, UNK_ID]]


def test_tokenize_of_one_string_gives_one_int32_row():
    ids = WordTokenizer(["the", "cat"]).tokenize(tf.constant("the cat the dog"))
    assert ids.dtype == tf.int32
    assert ids.numpy().tolist() == [4, 5, 4, UNK_ID]


def test_detokenize_joins_words_stopping_at_end_and_dropping_reserved_ids():
    tokenizer = digits_tokenizer()
    rows = np.array(
        [
            [START_ID, 7, 5, UNK_ID, 8, END_ID, 9, 9],
            [6, PAD_ID, 13, PAD_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID],
            [END_ID, 4, 4, 4, 4, 4, 4, 4],
        ],
        np.int32,
    )
    text = tokenizer.detokenize(rows)
    assert text.shape == (3,)
    assert text.numpy().tolist() == [b"3 1 4", b"2 9", b""]


def test_detokenize_takes_ragged_rows_and_round_trips():
    tokenizer = digits_tokenizer()
    ids = tf.ragged.constant([[4], [5, 6, 7, END_ID]], dtype=tf.int32)
    assert tokenizer.detokenize(ids).numpy().tolist() == [b"0", b"1 2 3"]
    text = tf.constant(["8 6 7 5 3 0 9", "2"])
    assert tokenizer.detokenize(tokenizer.tokenize(text)).numpy().tolist() == [b"8 6 7 5 3 0 9", b"2"]


def test_the_vocabulary_is_saved_but_not_trained():
    tokenizer = digits_tokenizer()
    assert tokenizer.trainable_variables == ()
    assert [v.dtype for v in tokenizer.variables] == [tf.string]
    assert tokenizer.words.numpy().tolist()[4:] == [str(d).encode() for d in range(10)]


def test_words_are_split_as_glove_reads_them():
    from seqtasks.text.word_tokenizer import split_words

    texts = tf.constant([
        "I don't like Pierre's 1990 film... It's GREAT!! 'quoted' o'clock dogs' end.",
        "",
        "  Café, naïve—OK?",
    ])
    assert split_words(texts).to_list() == [
        [b"i", b"do", b"n't", b"like", b"pierre", b"'s", b"1990", b"film", b".", b".", b".", b"it", b"'s",
         b"great", b"!", b"!", b"'", b"quoted", b"'", b"o'clock", b"dogs", b"'", b"end", b"."],
        [],
        ["café".encode(), b",", "naïve".encode(), "—".encode(), b"ok", b"?"],
    ]
    assert split_words(tf.constant(["We're THERE, they'll see."]), lower_case=False).to_list() == [
        [b"We", b"'re", b"THERE", b",", b"they", b"'ll", b"see", b"."]]


def test_a_words_tokenizer_looks_up_the_words_it_splits():
    tokenizer = WordTokenizer(["it", "'s", "great", "!"], split="words")
    assert tokenizer.tokenize(tf.constant(["It's GREAT!", "it's awful"])).to_list() == [[4, 5, 6, 7], [4, 5, UNK_ID]]
    assert tokenizer.lower_case and WordTokenizer(["a"]).split == "whitespace"
    import pytest

    with pytest.raises(ValueError, match=r"Expected one of \{.*\}. Received: split='chars'"):
        WordTokenizer(["a"], split="chars")


def test_a_words_tokenizer_without_lower_case_keeps_the_case_of_the_text():
    tokenizer = WordTokenizer(["We", "'re", "there"], split="words", lower_case=False)
    assert tokenizer.pieces(tf.constant(["We're THERE"])).to_list() == [[b"We", b"'re", b"THERE"]]
    assert tokenizer.tokenize(tf.constant(["We're there", "we're THERE"])).to_list() == [
        [4, 5, 6], [UNK_ID, 5, UNK_ID]]


# Raw text as a user types it, and its Penn Treebank tokenization as SST-2 has it.
RAW_AND_TOKENIZED = [
    ("It's not bad at all!", "it 's not bad at all !"),
    ("If you've ever seen it, you'll know: it isn't Miller's best.",
     "if you 've ever seen it , you 'll know : it is n't miller 's best ."),
    ("We can't say 2002's films were 'great'.", "we ca n't say 2002 's films were ' great ' ."),
    ("I'd go; I'm sure they're right (mostly)...", "i 'd go ; i 'm sure they 're right ( mostly ) ..."),
    ("The players' union -- o'clock", "the players ' union -- o'clock"),
]


def test_raw_text_and_its_treebank_tokens_split_alike():
    from seqtasks.text.word_tokenizer import split_words

    raw = split_words(tf.constant([raw for raw, _ in RAW_AND_TOKENIZED])).to_list()
    tokenized = split_words(tf.constant([tokens for _, tokens in RAW_AND_TOKENIZED])).to_list()
    assert raw == tokenized
    assert raw[0] == [b"it", b"'s", b"not", b"bad", b"at", b"all", b"!"]
    assert raw[2][4:6] == [b"2002", b"'s"]
    assert split_words(tf.constant(["'s 's\x00'sup"])).to_list() == [[b"'s", b"'s", b"'", b"sup"]]


def test_a_classifier_gives_raw_text_and_its_tokens_the_same_probabilities():
    import numpy as np

    from seqtasks.models import TextClassifier
    from seqtasks.tasks.sentiment.config import TextClassificationDataConfig
    from seqtasks.tasks.sentiment.export import make_classifier_module
    from seqtasks.tasks.sentiment.task import make_text_encoder
    from seqtasks.text.word_tokenizer import split_words

    words = sorted({w.decode() for row in split_words(tf.constant([t for _, t in RAW_AND_TOKENIZED])).to_list()
                    for w in row})
    tokenizer = WordTokenizer(words, split="words")
    config = TextClassificationDataConfig(path="x", tokenizer="words", max_length=64)
    model = TextClassifier(tokenizer.vocab_size, 2, embedding_dim=8, encoder={"units": 4})
    model.build((None, None))
    server = make_classifier_module(model, tokenizer, make_text_encoder(config, tokenizer), ["neg", "pos"], 64)
    raw = server.serve(tf.constant([raw for raw, _ in RAW_AND_TOKENIZED]))["probabilities"].numpy()
    tokenized = server.serve(tf.constant([tokens for _, tokens in RAW_AND_TOKENIZED]))["probabilities"].numpy()
    np.testing.assert_array_equal(raw, tokenized)
    assert len({tuple(row) for row in raw.round(6)}) == len(RAW_AND_TOKENIZED)
