"""`SequenceTaggerEnsemble` against brute force over every tag path (NumPy, float64)."""

import itertools

import keras
import numpy as np
import pytest

from seqtasks.layers.crf import iob2_constraints
from seqtasks.models import SequenceTagger, SequenceTaggerEnsemble
from tests.support.layer_test_utils import check_replicas_reach_every_member, tagger_inputs

pytestmark = pytest.mark.backends

IOB2 = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
CONTINUATION = np.array([-1, 2, 2, 4, 4], "int32")


def _tagger(output_layer="crf", **kwargs):
    return {
        "word_vocab_size": 12, "char_vocab_size": 10, "num_tags": len(IOB2), "word_embedding_dim": 5,
        "char_embedding_dim": 3, "char_filters": 4, "encoder": {"units": 6, "bidirectional": True},
        "dropout": 0.0, "output_layer": output_layer, "seed": 3, **iob2_constraints(IOB2), **kwargs,
    }


def _scrambled(ensemble, x):
    """Built, with random weights everywhere (the transitions included), so that the members differ."""
    ensemble(x)
    rng = np.random.default_rng(0)
    for weight in ensemble.weights:
        weight.assign(rng.normal(size=weight.shape).astype("float32"))
    return ensemble


def _np(value):
    return np.asarray(keras.ops.convert_to_numpy(value), "float64")


def _valid(path):
    names = [IOB2[tag] for tag in path]
    return all(not tag.startswith("I-") or prev in ("B-" + tag[2:], tag) for prev, tag in zip(["O"] + names, names))


def _member_log_probs(member, potentials, length):
    """Every valid path of `length` tags and its log probability under one member, by enumeration."""
    paths = [p for p in itertools.product(range(len(IOB2)), repeat=length) if _valid(p)]
    if member.crf is not None:
        emissions = potentials[:length]
        transitions, start, end = (_np(w) for w in (member.crf.transitions, member.crf.start_transitions,
                                                    member.crf.end_transitions))
        scores = np.array([
            start[p[0]] + sum(emissions[t, tag] for t, tag in enumerate(p))
            + sum(transitions[a, b] for a, b in zip(p, p[1:])) + end[p[-1]]
            for p in paths
        ])
    else:
        log_softmax = potentials[:length] - np.log(np.exp(potentials[:length]).sum(-1, keepdims=True))
        scores = np.array([sum(log_softmax[t, tag] for t, tag in enumerate(p)) for p in paths])
    return paths, scores - np.log(np.exp(scores - scores.max()).sum()) - scores.max()


def _geometric_mean(ensemble, x, row, length):
    """The valid paths and their probabilities under the normalised geometric mean of the members' distributions."""
    potentials = _np(ensemble(x))
    log_probs = []
    for index, member in enumerate(ensemble.member_models):
        paths, member_log_probs = _member_log_probs(member, potentials[row, index], length)
        log_probs.append(member_log_probs)
    mean = np.mean(log_probs, axis=0)
    probabilities = np.exp(mean - mean.max())
    return paths, probabilities / probabilities.sum()


def test_members_start_different_and_the_call_stacks_their_potentials():
    ensemble = SequenceTaggerEnsemble(3, _tagger())
    x = tagger_inputs([[3, 4, 5], [6, 7]])
    stacked = _np(ensemble(x))
    assert stacked.shape == (2, 3, 3, len(IOB2))
    for index, member in enumerate(ensemble.member_models):
        assert isinstance(member, SequenceTagger) and member.seed == 3 + index
        np.testing.assert_allclose(stacked[:, index], _np(member(x)), rtol=1e-6)
    assert not np.allclose(stacked[:, 0], stacked[:, 1]) and not np.allclose(stacked[:, 1], stacked[:, 2])
    assert ensemble.count_params() == 3 * ensemble.member_models[0].count_params()
    assert [m.seed for m in SequenceTaggerEnsemble(2, _tagger(seed=None)).member_models] == [None, None]


