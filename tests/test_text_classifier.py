import keras
import numpy as np
import pytest

from seqtasks.models import TextClassifier


@pytest.mark.parametrize(
    "encoder, pooling",
    [
        ({"units": 8, "cell_type": "lstm", "bidirectional": True}, "last"),
        ({"units": 8, "cell_type": "gru", "num_layers": 2}, "last"),
        ({"units": 8, "cell_type": "gru", "bidirectional": True}, "attention"),
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
    with pytest.raises(ValueError, match=r"Expected one of \{'last', 'attention'\}. Received: pooling='max'"):
        TextClassifier(10, 2, pooling="max")
