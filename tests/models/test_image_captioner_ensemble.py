"""`ImageCaptionerEnsemble` against NumPy formulas, its members alone, and `Ensemble`'s decoding."""

import keras
import numpy as np
import pytest

from seqtasks.decoding import score_ids, search
from seqtasks.models import Ensemble, ImageCaptioner, ImageCaptionerEnsemble
from seqtasks.training.losses import SmoothedSparseCrossentropy
from tests.support.layer_test_utils import check_replicas_reach_every_member
from tests.support.numerics import tolerance

pytestmark = pytest.mark.backends


VOCAB = 12
SMOOTHING = 0.1
PENALTY = 0.7
INPUTS = np.array([[2, 5, 6, 7], [2, 8, 0, 0], [2, 9, 4, 0]], "int32")
TARGETS = np.array([[5, 6, 7, 3], [8, 3, 0, 0], [9, 4, 3, 0]], "int32")


def _captioner(**kwargs):
    return {
        "vocab_size": VOCAB, "embedding_dim": 4, "attention_penalty": PENALTY,
        "decoder": {"units": 8, "attention": "bahdanau", "attention_units": 6, "gate": True, "placement": "before",
                    "deep_output": "linear", "seed": 3},
        **kwargs,
    }


@pytest.fixture(autouse=True)
def _seeded():
    """Each test draws the same initial weights on every run."""
    keras.utils.set_random_seed(0)


def _never_pad(*captioners):
    """An untrained captioner may write PAD_ID, which a trained one never does (no caption holds it) and which
    scoring reads as the end of a caption: its logit is pushed far down."""
    for captioner in captioners:
        bias = keras.ops.convert_to_numpy(captioner.output_dense.bias).copy()
        bias[0] = -30.0
        captioner.output_dense.bias.assign(bias)


def _grid(seed=0):
    return np.random.default_rng(seed).random((3, 9, 5)).astype("float32")


def _np(value):
    return np.asarray(keras.ops.convert_to_numpy(value), "float64")


def _compiled(model):
    model.compile(optimizer="adam", loss=SmoothedSparseCrossentropy(SMOOTHING),
                  metrics=[keras.metrics.SparseCategoricalAccuracy(name="token_accuracy")])
    return model


def _log_softmax(logits):
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def _token_loss(logits, targets):
    """Label-smoothed cross-entropy averaged over the real target tokens (NumPy, float64)."""
    log_probs = _log_softmax(logits)
    nll = -np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
    per_token = (1 - SMOOTHING) * nll + SMOOTHING * -log_probs.mean(-1)
    real = targets != 0
    return (per_token * real).sum() / real.sum()


def _penalty(weights, targets):
    coverage = (weights * (targets != 0)[..., None]).sum(1)
    return PENALTY * ((1.0 - coverage) ** 2).mean()


def test_members_start_different_each_with_its_own_seed_and_the_call_stacks_their_logits():
    ensemble = ImageCaptionerEnsemble(2, _captioner())
    grid = _grid()
    stacked = _np(ensemble((grid, INPUTS)))
    assert stacked.shape == (3, 2, 4, VOCAB)
    for index, member in enumerate(ensemble.member_models):
        assert isinstance(member, ImageCaptioner) and member.decoder["seed"] == 3 + index
        np.testing.assert_allclose(stacked[:, index], _np(member((grid, INPUTS))), rtol=1e-6)
    assert not np.allclose(stacked[:, 0], stacked[:, 1])
    unseeded = ImageCaptionerEnsemble(2, _captioner(decoder={"units": 8, "attention": "bahdanau"}))
    assert [member.decoder["seed"] for member in unseeded.member_models] == [None, None]
    assert [member.decoder for member in ImageCaptionerEnsemble(2, {"vocab_size": VOCAB}).member_models] == [
        {"units": 64, "attention": "bahdanau"}
    ] * 2


