"""`Ensemble`: a step is the mean of its members' log-probabilities, and it searches as one of them would."""

import keras
import numpy as np
import pytest

from seqtasks.decoding import search
from seqtasks.models import Ensemble, Seq2Seq
from seqtasks.recipe import load_recipe
from seqtasks.text.special_ids import START_ID


def _small_model(seed, *overrides):
    recipe = load_recipe(
        "recipes/translation.yaml",
        ["model.embedding_dim=8", "model.encoder.units=8", "model.decoder.units=8", *overrides],
    )
    model = Seq2Seq.from_recipe(recipe.model, 11, 13, seed=seed)
    model((np.ones((1, 3), "int32"), np.ones((1, 2), "int32")))
    return model


def _log_softmax(x):
    x = np.asarray(x, np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


@pytest.fixture(scope="module")
def members():
    keras.utils.set_random_seed(3)
    return [_small_model(1), _small_model(2, "model.attention.type=bahdanau"), _small_model(3, "model.attention.type=none")]


def test_an_ensemble_step_is_the_mean_of_its_members_log_probabilities(members):
    ensemble = Ensemble(members)
    source = np.array([[5, 6, 7, 0], [8, 9, 0, 0]], "int32")
    ids = np.array([START_ID, 4], "int32")
    caches, states = ensemble.encode(source)
    log_probs, new_states, weights = ensemble.decode_step(ids, states, caches)
    expected, expected_weights = [], []
    for member in members:
        cache, state = member.encode(source)
        logits, member_state, member_weights = member.decode_step(ids, state, cache)
        expected.append(_log_softmax(logits))
        if member.decoder_layer.attention != "none":
            expected_weights.append(np.asarray(member_weights))
    np.testing.assert_allclose(log_probs, np.mean(expected, 0), atol=1e-5)
    np.testing.assert_allclose(weights, np.mean(expected_weights, 0), atol=1e-6)  # the attending two only
    assert len(new_states) == 3
    np.testing.assert_array_equal(ensemble.memory_mask(caches), source != 0)
    # Teacher-forced and attention maps: the same means over whole sequences.
    target = np.array([[START_ID, 4, 5], [START_ID, 6, 6]], "int32")
    np.testing.assert_allclose(
        ensemble((source, target)), np.mean([_log_softmax(m((source, target))) for m in members], 0), atol=1e-5
    )
    np.testing.assert_allclose(
        ensemble.attention(source, target), np.mean([members[0].attention(source, target),
                                                      members[1].attention(source, target)], 0), atol=1e-6
    )


def test_an_ensemble_of_identical_members_searches_as_one_of_them(members):
    source = np.array([[5, 6, 7, 0], [8, 9, 10, 3]], "int32")
    settings = dict(beam_width=3, max_length=6, length_penalty=0.6, n_best=3, coverage_penalty=0.2)
    one = search(members[0], source, settings, lists=True)
    both = search(Ensemble([members[0], members[0]]), source, settings, lists=True)
    for mine, theirs in zip(one, both):
        np.testing.assert_allclose(mine, theirs, atol=1e-5)


def test_an_ensemble_without_attention_refuses_attention_maps_and_needs_two_members(members):
    with pytest.raises(ValueError, match=r"^No member of this ensemble has attention\.$"):
        Ensemble([members[2], members[2]]).attention(np.ones((1, 2), "int32"), np.ones((1, 2), "int32"))
    assert Ensemble([members[2], members[2]]).memory_mask(Ensemble([members[2], members[2]]).encode(
        np.ones((1, 2), "int32"))[0]) is None
    with pytest.raises(ValueError, match=r"^An ensemble needs at least two members\. Received: 1$"):
        Ensemble(members[:1])