@pytest.mark.parametrize("output_layer", ["crf", "softmax"])
def test_decoding_gives_the_most_probable_valid_path_of_the_members_geometric_mean(output_layer):
    rows = [[3, 4, 5, 6], [7, 8], [9]]
    x = tagger_inputs(rows)
    ensemble = _scrambled(SequenceTaggerEnsemble(3, _tagger(output_layer)), x)
    decoded = _np(ensemble.decode(x)).astype(int)
    alone = []
    for row, words in enumerate(rows):
        paths, probabilities = _geometric_mean(ensemble, x, row, len(words))
        assert tuple(decoded[row, : len(words)]) == paths[int(np.argmax(probabilities))]
        assert (decoded[row, len(words) :] == 0).all()
        member_paths = [
            paths[int(np.argmax(_member_log_probs(member, _np(ensemble(x))[row, index], len(words))[1]))]
            for index, member in enumerate(ensemble.member_models)
        ]
        alone.append(len(set(member_paths)) > 1)
    assert any(alone), "the members should disagree somewhere, or the test shows nothing about the mean"


@pytest.mark.parametrize("output_layer", ["crf", "softmax"])
def test_each_entity_span_has_its_brute_force_probability_under_the_ensemble(output_layer):
    rows = [[3, 4, 5], [7, 8]]
    x = tagger_inputs(rows)
    ensemble = _scrambled(SequenceTaggerEnsemble(2, _tagger(output_layer)), x)
    scores, tags = ensemble.decode_potentials(x)
    tags = _np(tags).astype(int)
    starts = np.array([[IOB2[t][0] in "BO" for t in row] for row in tags]) | (np.arange(tags.shape[1]) == 0)
    got = np.exp(_np(ensemble.segment_log_probs(x, tags, starts, CONTINUATION, potentials=scores)))
    np.testing.assert_allclose(got, np.exp(_np(ensemble.segment_log_probs(x, tags, starts, CONTINUATION))), rtol=1e-6)
    for row, words in enumerate(rows):
        paths, probabilities = _geometric_mean(ensemble, x, row, len(words))
        for t in range(len(words)):
            s = max(i for i in range(t + 1) if starts[row, i])
            if output_layer == "crf":  # the path's tags s..t, and the next tag does not continue them
                expected = sum(
                    q for p, q in zip(paths, probabilities)
                    if tuple(p[s : t + 1]) == tuple(tags[row, s : t + 1])
                    and (t + 1 == len(words) or p[t + 1] != CONTINUATION[tags[row, t]])
                )
            else:  # each token alone: the product of the mean distribution's per-token probabilities
                potentials = _np(ensemble(x))[row]
                log_softmax = potentials - np.log(np.exp(potentials).sum(-1, keepdims=True))
                mean = log_softmax.mean(axis=0)
                per_token = np.exp(mean) / np.exp(mean).sum(-1, keepdims=True)
                expected = np.prod([per_token[i, tags[row, i]] for i in range(s, t + 1)])
            np.testing.assert_allclose(got[row, t], expected, rtol=1e-4, atol=1e-7)
        assert (got[row, len(words) :] == 1.0).all()  # log probability 0 at padding


def test_the_loss_is_the_sum_of_the_members_losses_in_training_and_validation():
    ensemble = SequenceTaggerEnsemble(2, _tagger(dropout=0.5))
    x = tagger_inputs([[3, 4, 5, 6], [7, 8]])
    y = np.array([[1, 2, 0, 3], [1, 0, 0, 0]], "int32")
    for training in (True, False):
        stacked = ensemble(x, training=training)
        expected = sum(
            _np(member.compute_loss(x, y, stacked[:, index])) for index, member in enumerate(ensemble.member_models)
        )
        np.testing.assert_allclose(_np(ensemble.compute_loss(x, y, stacked)), expected, rtol=1e-6)
    member = ensemble.member_models[1]
    alone = -_np(member.crf.log_likelihood(member(x), y, x["words"] != 0)).mean()
    np.testing.assert_allclose(_np(member.compute_loss(x, y, ensemble(x)[:, 1])), alone, rtol=1e-6)