def test_the_loss_is_the_sum_of_each_members_token_mean_and_attention_penalty():
    ensemble = _compiled(ImageCaptionerEnsemble(2, _captioner()))
    grid = _grid(1)
    members = ensemble.member_models
    logits = [_np(member((grid, INPUTS))) for member in members]
    weights = [_np(member.attention(grid, INPUTS)) for member in members]
    # Without dropout, training computes what inference does, and adds the penalties.
    expected = {
        False: sum(_token_loss(value, TARGETS) for value in logits),
        True: sum(_token_loss(value, TARGETS) + _penalty(w, TARGETS) for value, w in zip(logits, weights)),
    }
    for training in (True, False):
        stacked = ensemble((grid, INPUTS), training=training)
        loss = _np(ensemble.compute_loss((grid, INPUTS), TARGETS, stacked, training=training))
        np.testing.assert_allclose(loss, expected[training], **tolerance(rtol=1e-5))
    # Each term is what Keras computes for that member compiled alone with the same loss, token weights too.
    sample_weight = np.random.default_rng(1).uniform(0.0, 2.0, TARGETS.shape).astype("float32")
    for weighted in (None, sample_weight):
        ours = _np(ensemble.compute_loss((grid, INPUTS), TARGETS, ensemble((grid, INPUTS)), sample_weight=weighted))
        keras_sum = 0.0
        for member in members:
            twin = _compiled(ImageCaptioner(**member.get_config()))
            twin((grid, INPUTS))
            twin.set_weights(member.get_weights())
            keras_sum += _np(twin.compute_loss((grid, INPUTS), TARGETS, twin((grid, INPUTS)), sample_weight=weighted))
        np.testing.assert_allclose(ours, keras_sum, **tolerance(rtol=1e-5))
    # A weight per caption is that weight at each of its tokens.
    per_caption = np.array([1.0, 0.0, 2.0], "float32")
    np.testing.assert_allclose(
        _np(ensemble.compute_loss((grid, INPUTS), TARGETS, ensemble((grid, INPUTS)), sample_weight=per_caption)),
        _np(ensemble.compute_loss((grid, INPUTS), TARGETS, ensemble((grid, INPUTS)),
                                  sample_weight=np.repeat(per_caption[:, None], TARGETS.shape[1], axis=1))),
        rtol=1e-6,
    )


def test_the_metrics_read_the_members_mean_log_probabilities_at_real_tokens():
    ensemble = _compiled(ImageCaptionerEnsemble(2, _captioner()))
    grid = _grid(2)
    stacked = ensemble((grid, INPUTS))
    mean = np.mean([_log_softmax(_np(stacked)[:, index]) for index in range(2)], axis=0)
    real = TARGETS != 0
    # Targets the mean gets right except at each caption's first token, so that the accuracy is neither 0 nor 1.
    best = mean.argmax(-1)
    targets = np.where(real, np.where(best == 0, 1, best), 0).astype("int32")
    targets[:, 0] = targets[:, 0] % (VOCAB - 1) + 1
    expected = (best == targets)[real].mean()
    assert 0.0 < expected < 1.0 and expected != (best == targets).mean()
    result = ensemble.compute_metrics((grid, INPUTS), targets, stacked)
    assert float(result["token_accuracy"]) == pytest.approx(expected, abs=1e-6)
    results = ensemble.evaluate((grid, INPUTS), targets, verbose=0, return_dict=True)
    assert results["token_accuracy"] == pytest.approx(expected, abs=1e-6)
    assert results["loss"] == pytest.approx(float(_np(ensemble.compute_loss((grid, INPUTS), targets, stacked))),
                                            rel=1e-5)


