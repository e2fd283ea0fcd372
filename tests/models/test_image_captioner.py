import keras
import numpy as np
import pytest

from seqtasks.models import ImageCaptioner
from seqtasks.models.image_captioner import attention_coverage_penalty
from seqtasks.text.special_ids import PAD_ID
from tests.support.numerics import tolerance

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


SAMPLING_DECODER = {"units": 8, "attention": "bahdanau", "attention_units": 6, "placement": "before",
           "deep_output": "linear", "gate": True, "seed": 4}
CAPTIONS = np.array([[2, 11, 12, 13, 14], [2, 15, 16, 0, 0], [2, 17, 0, 0, 0]], "int32")


def _captioner(scheduled_sampling, sharpen=None, favour=()):
    """A built captioner; `sharpen` multiplies its logits (draws become the argmax), `favour` lifts the given
    words' logits by decreasing margins (the first is drawn whenever it may be)."""
    model = ImageCaptioner(20, embedding_dim=4, decoder=SAMPLING_DECODER, scheduled_sampling=scheduled_sampling)
    grid = np.random.default_rng(0).random((3, 9, 5)).astype("float32")
    model((grid, CAPTIONS))
    kernel, bias = (keras.ops.convert_to_numpy(w) for w in model.output_dense.weights)
    if sharpen:
        kernel, bias = kernel * sharpen, bias * sharpen
    for rank, word in enumerate(favour):
        bias[word] += 100.0 - 10.0 * rank
    model.output_dense.set_weights([kernel, bias])
    return model, grid


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def test_at_probability_one_each_later_step_reads_the_word_drawn_at_the_step_before():
    model, grid = _captioner(1.0, sharpen=1e4)
    forced = _numpy(model((grid, CAPTIONS), training=False))
    forced[..., PAD_ID] = -np.inf
    expected = np.where(CAPTIONS == PAD_ID, PAD_ID, np.concatenate([CAPTIONS[:, :1], forced.argmax(-1)[:, :-1]], 1))
    mixed = _numpy(model.scheduled_inputs(grid, CAPTIONS))
    np.testing.assert_array_equal(mixed, expected)
    assert (mixed != CAPTIONS).any()
    # The trained pass reads them: its logits are those of an ordinary pass over the mixed captions.
    trained = _numpy(model((grid, CAPTIONS), training=True))
    np.testing.assert_allclose(trained, _numpy(model((grid, expected), training=False)), **tolerance(rtol=1e-4, atol=1e-3))


def test_padding_is_never_drawn_even_when_it_is_the_likeliest_word():
    model, grid = _captioner(1.0, favour=(PAD_ID, 9))
    mixed = _numpy(model.scheduled_inputs(grid, CAPTIONS))
    real_later = (CAPTIONS != PAD_ID) & (np.arange(5) > 0)
    assert (mixed[real_later] == 9).all()
    np.testing.assert_array_equal(mixed[~real_later], CAPTIONS[~real_later])


def test_a_probability_replaces_about_that_share_of_the_later_real_steps_and_never_the_first_or_padding():
    model, _ = _captioner(0.3, favour=(9,))
    captions = np.tile(CAPTIONS, (200, 1))
    grid = np.random.default_rng(1).random((600, 9, 5)).astype("float32")
    mixed = _numpy(model.scheduled_inputs(grid, captions))
    eligible = (captions != PAD_ID) & (np.arange(5) > 0)
    np.testing.assert_array_equal(mixed[~eligible], captions[~eligible])
    swapped = mixed[eligible] != captions[eligible]
    assert (mixed[eligible][swapped] == 9).all()
    n = eligible.sum()  # 1,400 steps: the share is within four standard deviations of 0.3
    assert abs(swapped.mean() - 0.3) < 4 * np.sqrt(0.3 * 0.7 / n)


