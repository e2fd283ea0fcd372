import keras
import numpy as np
import pytest

from seqtasks.layers import CharacterCNN
from tests.support.layer_test_utils import run_layer_test

pytestmark = pytest.mark.backends


@pytest.mark.slow
@pytest.mark.core
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
        expected_weight_paths=["embedding/embeddings", "convolution/kernel", "convolution/bias"],
    )


def _numpy_character_cnn(characters, embeddings, kernel, bias):
    """Embed, zero the padding, convolve with zero "same" padding, tanh, max over the real characters."""
    width, _, filters = kernel.shape
    out = np.zeros(characters.shape[:2] + (filters,), "float32")
    for b in range(characters.shape[0]):
        for w in range(characters.shape[1]):
            word = characters[b, w]
            real = word != 0
            if not real.any():
                continue  # an empty word is all zeros
            x = embeddings[word] * real[:, None]
            x = np.pad(x, (((width - 1) // 2, width // 2), (0, 0)))
            convolved = np.tanh(
                np.stack([np.einsum("kd,kdf->f", x[t : t + width], kernel) for t in range(len(word))]) + bias
            )
            out[b, w] = convolved[real].max(axis=0)
    return out


@pytest.mark.parametrize("kernel_size", [3, 4])
def test_matches_a_numpy_reference(kernel_size):
    # Words of different lengths, one empty word beside real ones in the same batch.
    characters = np.array(
        [[[3, 7, 2, 9, 0, 0], [5, 0, 0, 0, 0, 0]], [[0, 0, 0, 0, 0, 0], [8, 8, 1, 4, 6, 2]]], "int32"
    )
    cnn = CharacterCNN(vocab_size=10, embedding_dim=4, filters=5, kernel_size=kernel_size)
    cnn.build(characters.shape)
    cnn.convolution.bias.assign(np.random.default_rng(0).normal(size=5).astype("float32"))  # not all zeros
    outputs = keras.ops.convert_to_numpy(cnn(characters))
    embeddings, kernel, bias = (keras.ops.convert_to_numpy(w) for w in cnn.weights)
    np.testing.assert_allclose(outputs, _numpy_character_cnn(characters, embeddings, kernel, bias), atol=1e-5)
    np.testing.assert_array_equal(outputs[1, 0], 0.0)
    assert (outputs[0, 0] != 0.0).all()


def test_defaults():
    cnn = CharacterCNN(vocab_size=10)
    assert (cnn.embedding_dim, cnn.filters, cnn.kernel_size, cnn.dropout) == (30, 30, 3, 0.0)


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
    with pytest.raises(ValueError, match=r"Expected a positive integer. Received: embedding_dim=0"):
        CharacterCNN(vocab_size=10, embedding_dim=0)
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


def test_dropout_only_when_training():
    characters = np.random.default_rng(1).integers(1, 20, size=(2, 3, 5)).astype("int32")
    cnn = CharacterCNN(vocab_size=20, embedding_dim=8, filters=6, dropout=0.5)
    inference = keras.ops.convert_to_numpy(cnn(characters, training=False))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(cnn(characters)), inference)
    assert not np.allclose(keras.ops.convert_to_numpy(cnn(characters, training=True)), inference)