@pytest.mark.parametrize("settings", [{"beam_width": 1, "max_length": 6}, {"beam_width": 3, "max_length": 6}])
def test_it_decodes_as_the_ensemble_of_its_members(settings):
    ensemble = ImageCaptionerEnsemble(2, _captioner())
    grid = _grid(3)
    ensemble((grid, INPUTS))
    cache, state = ensemble.encode(grid)
    log_probs, _, weights = ensemble.decode_step(INPUTS[:, 0], state, cache)
    steps = [member.decode_step(INPUTS[:, 0], *reversed(member.encode(grid))) for member in ensemble.member_models]
    np.testing.assert_allclose(
        _np(log_probs), np.mean([_log_softmax(_np(logits)) for logits, _, _ in steps], axis=0), **tolerance(rtol=1e-5)
    )
    np.testing.assert_allclose(_np(weights), np.mean([_np(w) for _, _, w in steps], axis=0), **tolerance(rtol=1e-5))
    ours = search(ensemble, grid, settings)
    theirs = search(Ensemble(ensemble.member_models), grid, settings)
    for mine, reference in zip(ours, theirs):
        np.testing.assert_allclose(_np(mine), _np(reference), **tolerance(rtol=1e-5))
    np.testing.assert_allclose(
        _np(ensemble.attention(grid, INPUTS)),
        np.mean([_np(member.attention(grid, INPUTS)) for member in ensemble.member_models], axis=0),
        **tolerance(rtol=1e-5),
    )


def test_it_scores_given_captions_as_its_search_scored_them():
    ensemble = ImageCaptionerEnsemble(2, _captioner())
    grid = _grid(6)
    ensemble((grid, INPUTS))
    _never_pad(*ensemble.member_models)
    ids, _, scores = search(ensemble, grid, {"beam_width": 3, "max_length": 6, "length_penalty": 0.6, "n_best": 2},
                            lists=True)
    for k in range(2):
        np.testing.assert_allclose(_np(score_ids(ensemble, grid, _np(ids)[:, k].astype("int32"), 0.6)[2]),
                                   _np(scores)[:, k], atol=1e-4)


def test_an_ensemble_of_separate_runs_may_hold_an_in_run_ensemble_as_one_member():
    inner = ImageCaptionerEnsemble(2, _captioner())
    alone = ImageCaptioner(**_captioner(decoder=dict(_captioner()["decoder"], seed=9)))
    grid = _grid(7)
    inner((grid, INPUTS)), alone((grid, INPUTS))
    _never_pad(*inner.member_models, alone)
    outer = Ensemble([inner, alone])
    members = [*inner.member_models, alone]
    # The outer mean reads the inner ensemble's distribution (its members' geometric mean, renormalised).
    member_log_probs = [_log_softmax(_np(member((grid, INPUTS)))) for member in members]
    expected = 0.5 * _log_softmax(0.5 * (member_log_probs[0] + member_log_probs[1])) + 0.5 * member_log_probs[2]
    np.testing.assert_allclose(_np(outer((grid, INPUTS))), expected, **tolerance(rtol=1e-5, atol=1e-6))
    cache, state = outer.encode(grid)
    np.testing.assert_array_equal(_np(outer.memory_mask(cache)), np.ones((3, 9)))
    step, _, _ = outer.decode_step(INPUTS[:, 0], state, cache)
    np.testing.assert_allclose(_np(step), expected[:, 0], **tolerance(rtol=1e-5, atol=1e-6))
    ids, _, scores = search(outer, grid, {"beam_width": 2, "max_length": 5})
    np.testing.assert_allclose(_np(score_ids(outer, grid, _np(ids).astype("int32"))[2]), _np(scores), atol=1e-4)


def test_training_reaches_every_member_of_nested_and_plain_ensembles():
    dropping = _captioner(feature_dropout=0.5)
    grid = _grid(8)
    members = [ImageCaptionerEnsemble(2, dropping), ImageCaptionerEnsemble(2, dropping), ImageCaptioner(**dropping),
               ImageCaptioner(**dropping)]
    for member in members:
        member((grid, INPUTS))  # built, as the runs' models an ensemble reads are
    for ensemble in (Ensemble(members[:2]), Ensemble(members[2:])):
        inference = _np(ensemble.log_probs((grid, INPUTS), training=False))
        np.testing.assert_allclose(_np(ensemble.log_probs((grid, INPUTS))), inference, rtol=1e-6)
        assert not np.allclose(_np(ensemble.log_probs((grid, INPUTS), training=True)), inference)


