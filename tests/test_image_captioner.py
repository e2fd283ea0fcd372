import keras
import numpy as np
import pytest
from numerics import tolerance

from seqtasks.models import ImageCaptioner
from seqtasks.models.image_captioner import attention_coverage_penalty

pytestmark = pytest.mark.backends

DECODER = {"units": 8, "attention": "bahdanau", "attention_units": 6, "gate": True}


def _captions():
    return np.array([[2, 5, 6, 7], [2, 8, 0, 0]], "int32")


def test_padding_of_a_caption_changes_nothing_at_its_real_steps():
    model = ImageCaptioner(20, embedding_dim=4, decoder=DECODER)
    grid = np.random.default_rng(0).random((2, 9, 5)).astype("float32")
    together = keras.ops.convert_to_numpy(model((grid, _captions())))
    alone = keras.ops.convert_to_numpy(model((grid[1:], _captions()[1:, :2])))
    np.testing.assert_allclose(together[1, :2], alone[0], **tolerance(rtol=1e-5, atol=1e-6))


def test_attention_over_the_grid_sums_to_one_at_every_step():
    model = ImageCaptioner(20, embedding_dim=4, decoder=DECODER)
    grid = np.random.default_rng(1).random((2, 9, 5)).astype("float32")
    weights = keras.ops.convert_to_numpy(model.attention(grid, _captions()))
    assert weights.shape == (2, 4, 9)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)


SHOW_ATTEND_TELL = dict(DECODER, placement="before", deep_output="linear")


@pytest.mark.parametrize("decoder", [dict(DECODER, input_feeding=True), SHOW_ATTEND_TELL])
def test_stepwise_decoding_matches_the_teacher_forced_pass(decoder):
    model = ImageCaptioner(20, embedding_dim=4, decoder=decoder)
    grid = np.random.default_rng(2).random((2, 9, 5)).astype("float32")
    captions = np.array([[2, 5, 6], [2, 7, 8]], "int32")
    forced = keras.ops.convert_to_numpy(model((grid, captions)))
    cache, state = model.encode(grid)
    for step in range(3):
        logits, state, _ = model.decode_step(captions[:, step], state, cache)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(logits), forced[:, step], **tolerance(rtol=1e-4, atol=1e-5))


def test_coverage_penalty_counts_only_real_steps():
    weights = np.zeros((1, 3, 2), "float32")
    weights[0, 0] = [1.0, 0.0]
    weights[0, 1] = [0.0, 1.0]
    weights[0, 2] = [1.0, 0.0]  # a padded step: ignored
    assert float(attention_coverage_penalty(weights, np.array([[2, 4, 0]]))) == pytest.approx(0.0)
    # Both steps on location 0: coverage (2, 0) -> ((1-2)² + (1-0)²) / 2.
    weights[0, 1] = [1.0, 0.0]
    assert float(attention_coverage_penalty(weights, np.array([[2, 4, 0]]))) == pytest.approx(1.0)


def test_training_adds_the_weighted_penalty_to_the_loss_and_inference_does_not():
    grid = np.random.default_rng(3).random((2, 9, 5)).astype("float32")
    model = ImageCaptioner(20, embedding_dim=4, decoder=DECODER, attention_penalty=2.5)
    model((grid, _captions()), training=True)
    penalty = 2.5 * float(attention_coverage_penalty(model.attention(grid, _captions()), _captions()))
    assert len(model.losses) == 1 and float(model.losses[0]) == pytest.approx(penalty, rel=1e-5)
    model((grid, _captions()), training=False)
    assert not model.losses


@pytest.mark.slow  # several seconds: the fast tier stays under 3 minutes
def test_small_cnn_turns_images_into_a_grid_and_trains_and_saves(tmp_path):
    model = ImageCaptioner(20, embedding_dim=4, decoder=DECODER, image_encoder=[4, 6])
    images = np.random.default_rng(4).integers(0, 255, (2, 16, 16, 3)).astype("uint8")
    assert tuple(model.grid(images).shape) == (2, 16, 6)
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    captions = _captions()
    before = [w.numpy().copy() for w in model.trainable_weights]
    history = model.fit((images, captions[:, :-1]), captions[:, 1:], epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert all(not np.allclose(b, w.numpy()) for b, w in zip(before, model.trainable_weights) if "conv_0" in w.path)
    expected = keras.ops.convert_to_numpy(model((images, captions)))
    model.save(tmp_path / "captioner.keras")
    restored = keras.models.load_model(tmp_path / "captioner.keras", safe_mode=True)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(restored((images, captions))), expected, **tolerance(rtol=1e-5))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"image_encoder": [8, 0]}, "Expected image_encoder to be None or a list of positive filter counts"),
        ({"feature_dropout": 1.0}, r"Expected feature_dropout in \[0, 1\). Received: feature_dropout=1.0"),
        ({"attention_penalty": -1.0}, "Expected attention_penalty >= 0. Received: attention_penalty=-1.0"),
        ({"embedding_dropout": 1.0}, r"Expected embedding_dropout in \[0, 1\). Received: embedding_dropout=1.0"),
        ({"embedding_dropout": -0.1}, r"Expected embedding_dropout in \[0, 1\). Received: embedding_dropout=-0.1"),
    ],
)
def test_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ImageCaptioner(10, **kwargs)


def test_the_published_decoder_reads_the_mean_annotation_and_emits_through_l_o():
    # Xu et al.: h_0 and c_0 from the mean annotation; logits L_o(E y + L_h h_t + L_z z_t), the
    # deep output of the embedding's size.
    model = ImageCaptioner(20, embedding_dim=4, decoder=SHOW_ATTEND_TELL)
    grid = np.random.default_rng(3).random((2, 9, 5)).astype("float32")
    model((grid, _captions()))
    assert model.decoder_layer.attentional_size == 4 and tuple(model.output_dense.kernel.shape) == (4, 20)
    _, state = model.encode(grid)
    expected = np.tanh(grid.mean(1) @ np.array(model.init_state_dense.kernel) + np.array(model.init_state_dense.bias))
    np.testing.assert_allclose(np.concatenate([np.array(s) for s in state], -1), expected, **tolerance(atol=1e-5))


def test_embedding_dropout_acts_while_training_only_and_is_kept_in_the_config():
    grid = np.random.default_rng(5).random((2, 9, 5)).astype("float32")
    plain = ImageCaptioner(20, embedding_dim=4, decoder=SHOW_ATTEND_TELL)
    dropped = ImageCaptioner(20, embedding_dim=4, decoder=SHOW_ATTEND_TELL, embedding_dropout=0.5)
    plain((grid, _captions()))
    dropped((grid, _captions()))
    dropped.set_weights(plain.get_weights())
    expected = keras.ops.convert_to_numpy(plain((grid, _captions()), training=False))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(dropped((grid, _captions()), training=False)), expected)
    # While training the embeddings lose about half their entries (the rest doubled): the logits move.
    trained = keras.ops.convert_to_numpy(dropped((grid, _captions()), training=True))
    assert not np.allclose(trained, keras.ops.convert_to_numpy(plain((grid, _captions()), training=True)), atol=1e-4)
    assert ImageCaptioner.from_config(dropped.get_config()).embedding_dropout == 0.5
