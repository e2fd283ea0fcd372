import keras
import numpy as np
import pytest
from layer_test_utils import run_layer_test

from seqtasks.layers import CharacterCNN

pytestmark = pytest.mark.backends


def test_layer_contract(tmp_path):
    characters = np.random.default_rng(0).integers(0, 20, size=(2, 4, 6)).astype("int32")
    run_layer_test(
        CharacterCNN,
        {"vocab_size": 20, "embedding_dim": 5, "filters": 7, "kernel_size": 3, "dropout": 0.1},
        {"inputs": characters},
        tmp_path=tmp_path,
        expected_output_shapes=(2, 4, 7),
        # Embeddings (20, 5), convolution kernel (3, 5, 7) and bias (7,).
        expected_num_trainable_weights=3,
        expected_num_non_trainable_weights=0,
        expected_num_params=20 * 5 + 3 * 5 * 7 + 7,
    )


def test_padding_characters_do_not_change_a_word_and_empty_words_are_zero():
    cnn = CharacterCNN(vocab_size=30, embedding_dim=4, filters=6, kernel_size=3)
    word = np.array([[[5, 9, 12, 0, 0, 0]]], "int32")
    short = keras.ops.convert_to_numpy(cnn(word[:, :, :3]))
    padded = keras.ops.convert_to_numpy(cnn(word))
    np.testing.assert_allclose(padded, short, rtol=1e-6)
    empty = keras.ops.convert_to_numpy(cnn(np.zeros((1, 2, 4), "int32")))
    assert (empty == 0.0).all()


def test_different_spellings_give_different_vectors():
    cnn = CharacterCNN(vocab_size=30, embedding_dim=4, filters=6)
    out = keras.ops.convert_to_numpy(cnn(np.array([[[3, 4, 5], [3, 4, 6]]], "int32")))
    assert not np.allclose(out[0, 0], out[0, 1])


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match=r"Received: filters=0"):
        CharacterCNN(vocab_size=10, filters=0)
    with pytest.raises(ValueError, match=r"Received: dropout=1.0"):
        CharacterCNN(vocab_size=10, dropout=1.0)
    with pytest.raises(ValueError, match=r"Expected a positive integer. Received: kernel_size=True"):
        CharacterCNN(vocab_size=10, kernel_size=True)
    with pytest.raises(ValueError, match=r"Expected a positive integer. Received: vocab_size=10.0"):
        CharacterCNN(vocab_size=10.0)
    with pytest.raises(ValueError, match=r"Expected a rate in \[0, 1\). Received: dropout=False"):
        CharacterCNN(vocab_size=10, dropout=False)
