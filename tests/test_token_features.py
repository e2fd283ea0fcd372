import tensorflow as tf

from seqtasks.text.token_features import TokenFeaturizer, build_vocabularies, casing_ids


def test_casing_classes():
    tokens = tf.constant(["rejects", "EU", "German", "1996", "iPhone", ",", "U.S.", "élan", "ÉCOLE", "B2B"])
    assert casing_ids(tokens).numpy().tolist() == [1, 2, 3, 4, 5, 5, 2, 1, 2, 4]


def test_vocabularies_lower_case_words_map_digits_and_count():
    words, characters = build_vocabularies([["The", "the", "1996"], ["Rare", "The"]], True, min_word_count=2)
    assert words == ["[PAD]", "[UNK]", "the"]
    assert characters[:2] == ["[PAD]", "[UNK]"] and "T" in characters and "9" in characters
    words, _ = build_vocabularies([["1996", "2001"]], True, min_word_count=2)
    assert words == ["[PAD]", "[UNK]", "0000"]


def test_features_pad_truncate_and_fall_back_to_unknown():
    featurizer = TokenFeaturizer(["[PAD]", "[UNK]", "eu", "rejects"], ["[PAD]", "[UNK]", "E", "U"], True, 3)
    tokens = tf.ragged.constant([["EU", "rejects", "Bonn"], ["eu"], []])
    features = featurizer.features(tokens)
    assert features["words"].numpy().tolist() == [[2, 3, 1], [2, 0, 0], [0, 0, 0]]
    assert features["characters"].numpy()[0].tolist() == [[2, 3, 0], [1, 1, 1], [1, 1, 1]]
    assert features["casing"].numpy().tolist() == [[2, 1, 3], [1, 0, 0], [0, 0, 0]]
    empty = featurizer.features(tf.ragged.constant([[]], dtype=tf.string))
    assert empty["words"].shape == (1, 1) and empty["characters"].shape == (1, 1, 3)