def test_replicas_reach_every_member():
    check_replicas_reach_every_member(SequenceTaggerEnsemble(2, _tagger()))


@pytest.mark.slow  # trains: the fast tier stays under 3 minutes
def test_training_lowers_every_members_loss_and_the_ensemble_learns_the_tags():
    ensemble = SequenceTaggerEnsemble(2, _tagger())
    x = tagger_inputs([[3, 4, 5, 6], [7, 8]] * 8)
    y = np.array([[1, 2, 0, 3], [1, 0, 0, 0]] * 8, "int32")
    before = [_np(m.compute_loss(x, y, m(x))) for m in ensemble.member_models]
    ensemble.compile(optimizer=keras.optimizers.Adam(0.05))
    ensemble.fit(x, y, epochs=25, batch_size=8, verbose=0)
    after = [_np(m.compute_loss(x, y, m(x))) for m in ensemble.member_models]
    assert all(a < 0.2 * b for a, b in zip(after, before))
    np.testing.assert_array_equal(_np(ensemble.decode(x))[:2], [[1, 2, 0, 3], [1, 0, 0, 0]])


def test_attention_maps_are_the_members_mean_and_empty_without_self_attention():
    x = tagger_inputs([[3, 4, 5], [6]])
    ensemble = SequenceTaggerEnsemble(2, _tagger(self_attention="luong"))
    maps = ensemble.attention_maps(x)
    members = [_np(member.attention_maps(x)["self_attention"]) for member in ensemble.member_models]
    assert not np.allclose(members[0], members[1])
    np.testing.assert_allclose(_np(maps["self_attention"]), np.mean(members, axis=0), rtol=1e-6)
    assert SequenceTaggerEnsemble(2, _tagger()).attention_maps(x) == {}


def test_config_round_trip_and_safe_reload(tmp_path):
    ensemble = SequenceTaggerEnsemble(2, _tagger("softmax"))
    x = tagger_inputs([[3, 4, 5], [6]])
    expected = _np(ensemble(x))
    config = ensemble.get_config()
    assert config["members"] == 2 and config["tagger"]["output_layer"] == "softmax" and config["tagger"]["seed"] == 3
    assert SequenceTaggerEnsemble.from_config(config).get_config() == config
    ensemble.save(tmp_path / "ensemble.keras")
    restored = keras.models.load_model(tmp_path / "ensemble.keras", safe_mode=True)
    assert isinstance(restored, SequenceTaggerEnsemble)
    np.testing.assert_allclose(_np(restored(x)), expected, rtol=1e-6)
    np.testing.assert_array_equal(_np(restored.decode(x)), _np(ensemble.decode(x)))


@pytest.mark.parametrize("members", [1, 0, 2.0, True])
def test_rejects_fewer_than_two_members(members):
    with pytest.raises(ValueError, match=f"Expected an int of at least 2. Received: members={members!r}"):
        SequenceTaggerEnsemble(members, _tagger())


def test_with_tag_names_evaluation_logs_the_ensembles_decoded_f1():
    from seqeval.metrics import f1_score

    rows = [[3, 4, 5, 6], [7, 8], [9, 10, 11]]
    x = tagger_inputs(rows)
    ensemble = _scrambled(SequenceTaggerEnsemble(2, _tagger(tag_names=IOB2)), x)
    y = np.array([[1, 2, 0, 3], [3, 4, 0, 0], [0, 1, 2, 0]], "int32")
    ensemble.compile(optimizer="adam")
    logs = ensemble.evaluate(x, y, batch_size=2, verbose=0, return_dict=True)
    decoded = _np(ensemble.decode(x)).astype(int)
    names = lambda tags: [[IOB2[t] for t in tags[i, : len(r)]] for i, r in enumerate(rows)]  # noqa: E731
    assert logs["f1"] == pytest.approx(f1_score(names(y), names(decoded)), abs=1e-6)
    assert set(logs) == {"loss", "f1"}
