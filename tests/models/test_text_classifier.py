import keras
import numpy as np
import pytest

from seqtasks.models import TextClassifier
from seqtasks.models.text_classifier import TextClassifierEnsemble, masked_max
from seqtasks.tasks.sentiment.training import MemberCrossentropy
from seqtasks.training.losses import SmoothedSparseCrossentropy
from tests.support.numerics import tolerance


CLASSIFIER = {"vocab_size": 30, "num_classes": 3, "embedding_dim": 6, "encoder": {"units": 5, "cell_type": "gru"}}


@pytest.mark.parametrize(
    "encoder, pooling",
    [
        ({"units": 8, "cell_type": "lstm", "bidirectional": True}, "last"),
        ({"units": 8, "cell_type": "gru", "num_layers": 2}, "last"),
        ({"units": 8, "cell_type": "gru", "bidirectional": True}, "attention"),
        ({"units": 8, "cell_type": "lstm", "bidirectional": True}, "max"),
    ],
)
def test_a_padded_batch_classifies_exactly_like_each_text_alone(encoder, pooling):
    model = TextClassifier(30, 3, embedding_dim=6, encoder=encoder, pooling=pooling, attention_units=5)
    texts = [[5, 6, 7, 8, 9], [10, 11], [12]]
    batch = np.zeros((3, 7), "int32")
    for row, ids in enumerate(texts):
        batch[row, : len(ids)] = ids
    together = keras.ops.convert_to_numpy(model(batch))
    for row, ids in enumerate(texts):
        alone = keras.ops.convert_to_numpy(model(np.array([ids], "int32")))
        np.testing.assert_allclose(together[row], alone[0], rtol=1e-5, atol=1e-6)


def test_last_state_is_the_forward_state_at_the_last_real_token_and_the_backward_at_the_first():
    model = TextClassifier(20, 2, embedding_dim=4, encoder={"units": 3, "cell_type": "gru", "bidirectional": True})
    ids = np.array([[4, 5, 6, 0, 0]], "int32")
    vectors, _ = model.text_vectors(ids)
    outputs, _ = model.encoder_layer(model.embedding(ids), mask=ids != 0)
    outputs = keras.ops.convert_to_numpy(outputs)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(vectors)[0], np.concatenate([outputs[0, 2, :3], outputs[0, 0, 3:]]), rtol=1e-6)


def test_saves_and_reloads_in_safe_mode(tmp_path):
    model = TextClassifier(20, 2, embedding_dim=4, encoder={"units": 3}, pooling="attention", attention_units=4)
    ids = np.array([[4, 5, 0]], "int32")
    expected = keras.ops.convert_to_numpy(model(ids))
    model.save(tmp_path / "classifier.keras")
    restored = keras.models.load_model(tmp_path / "classifier.keras", safe_mode=True)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(restored(ids)), expected, rtol=1e-6)


def test_rejects_an_unknown_pooling():
    with pytest.raises(ValueError, match=r"Expected one of \{'last', 'attention', 'max', 'structured'\}. Received: pooling='mean'"):
        TextClassifier(10, 2, pooling="mean")


def test_max_pooling_reads_only_real_steps_even_when_every_real_value_is_below_the_padding():
    outputs = np.array([[[-3.0, -1.0], [-2.0, -5.0], [0.0, 0.0]], [[0.0, 0.0]] * 3], "float32")
    mask = np.array([[True, True, False], [False, False, False]])
    pooled = keras.ops.convert_to_numpy(masked_max(outputs, mask))
    np.testing.assert_array_equal(pooled, [[-2.0, -1.0], [0.0, 0.0]])  # no real step: zeros


def test_max_pooling_is_the_largest_encoder_output_over_the_real_tokens():
    encoder = {"units": 3, "cell_type": "gru", "bidirectional": True}
    model = TextClassifier(20, 2, embedding_dim=4, encoder=encoder, pooling="max")
    ids = np.array([[4, 5, 6, 0, 0]], "int32")
    vectors, weights = model.text_vectors(ids)
    outputs, _ = model.encoder_layer(model.embedding(ids), mask=ids != 0)
    assert weights is None and model.text_vector_size == 6
    largest = keras.ops.convert_to_numpy(outputs)[0, :3].max(axis=0)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(vectors)[0], largest)


def _softmax(logits):
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True)


def test_ensemble_members_start_different_and_it_predicts_their_mean_probabilities():
    ensemble = TextClassifierEnsemble(3, CLASSIFIER)
    ids = np.array([[4, 5, 6, 0], [7, 8, 0, 0]], "int32")
    members = np.stack([keras.ops.convert_to_numpy(member(ids)) for member in ensemble.member_models], axis=1)
    assert members.shape == (2, 3, 3)
    assert not np.allclose(members[:, 0], members[:, 1]) and not np.allclose(members[:, 1], members[:, 2])
    first_kernels = [member.embedding.embeddings.numpy() for member in ensemble.member_models]
    assert not np.allclose(first_kernels[0], first_kernels[1])
    logits = keras.ops.convert_to_numpy(ensemble(ids))
    np.testing.assert_allclose(_softmax(logits), _softmax(members).mean(axis=1), rtol=1e-5, atol=1e-7)
    assert ensemble.count_params() == 3 * ensemble.member_models[0].count_params()


