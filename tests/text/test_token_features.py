import tensorflow as tf

from seqtasks.text.token_features import TokenFeaturizer, build_vocabularies, casing_ids, normalize_words


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


def test_words_are_lower_cased_beyond_ascii_and_digits_become_zero():
    tokens = tf.constant(["ÉCOLE", "Ünï", "B2B", "١٩٩٦"])
    assert [t.decode() for t in normalize_words(tokens, True).numpy()] == ["école", "ünï", "b0b", "0000"]
    assert normalize_words(tokens, False).numpy().tolist() == tokens.numpy().tolist()
    words, _ = build_vocabularies([["ÉCOLE", "école"]], True, min_word_count=2)
    assert words == ["[PAD]", "[UNK]", "école"]
    featurizer = TokenFeaturizer(["[PAD]", "[UNK]", "école"], ["[PAD]", "[UNK]", "É"], True, 2)
    assert featurizer.features(tf.ragged.constant([["ÉCOLE", "École"]]))["words"].numpy().tolist() == [[2, 2]]


def test_traced_features_keep_the_static_character_width():
    featurizer = TokenFeaturizer(["[PAD]", "[UNK]", "eu"], ["[PAD]", "[UNK]", "E", "U"], True, 3)
    spec = tf.RaggedTensorSpec([None, None], tf.string, ragged_rank=1)
    outputs = tf.function(featurizer.features).get_concrete_function(spec).structured_outputs
    assert {name: value.shape.as_list() for name, value in outputs.items()} == {
        "words": [None, None],
        "characters": [None, None, 3],
        "casing": [None, None],
    }
    assert {value.dtype for value in outputs.values()} == {tf.int32}


def test_a_vocabulary_of_reserved_entries_only_maps_every_word_to_unknown():
    words, characters = build_vocabularies([["Rare", "once"]], True, min_word_count=2)
    assert words == ["[PAD]", "[UNK]"]
    featurizer = TokenFeaturizer(words, characters, True, 2)
    assert featurizer.features(tf.ragged.constant([["Rare", "new"]]))["words"].numpy().tolist() == [[1, 1]]


def test_words_are_sorted_and_with_singletons_last_the_words_seen_once_follow_the_others():
    sentences = [["d", "b", "c", "a"], ["b", "c", "b"]]  # a: 1, b: 3, c: 2, d: 1
    assert build_vocabularies(sentences, True, min_word_count=1)[0] == ["[PAD]", "[UNK]", "a", "b", "c", "d"]
    words, _ = build_vocabularies(sentences, True, min_word_count=1, singletons_last=True)
    assert words == ["[PAD]", "[UNK]", "b", "c", "a", "d"]
    words, _ = build_vocabularies(sentences, True, min_word_count=2, singletons_last=True)
    assert words == ["[PAD]", "[UNK]", "b", "c"]
