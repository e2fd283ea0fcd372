import keras
import numpy as np
import pytest
from numerics import tolerance

from seqtasks.models import ImageCaptioner, ImageCaptionerEnsemble
from seqtasks.text.special_ids import PAD_ID

pytestmark = pytest.mark.backends

DECODER = {"units": 8, "attention": "bahdanau", "attention_units": 6, "placement": "before",
           "deep_output": "linear", "gate": True, "seed": 4}
CAPTIONS = np.array([[2, 11, 12, 13, 14], [2, 15, 16, 0, 0], [2, 17, 0, 0, 0]], "int32")


def _captioner(scheduled_sampling, sharpen=None, favour=()):
    """A built captioner; `sharpen` multiplies its logits (draws become the argmax), `favour` lifts the given
    words' logits by decreasing margins (the first is drawn whenever it may be)."""
    model = ImageCaptioner(20, embedding_dim=4, decoder=DECODER, scheduled_sampling=scheduled_sampling)
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
    plain = ImageCaptioner(20, embedding_dim=4, decoder=DECODER)
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


def test_an_ensemble_passes_the_training_progress_to_every_member():
    ensemble = ImageCaptionerEnsemble(2, {"vocab_size": 20, "embedding_dim": 4, "decoder": DECODER,
                                          "scheduled_sampling": 0.6})
    ensemble.build(((None, 9, 5), (None, None)))
    ensemble.set_training_progress(0.5)
    assert [float(_numpy(m.sampling_probability)) for m in ensemble.member_models] == pytest.approx([0.3, 0.3])


def test_the_cnn_runs_once_a_training_step_and_both_passes_read_its_grid(monkeypatch):
    model = ImageCaptioner(20, embedding_dim=4, decoder=DECODER, image_encoder=[3], scheduled_sampling=1.0)
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