def test_ensemble_trains_on_its_members_logits_with_the_sum_of_their_losses():
    ensemble = TextClassifierEnsemble(2, {**CLASSIFIER, "dropout": 0.5})
    ids = np.array([[4, 5, 6], [7, 8, 0]], "int32")
    labels = np.array([2, 0])
    members = keras.ops.convert_to_numpy(ensemble(ids, training=True))
    assert members.shape == (2, 2, 3)
    loss = MemberCrossentropy(0.1, reduction=None)
    alone = SmoothedSparseCrossentropy(0.1, reduction=None)
    expected = sum(keras.ops.convert_to_numpy(alone(labels, members[:, index])) for index in range(2))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loss(labels, members)), expected, rtol=1e-6)
    # Validation reads the ensemble's logits: one cross-entropy.
    logits = keras.ops.convert_to_numpy(ensemble(ids))
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(loss(labels, logits)), keras.ops.convert_to_numpy(alone(labels, logits)), rtol=1e-6
    )


def test_ensemble_config_round_trip_and_safe_reload(tmp_path):
    ensemble = TextClassifierEnsemble(2, {**CLASSIFIER, "pooling": "max"})
    ids = np.array([[4, 5, 0]], "int32")
    expected = keras.ops.convert_to_numpy(ensemble(ids))
    config = ensemble.get_config()
    assert config["members"] == 2 and config["classifier"]["pooling"] == "max"
    assert TextClassifierEnsemble.from_config(config).get_config() == config
    ensemble.save(tmp_path / "ensemble.keras")
    restored = keras.models.load_model(tmp_path / "ensemble.keras", safe_mode=True)
    assert isinstance(restored, TextClassifierEnsemble)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(restored(ids)), expected, rtol=1e-6)


@pytest.mark.parametrize("members", [1, 0, 2.0, True])
def test_ensemble_rejects_fewer_than_two_members(members):
    with pytest.raises(ValueError, match=f"Expected an int of at least 2. Received: members={members!r}"):
        TextClassifierEnsemble(members, CLASSIFIER)


def _np(x):
    return keras.ops.convert_to_numpy(x)


ENCODER = {"cell_type": "gru", "units": 4, "bidirectional": True}


@pytest.mark.backends
def test_the_models_attention_maps_are_the_weights_they_pool_and_tag_with():
    from seqtasks.models import SequenceTagger
    from seqtasks.models.text_classifier import TextClassifier

    ids = np.array([[5, 6, 7, 8], [9, 4, 0, 0]], "int32")
    real = ids != 0
    classifier = TextClassifier(20, 2, embedding_dim=6, encoder=ENCODER, pooling="structured", hops=3, self_attention="luong")
    maps = {name: _np(value) for name, value in classifier.attention_maps(ids).items()}
    assert sorted(maps) == ["hops", "self_attention"]
    assert maps["hops"].shape == (2, 3, 4) and maps["self_attention"].shape == (2, 4, 4)
    np.testing.assert_allclose(maps["hops"].mean(axis=1), _np(classifier.text_vectors(ids)[1]), **tolerance(atol=1e-6))
    np.testing.assert_allclose(maps["self_attention"].sum(-1), real.astype("float32"), **tolerance(atol=1e-6))
    assert np.all(maps["self_attention"][1][:, 2:] == 0) and np.all(maps["hops"][1][:, 2:] == 0)
    pooled = TextClassifier(20, 2, embedding_dim=6, encoder=ENCODER, pooling="attention")
    (weights,) = pooled.attention_maps(ids).values()
    np.testing.assert_allclose(_np(weights)[:, 0], _np(pooled.text_vectors(ids)[1]), **tolerance(atol=1e-6))
    assert TextClassifier(20, 2, embedding_dim=6, encoder=ENCODER, pooling="max").attention_maps(ids) == {}

    tagger = SequenceTagger(20, 10, 3, word_embedding_dim=6, encoder=ENCODER, self_attention="bahdanau", output_layer="softmax")
    features = {"words": ids, "characters": np.ones((2, 4, 5), "int32"), "casing": np.zeros((2, 4), "int32")}
    (weights,) = tagger.attention_maps(features).values()
    np.testing.assert_allclose(_np(weights).sum(-1), real.astype("float32"), **tolerance(atol=1e-6))
    assert SequenceTagger(20, 10, 3, word_embedding_dim=6, encoder=ENCODER).attention_maps(features) == {}