def test_replicas_reach_every_member():
    check_replicas_reach_every_member(ImageCaptionerEnsemble(2, _captioner()))


@pytest.mark.slow  # trains: the fast tier stays under 3 minutes
def test_training_lowers_every_members_loss_and_the_ensemble_learns_the_captions():
    ensemble = _compiled(ImageCaptionerEnsemble(2, _captioner()))
    ensemble.optimizer.learning_rate.assign(0.05)
    grid = np.tile(_grid(4), (4, 1, 1))
    inputs, targets = np.tile(INPUTS, (4, 1)), np.tile(TARGETS, (4, 1))
    before = [_token_loss(_np(member((grid, inputs))), targets) for member in ensemble.member_models]
    ensemble.fit((grid, inputs), targets, epochs=40, batch_size=12, verbose=0)
    after = [_token_loss(_np(member((grid, inputs))), targets) for member in ensemble.member_models]
    assert all(a < 0.5 * b for a, b in zip(after, before))
    ids, _, _ = search(ensemble, grid[:3], {"beam_width": 1, "max_length": 4})
    np.testing.assert_array_equal(_np(ids)[0], TARGETS[0])


def test_config_round_trip_and_safe_reload(tmp_path):
    ensemble = ImageCaptionerEnsemble(3, _captioner(feature_dropout=0.2))
    grid = _grid(5)
    expected = _np(ensemble((grid, INPUTS)))
    config = ensemble.get_config()
    assert config["members"] == 3 and config["captioner"]["feature_dropout"] == 0.2
    assert config["captioner"]["decoder"]["seed"] == 3
    assert ImageCaptionerEnsemble.from_config(config).get_config() == config
    ensemble.save(tmp_path / "ensemble.keras")
    restored = keras.models.load_model(tmp_path / "ensemble.keras", safe_mode=True, compile=False)
    assert isinstance(restored, ImageCaptionerEnsemble)
    np.testing.assert_allclose(_np(restored((grid, INPUTS))), expected, rtol=1e-6)
    assert [member.decoder["seed"] for member in restored.member_models] == [3, 4, 5]


@pytest.mark.parametrize("members", [1, 0, 2.0, True])
def test_rejects_fewer_than_two_members(members):
    with pytest.raises(ValueError, match=f"Expected an int of at least 2. Received: members={members!r}"):
        ImageCaptionerEnsemble(members, _captioner())


def test_rejects_a_shared_grid_head_and_a_loss_it_cannot_apply_per_member():
    head = keras.Sequential([keras.layers.Dense(5)])
    with pytest.raises(ValueError, match="members cannot share a fine-tuned backbone stage"):
        ImageCaptionerEnsemble(2, _captioner(grid_head=head))
    ensemble = ImageCaptionerEnsemble(2, _captioner())
    stacked = ensemble((_grid(), INPUTS))
    with pytest.raises(ValueError, match="Expected the ensemble compiled with a per-token keras.losses.Loss"):
        ensemble.compute_loss((_grid(), INPUTS), TARGETS, stacked)


SAMPLING_DECODER = {"units": 8, "attention": "bahdanau", "attention_units": 6, "placement": "before",
           "deep_output": "linear", "gate": True, "seed": 4}


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def test_an_ensemble_passes_the_training_progress_to_every_member():
    ensemble = ImageCaptionerEnsemble(2, {"vocab_size": 20, "embedding_dim": 4, "decoder": SAMPLING_DECODER,
                                          "scheduled_sampling": 0.6})
    ensemble.build(((None, 9, 5), (None, None)))
    ensemble.set_training_progress(0.5)
    assert [float(_numpy(m.sampling_probability)) for m in ensemble.member_models] == pytest.approx([0.3, 0.3])