def test_training_progress_scales_the_probability_from_teacher_forcing_up_to_the_setting():
    model, grid = _captioner(0.8, favour=(9,))
    assert float(_numpy(model.sampling_probability)) == pytest.approx(0.8)
    model.set_training_progress(0.0)
    np.testing.assert_array_equal(_numpy(model.scheduled_inputs(grid, CAPTIONS)), CAPTIONS)
    np.testing.assert_allclose(
        _numpy(model((grid, CAPTIONS), training=True)), _numpy(model((grid, CAPTIONS), training=False)),
        **tolerance(rtol=1e-5, atol=1e-5),
    )
    model.set_training_progress(0.5)
    assert float(_numpy(model.sampling_probability)) == pytest.approx(0.4)
    model.set_training_progress(1.0)
    assert float(_numpy(model.sampling_probability)) == pytest.approx(0.8)
    with pytest.raises(ValueError, match=r"Expected fraction in \[0, 1\]. Received: fraction=1.5"):
        model.set_training_progress(1.5)
    with pytest.raises(ValueError, match=r"Expected fraction in \[0, 1\]. Received: fraction=-0.1"):
        model.set_training_progress(-0.1)


def test_inference_reads_the_reference_whatever_the_probability():
    model, grid = _captioner(1.0, favour=(9,))
    plain = ImageCaptioner(20, embedding_dim=4, decoder=SAMPLING_DECODER)
    plain((grid, CAPTIONS))
    plain.set_weights([_numpy(w) for w in model.weights if "sampling_probability" not in w.path])
    np.testing.assert_allclose(_numpy(model((grid, CAPTIONS))), _numpy(plain((grid, CAPTIONS))), **tolerance(rtol=1e-5))


def test_only_a_captioner_that_samples_holds_the_probability_so_earlier_saves_load_as_they_were():
    model, _ = _captioner(0.0)
    assert not any("sampling_probability" in w.path for w in model.weights)
    model.set_training_progress(0.7)  # nothing to move
    sampling, _ = _captioner(0.25)
    extra = [w for w in sampling.weights if "sampling_probability" in w.path]
    assert len(extra) == 1 and not extra[0].trainable
    assert len(sampling.weights) == len(model.weights) + 1
    restored = ImageCaptioner.from_config(sampling.get_config())
    assert restored.scheduled_sampling == 0.25


@pytest.mark.parametrize("value", [-0.1, 1.5])
def test_rejects_a_probability_outside_zero_to_one(value):
    with pytest.raises(ValueError, match=rf"Expected scheduled_sampling in \[0, 1\]. Received: scheduled_sampling={value}"):
        ImageCaptioner(10, scheduled_sampling=value)


def test_the_cnn_runs_once_a_training_step_and_both_passes_read_its_grid(monkeypatch):
    model = ImageCaptioner(20, embedding_dim=4, decoder=SAMPLING_DECODER, image_encoder=[3], scheduled_sampling=1.0)
    images = np.random.default_rng(1).integers(0, 256, (3, 8, 8, 3)).astype("float32")
    model((images, CAPTIONS))
    kernel, bias = (_numpy(w) for w in model.output_dense.weights)
    model.output_dense.set_weights([kernel * 1e4, bias * 1e4])  # every draw is the argmax
    forced = _numpy(model((images, CAPTIONS), training=False))
    forced[..., PAD_ID] = -np.inf
    read = np.where(CAPTIONS == PAD_ID, PAD_ID, np.concatenate([CAPTIONS[:, :1], forced.argmax(-1)[:, :-1]], 1))
    conv = model.cnn_layers[0]
    runs = []
    original = conv.call
    monkeypatch.setattr(conv, "call", lambda *args, **kwargs: runs.append(1) or original(*args, **kwargs))
    trained = _numpy(model((images, CAPTIONS), training=True))  # no dropout: only the words read differ
    assert len(runs) == 1
    np.testing.assert_allclose(trained, _numpy(model((images, read), training=False)), **tolerance(rtol=1e-5))
