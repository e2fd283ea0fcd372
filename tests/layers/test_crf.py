"""`CRF`: its likelihood and Viterbi decoding against brute force, its IOB2 constraints and its dtypes.

`segment_log_probs`, an entity span's confidence, against brute force over every tag path (NumPy, float64).
"""

import itertools

import keras
import numpy as np
import pytest

from seqtasks.layers import CRF
from seqtasks.layers.crf import FORBIDDEN, iob2_constraints, segment_log_probs
from seqtasks.models import SequenceTagger
from tests.support.layer_test_utils import run_layer_test, tagger_inputs

pytestmark = pytest.mark.backends


def _crf_with_random_weights(num_tags, seed):
    rng = np.random.default_rng(seed)
    crf = CRF(num_tags)
    crf.build((None, None, num_tags))
    crf.transitions.assign(rng.normal(size=(num_tags, num_tags)).astype("float32"))
    crf.start_transitions.assign(rng.normal(size=num_tags).astype("float32"))
    crf.end_transitions.assign(rng.normal(size=num_tags).astype("float32"))
    return crf


def _path_score(crf, potentials, path):
    transitions = keras.ops.convert_to_numpy(crf.transitions)
    score = keras.ops.convert_to_numpy(crf.start_transitions)[path[0]]
    score += keras.ops.convert_to_numpy(crf.end_transitions)[path[-1]]
    score += sum(potentials[t, tag] for t, tag in enumerate(path))
    score += sum(transitions[a, b] for a, b in zip(path, path[1:]))
    return score


def _brute_force(crf, potentials, length, allowed=lambda path: True):
    """Every path's score over the first `length` tokens: (log Z, best `allowed` path, its score)."""
    paths = [path for path in itertools.product(range(crf.num_tags), repeat=length) if allowed(path)]
    scores = np.array([_path_score(crf, potentials, path) for path in paths])
    best = int(np.argmax(scores))
    return np.logaddexp.reduce(scores), paths[best], scores[best]


@pytest.fixture
def example():
    rng = np.random.default_rng(7)
    crf = _crf_with_random_weights(3, seed=1)
    potentials = rng.normal(size=(3, 4, 3)).astype("float32")
    lengths = np.array([4, 2, 1])
    mask = np.arange(4)[None, :] < lengths[:, None]
    # Scores at padding must not matter.
    potentials[~mask] = 100.0
    return crf, potentials, mask, lengths


@pytest.mark.slow
@pytest.mark.core
def test_layer_contract(tmp_path):
    potentials = np.random.default_rng(0).normal(size=(2, 5, 4)).astype("float32")
    run_layer_test(
        CRF,
        # The constraints travel through get_config and the saved model.
        {"num_tags": 4, **iob2_constraints(["O", "B-PER", "I-PER", "B-LOC"])},
        {"potentials": potentials},
        tmp_path=tmp_path,
        expected_output_shapes=((2, 5), (2,)),
        # Tags are int32 and scores float32 under every policy.
        expected_output_dtypes=("int32", "float32"),
        # Transitions (4, 4), start (4,) and end (4,) scores.
        expected_num_trainable_weights=3,
        expected_num_non_trainable_weights=0,
        expected_num_params=4 * 4 + 4 + 4,
        expected_weight_paths=["transitions", "start_transitions", "end_transitions"],
    )


def test_the_initializer_reaches_every_transition_score():
    crf = CRF(3, transitions_initializer="ones")
    crf.build((None, None, 3))
    for weight in crf.weights:
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(weight), 1.0)


def test_log_likelihood_matches_brute_force_over_all_paths(example):
    crf, potentials, mask, lengths = example
    rng = np.random.default_rng(3)
    for _ in range(5):
        tags = rng.integers(0, 3, size=(3, 4))
        tags[~mask] = 0
        got = keras.ops.convert_to_numpy(crf.log_likelihood(potentials, tags, mask))
        for row in range(3):
            log_z, _, _ = _brute_force(crf, potentials[row], lengths[row])
            expected = _path_score(crf, potentials[row], tags[row, : lengths[row]]) - log_z
            np.testing.assert_allclose(got[row], expected, rtol=1e-5, atol=1e-5)


def test_probabilities_of_all_paths_sum_to_one():
    crf = _crf_with_random_weights(2, seed=5)
    potentials = np.random.default_rng(2).normal(size=(1, 3, 2)).astype("float32")
    paths = np.array(list(itertools.product(range(2), repeat=3)))
    batch = np.repeat(potentials, len(paths), axis=0)
    log_probs = keras.ops.convert_to_numpy(crf.log_likelihood(batch, paths))
    np.testing.assert_allclose(np.exp(log_probs).sum(), 1.0, rtol=1e-5)


def test_viterbi_finds_the_brute_force_best_path(example):
    crf, potentials, mask, lengths = example
    tags, score = (keras.ops.convert_to_numpy(x) for x in crf(potentials, mask=mask))
    for row in range(3):
        _, best_path, best_score = _brute_force(crf, potentials[row], lengths[row])
        assert tuple(tags[row, : lengths[row]]) == best_path
        assert (tags[row, lengths[row] :] == 0).all()
        np.testing.assert_allclose(score[row], best_score, rtol=1e-5)


def test_viterbi_over_many_random_cases_without_a_mask():
    rng = np.random.default_rng(11)
    for case in range(10):
        crf = _crf_with_random_weights(3, seed=100 + case)
        length = 1 + case % 5
        potentials = rng.normal(size=(1, length, 3)).astype("float32")
        tags, _ = crf(potentials)
        _, best_path, _ = _brute_force(crf, potentials[0], length)
        assert tuple(keras.ops.convert_to_numpy(tags)[0]) == best_path


def test_padded_batch_decodes_like_each_sequence_alone(example):
    crf, potentials, mask, lengths = example
    tags, score = crf(potentials, mask=mask)
    for row in range(3):
        alone_tags, alone_score = crf(potentials[row : row + 1, : lengths[row]])
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(tags)[row, : lengths[row]], keras.ops.convert_to_numpy(alone_tags)[0]
        )
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(score)[row], keras.ops.convert_to_numpy(alone_score)[0], rtol=1e-6
        )


def test_mask_is_taken_from_the_keras_mask_of_the_potentials():
    tokens = keras.Input((None,), dtype="int32")
    embedding = keras.layers.Embedding(10, 3, mask_zero=True)
    tags, _ = CRF(3)(embedding(tokens))
    model = keras.Model(tokens, tags)
    embedding.set_weights([np.tile(np.array([[0.0, 0.0, 5.0]], "float32"), (10, 1))])
    out = keras.ops.convert_to_numpy(model(np.array([[4, 5, 0, 0]])))
    assert out.tolist() == [[2, 2, 0, 0]]


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match=r"Expected a positive integer. Received: num_tags=0"):
        CRF(0)
    with pytest.raises(ValueError, match=r"Expected a positive integer. Received: num_tags=True"):
        CRF(True)
    with pytest.raises(ValueError, match=r"Expected potentials of shape \(batch, time, 3\)"):
        CRF(3)(np.zeros((1, 2, 4), "float32"))
    with pytest.raises(ValueError, match=r"Expected potentials of shape \(batch, time, 3\)"):
        CRF(3)(keras.Input((None, 4)))


def test_the_tags_carry_the_mask_of_the_potentials():
    tokens = keras.Input((None,), dtype="int32")
    tags, scores = CRF(3)(keras.layers.Embedding(10, 3, mask_zero=True)(tokens))
    assert tags._keras_mask is not None and getattr(scores, "_keras_mask", None) is None
    unmasked_tags, _ = CRF(3)(keras.Input((None, 3)))
    assert getattr(unmasked_tags, "_keras_mask", None) is None


def test_scores_stay_float32_when_traced_under_a_float16_floatx(float16_floatx):
    tags, scores = CRF(4)(keras.Input((None, 4)))
    assert (tags.dtype, scores.dtype) == ("int32", "float32")


def test_decodes_float32_potentials_exactly_under_a_float16_floatx(example, float16_floatx):
    _, potentials, mask, lengths = example
    crf = _crf_with_random_weights(3, seed=1)  # float16 weights
    tags, score = (keras.ops.convert_to_numpy(x) for x in crf(potentials, mask=mask))
    log_likelihood = keras.ops.convert_to_numpy(crf.log_likelihood(potentials, tags, mask=mask))
    assert (tags.dtype, score.dtype, log_likelihood.dtype) == (np.int32, np.float32, np.float32)
    for row in range(3):
        log_z, best_path, best_score = _brute_force(crf, potentials[row], lengths[row])
        assert tuple(tags[row, : lengths[row]]) == best_path
        np.testing.assert_allclose(score[row], best_score, rtol=1e-6)
        np.testing.assert_allclose(log_likelihood[row], best_score - log_z, rtol=1e-5, atol=1e-6)


IOB2 = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def _valid_iob2(path):
    names = [IOB2[tag] for tag in path]
    return all(
        not tag.startswith("I-") or previous in ("B-" + tag[2:], tag)
        for previous, tag in zip(["O"] + names, names)
    )


def test_iob2_constraints_allow_an_inside_tag_only_after_its_own_type():
    constraints = iob2_constraints(IOB2)
    assert constraints["allowed_starts"] == [True, True, False, True, False]
    assert constraints["allowed_transitions"] == [
        # to: O     B-PER  I-PER  B-LOC  I-LOC
        [True, True, False, True, False],  # from O
        [True, True, True, True, False],  # from B-PER
        [True, True, True, True, False],  # from I-PER
        [True, True, False, True, True],  # from B-LOC
        [True, True, False, True, True],  # from I-LOC
    ]
    # A one-letter type is a type.
    assert iob2_constraints(["O", "B-X", "I-X"]) == {
        "allowed_transitions": [[True, True, False], [True, True, True], [True, True, True]],
        "allowed_starts": [True, True, False],
    }
    for bad, index in ((["O", "PER"], 1), (["O", "I-"], 1), (["o"], 0), (["O", None], 1)):
        with pytest.raises(ValueError, match=rf"Expected IOB2 tags: 'O', 'B-TYPE' or 'I-TYPE'. Received: tags\[{index}\]="):
            iob2_constraints(bad)


def test_iob2_decoding_never_gives_an_inside_tag_after_outside():
    # Per token alone: O, then I-PER. The unconstrained CRF (no transition preference yet) follows them.
    potentials = np.array([[[2.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.5, 3.0, 0.0, 0.0]]], "float32")
    plain, constrained = CRF(5), CRF(5, **iob2_constraints(IOB2))
    assert keras.ops.convert_to_numpy(plain(potentials)[0]).tolist() == [[0, 2]]
    tags, score = (keras.ops.convert_to_numpy(x) for x in constrained(potentials))
    # Best valid path: B-PER I-PER (0 + 3) beats O B-PER (2 + 0.5) and O O (2 + 0).
    assert tags.tolist() == [[1, 2]] and score.tolist() == [3.0]


def test_constrained_viterbi_finds_the_brute_force_best_valid_path():
    rng = np.random.default_rng(21)
    for case in range(4):
        crf = CRF(5, **iob2_constraints(IOB2))
        crf.build((None, None, 5))
        crf.transitions.assign(rng.normal(size=(5, 5)).astype("float32"))
        crf.start_transitions.assign(rng.normal(size=5).astype("float32"))
        crf.end_transitions.assign(rng.normal(size=5).astype("float32"))
        lengths = np.array([4, 1 + case % 4])
        mask = np.arange(4)[None, :] < lengths[:, None]
        # Strong inside tags, so the unconstrained best path is usually invalid.
        potentials = (rng.normal(size=(2, 4, 5)) + np.array([0, 0, 2, 0, 2])).astype("float32")
        tags, score = (keras.ops.convert_to_numpy(x) for x in crf(potentials, mask=mask))
        for row in range(2):
            _, best_path, best_score = _brute_force(crf, potentials[row], lengths[row], _valid_iob2)
            assert tuple(tags[row, : lengths[row]]) == best_path
            assert (tags[row, lengths[row] :] == 0).all()
            np.testing.assert_allclose(score[row], best_score, rtol=1e-5)


def test_log_likelihood_ignores_the_constraints():
    """Training normalises over every path, so an invalid gold path keeps a finite loss."""
    rng = np.random.default_rng(4)
    plain, constrained = _crf_with_random_weights(5, seed=8), CRF(5, **iob2_constraints(IOB2))
    constrained.build((None, None, 5))
    constrained.set_weights(plain.get_weights())
    potentials = rng.normal(size=(1, 3, 5)).astype("float32")
    invalid = np.array([[0, 2, 4]])
    expected = keras.ops.convert_to_numpy(plain.log_likelihood(potentials, invalid))
    got = keras.ops.convert_to_numpy(constrained.log_likelihood(potentials, invalid))
    np.testing.assert_array_equal(got, expected)
    assert np.isfinite(got).all()


def test_rejects_bad_constraints():
    with pytest.raises(ValueError, match=r"Expected booleans of shape \(3, 3\). Received: allowed_transitions bool of shape \(2, 2\)"):
        CRF(3, allowed_transitions=[[True, True], [True, True]])
    with pytest.raises(ValueError, match=r"Expected booleans of shape \(2, 2\). Received: allowed_transitions int64 of shape \(2, 2\)"):
        CRF(2, allowed_transitions=[[1, 1], [1, 1]])
    with pytest.raises(ValueError, match=r"Expected booleans of shape \(2, 2\). Received: allowed_transitions ragged"):
        CRF(2, allowed_transitions=[[True, True], [True]])
    with pytest.raises(ValueError, match=r"Expected booleans of shape \(2,\). Received: allowed_starts bool of shape \(3,\)"):
        CRF(2, allowed_starts=[True, True, True])
    with pytest.raises(ValueError, match=r"^Expected at least one tag that may start a sequence. Received: allowed_starts all False$"):
        CRF(2, allowed_starts=[False, False])
    with pytest.raises(ValueError, match=r"Expected every tag to have at least one allowed next tag. Received: allowed_transitions\[1\] all False"):
        CRF(2, allowed_transitions=[[True, True], [False, False]])
    crf = CRF(2, allowed_transitions=np.ones((2, 2), bool))
    assert crf.allowed_transitions == [[True, True], [True, True]] and crf.get_config()["allowed_starts"] is None


@pytest.fixture
def float64_floatx():
    previous = keras.config.floatx()
    keras.config.set_floatx("float64")
    yield
    keras.config.set_floatx(previous)


def test_constrained_decoding_stays_float32_under_a_float64_floatx(float64_floatx):
    rng = np.random.default_rng(5)
    crf = CRF(5, **iob2_constraints(IOB2))
    crf.build((None, None, 5))
    for weight in crf.weights:
        weight.assign(rng.normal(size=weight.shape))
    lengths = np.array([3, 2])
    mask = np.arange(3)[None, :] < lengths[:, None]
    potentials = (rng.normal(size=(2, 3, 5)) + np.array([0, 0, 2, 0, 2])).astype("float32")
    tags, score = crf(potentials, mask=mask)
    assert (keras.backend.standardize_dtype(tags.dtype), keras.backend.standardize_dtype(score.dtype)) == (
        "int32",
        "float32",
    )
    tags, score = keras.ops.convert_to_numpy(tags), keras.ops.convert_to_numpy(score)
    for row in range(2):
        _, best_path, best_score = _brute_force(crf, potentials[row], lengths[row], _valid_iob2)
        assert tuple(tags[row, : lengths[row]]) == best_path
        assert (tags[row, lengths[row] :] == 0).all()
        np.testing.assert_allclose(score[row], best_score, rtol=1e-5)


def test_a_mask_that_is_not_boolean_counts_every_nonzero_entry_as_a_token(example):
    """Such as the token ids themselves, 0 at padding: decoding and the likelihood read it as `ids != 0`."""
    crf, potentials, mask, lengths = example
    ids = np.where(mask, np.arange(1, 13).reshape(3, 4), 0)
    tags = np.array([[0, 1, 2, 1], [2, 2, 0, 0], [1, 0, 0, 0]])
    got = keras.ops.convert_to_numpy(crf.log_likelihood(potentials, tags, ids))
    decoded, score = (keras.ops.convert_to_numpy(x) for x in crf(potentials, mask=ids))
    for row in range(3):
        log_z, best_path, best_score = _brute_force(crf, potentials[row], lengths[row])
        expected = _path_score(crf, potentials[row], tags[row, : lengths[row]]) - log_z
        np.testing.assert_allclose(got[row], expected, rtol=1e-5, atol=1e-5)
        assert tuple(decoded[row, : lengths[row]]) == best_path
        assert (decoded[row, lengths[row] :] == 0).all()
        np.testing.assert_allclose(score[row], best_score, rtol=1e-5)


def test_tag_ids_past_float16_precision_decode_exactly_under_a_float16_floatx(float16_floatx):
    # float16 holds the integers exactly only up to 2048: the backpointers must travel in float32.
    num_tags = 2051
    crf = CRF(num_tags)
    potentials = np.zeros((1, 2, num_tags), "float32")
    potentials[0, 0, 2049] = potentials[0, 1, 5] = 1.0
    tags, score = (keras.ops.convert_to_numpy(x) for x in crf(potentials))
    assert tags.tolist() == [[2049, 5]] and score.tolist() == [2.0]


def test_iob1_files_are_read_as_iob2_so_the_iob2_constraints_apply_to_what_iob1_allows(tmp_path):
    from seqtasks.data.conll import read_conll
    from seqtasks.tasks.ner.config import TaggingDataConfig
    from seqtasks.tasks.ner.task import tag_vocabulary

    # IOB1 (CoNLL-2003): an entity opens with I-; B- only splits two adjacent entities of one type.
    path = tmp_path / "iob1.conll"
    path.write_text("a O\nJohn I-PER\nSmith I-PER\nMary B-PER\nin O\nParis I-LOC\n", encoding="utf-8")
    sentences = read_conll(path, tag_column=1, scheme="iob1")
    assert sentences[0][1] == ["O", "B-PER", "I-PER", "B-PER", "O", "B-LOC"]
    tags = tag_vocabulary(TaggingDataConfig(path=str(path)), sentences, [])
    constraints = iob2_constraints(tags)
    allowed = {(a, b) for i, a in enumerate(tags) for j, b in enumerate(tags) if constraints["allowed_transitions"][i][j]}
    assert {("O", "B-PER"), ("I-PER", "B-PER"), ("B-PER", "B-PER"), ("B-PER", "I-PER")} <= allowed
    assert not {("O", "I-PER"), ("B-LOC", "I-PER"), ("I-LOC", "I-PER")} & allowed
    # Scores that favour IOB1's O I-PER I-PER decode to a valid IOB2 path.
    index = {tag: i for i, tag in enumerate(tags)}
    potentials = np.zeros((1, 3, len(tags)), "float32")
    for step, (tag, score) in enumerate([("O", 2.0), ("I-PER", 3.0), ("I-PER", 3.0)]):
        potentials[0, step, index[tag]] = score
    potentials[0, 1, index["B-PER"]] = 1.0
    decoded = keras.ops.convert_to_numpy(CRF(len(tags), **constraints)(potentials)[0])[0]
    assert [tags[i] for i in decoded] == ["O", "B-PER", "I-PER"]


NAMES = {
    3: ["O", "B-PER", "I-PER"],
    4: ["B-PER", "O", "I-PER", "B-LOC"],  # B-LOC has no inside tag: nothing continues it
    5: ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"],
}
PADDING_TAG = 9  # out of range: tags at padding are ignored


def _continuation(names):
    """For each tag, the inside tag that continues its entity, or -1."""
    inside = {name[2:]: index for index, name in enumerate(names) if name.startswith("I-")}
    return np.array([-1 if name == "O" else inside.get(name[2:], -1) for name in names], "int32")


def _entity_starts(names, paths):
    """True where a tag does not continue the previous tag's entity (an `I-X` after `B-X` or `I-X` does)."""
    starts = np.ones(paths.shape, bool)
    for row, path in enumerate(paths):
        for t in range(1, len(path)):
            previous, tag = names[path[t - 1]], names[path[t]]
            starts[row, t] = not (tag.startswith("I-") and previous != "O" and previous[2:] == tag[2:])
    return starts


def _constrained(names, transitions, start, end):
    """The scores with every move IOB2 forbids at -inf (NumPy, from the tag names)."""
    transitions, start = transitions.copy(), start.copy()
    for a, b in itertools.product(range(len(names)), repeat=2):
        if names[b].startswith("I-") and names[a] not in ("B-" + names[b][2:], names[b]):
            transitions[a, b] = -np.inf
    start[[name.startswith("I-") for name in names]] = -np.inf
    return transitions, start, end


def _paths(num_tags, length):
    return np.array(list(itertools.product(range(num_tags), repeat=length)))


def _path_log_probs(potentials, transitions, start, end, paths):
    """Each path's log probability; paths of score -inf have probability 0 and the others share 1."""
    length = paths.shape[1]
    scores = (
        start[paths[:, 0]]
        + end[paths[:, -1]]
        + potentials[np.arange(length), paths].sum(axis=1)
        + transitions[paths[:, :-1], paths[:, 1:]].sum(axis=1)
    )
    finite = np.isfinite(scores)
    if not finite.any():
        return np.full(len(paths), -np.inf)
    top = scores[finite].max()
    return scores - top - np.log(np.exp(scores[finite] - top).sum())


def _reference(potentials, length, scores, tags, starts, continuation):
    """At each real position e: log of the summed probability of every path agreeing with `tags` from the
    segment's start through e whose next tag (if any) is not `continuation[tags[e]]`; 0 at padding."""
    potentials = potentials.astype("float64")
    paths = _paths(potentials.shape[-1], length)
    with np.errstate(divide="ignore"):
        probs = np.exp(_path_log_probs(potentials[:length], *(s.astype("float64") for s in scores), paths))
        expected = np.zeros(len(tags))
        for e in range(length):
            s = max([0] + [u for u in range(e + 1) if starts[u]])
            agree = (paths[:, s : e + 1] == tags[s : e + 1]).all(axis=1)
            if e + 1 < length:
                agree &= paths[:, e + 1] != continuation[tags[e]]
            expected[e] = np.log(probs[agree].sum())
    return expected


def _assert_log_probs(got, expected):
    got = np.asarray(got)
    assert got.dtype == np.float32 and not np.isnan(got).any()
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected))
    finite = ~np.isneginf(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-4, atol=1e-4)


def _random_scores(rng, num_tags, constrained):
    transitions = (1.5 * rng.normal(size=(num_tags, num_tags))).astype("float32")
    start, end = (rng.normal(size=num_tags).astype("float32") for _ in range(2))
    if constrained:
        transitions, start, end = _constrained(NAMES[num_tags], transitions, start, end)
    return transitions, start, end


def _padded_batch(rng, num_tags, lengths, scores):
    """Potentials, mask and, per length, the best path and a random one (each row twice), padding scored high."""
    lengths = np.concatenate([lengths, lengths])
    time = max(lengths)
    mask = np.arange(time)[None, :] < lengths[:, None]
    potentials = (2.0 * rng.normal(size=(len(lengths), time, num_tags))).astype("float32")
    potentials[~mask] = 50.0
    tags = np.full(mask.shape, PADDING_TAG)
    for row, length in enumerate(lengths):
        paths = _paths(num_tags, length)
        log_probs = _path_log_probs(potentials[row, :length].astype("float64"), *scores, paths)
        best = paths[np.argmax(log_probs)]
        tags[row, :length] = best if row < len(lengths) // 2 else paths[rng.integers(len(paths))]
    return potentials, mask, tags, lengths


@pytest.mark.parametrize("constrained", [False, True], ids=["free", "iob2"])
@pytest.mark.parametrize("num_tags", [3, 4, 5])
def test_each_entity_span_has_the_brute_force_probability_of_being_exactly_right(num_tags, constrained):
    rng = np.random.default_rng(10 * num_tags + constrained)
    scores = _random_scores(rng, num_tags, constrained)
    potentials, mask, tags, lengths = _padded_batch(rng, num_tags, np.array([1, 2, 3, 4, 5]), scores)
    names, continuation = NAMES[num_tags], _continuation(NAMES[num_tags])
    tags[-1, 0] = names.index("I-PER")  # IOB2 forbids it to start a sentence
    starts = _entity_starts(names, np.where(mask, tags, 0))
    got = keras.ops.convert_to_numpy(segment_log_probs(potentials, mask, *scores, tags, starts, continuation))
    for row, length in enumerate(lengths):
        expected = _reference(potentials[row], length, scores, tags[row], starts[row], continuation)
        _assert_log_probs(got[row], expected)
    assert np.isneginf(got[-1, 0]) == constrained


def test_any_segmentation_and_continuation_match_brute_force_without_a_mask():
    rng = np.random.default_rng(3)
    num_tags, time = 4, 5
    transitions, start, end = _random_scores(rng, num_tags, constrained=False)
    transitions[rng.random((num_tags, num_tags)) < 0.3] = FORBIDDEN
    transitions[:, 0] = 0.0  # every tag may go on to tag 0: some path always exists
    start[2] = end[3] = FORBIDDEN
    potentials = rng.normal(size=(6, time, num_tags)).astype("float32")
    tags = rng.integers(0, num_tags, size=(6, time))
    tags[0] = [0, 0, 1, 0, 0]
    starts = rng.random((6, time)) < 0.4
    starts[:3, 0] = False  # no start before t: the segment begins at 0
    continuation = np.array([1, -1, 0, 2], "int32")
    got = keras.ops.convert_to_numpy(
        segment_log_probs(potentials, None, transitions, start, end, tags, starts, continuation)
    )
    for row in range(6):
        expected = _reference(potentials[row], time, (transitions, start, end), tags[row], starts[row], continuation)
        _assert_log_probs(got[row], expected)
    assert np.isfinite(got[0]).all() and np.isneginf(got).any()


def test_a_sequence_with_a_single_possible_path_gives_certainty_or_impossibility():
    # Tag 1 may neither end a path nor go on to any tag, so the only path is all zeros.
    transitions = np.array([[0.3, 0.2], [FORBIDDEN, FORBIDDEN]], "float32")
    start, end = np.array([0.1, 0.5], "float32"), np.array([0.0, FORBIDDEN], "float32")
    potentials = np.random.default_rng(0).normal(size=(3, 3, 2)).astype("float32")
    mask = np.array([[True] * 3, [True] * 3, [True, True, False]])
    tags = np.array([[0, 0, 0], [0, 1, 0], [0, 1, 0]])
    starts = np.array([[True, True, False], [True, False, True], [True, True, True]])
    got = keras.ops.convert_to_numpy(
        segment_log_probs(potentials, mask, transitions, start, end, tags, starts, np.array([1, -1], "int32"))
    )
    np.testing.assert_allclose(got, [[0.0, 0.0, 0.0], [0.0, -np.inf, 0.0], [0.0, -np.inf, 0.0]], atol=1e-6)
    # When a 0 is continued by a 0, no segment of 0s ends before the path does.
    got = keras.ops.convert_to_numpy(
        segment_log_probs(potentials, mask, transitions, start, end, tags, starts, np.array([0, -1], "int32"))
    )
    np.testing.assert_allclose(got, [[-np.inf, -np.inf, 0.0]] * 3, atol=1e-6)


def test_a_sequence_without_any_possible_path_gives_minus_infinity_not_nan():
    transitions = np.zeros((3, 3), "float32")
    start = np.zeros(3, "float32")
    end = np.full(3, FORBIDDEN, "float32")
    potentials = np.random.default_rng(1).normal(size=(2, 3, 3)).astype("float32")
    mask = np.array([[True, True, True], [True, False, False]])
    tags = np.array([[0, 1, 2], [1, 0, 0]])
    starts = np.array([[True, False, True], [True, False, False]])
    got = keras.ops.convert_to_numpy(
        segment_log_probs(potentials, mask, transitions, start, end, tags, starts, np.array([1, 1, -1], "int32"))
    )
    np.testing.assert_array_equal(got, [[-np.inf] * 3, [-np.inf, 0.0, 0.0]])


def _iob2_crf(rng, num_tags=5):
    crf = CRF(num_tags, **iob2_constraints(NAMES[num_tags]))
    crf.build((None, None, num_tags))
    for weight in crf.weights:
        weight.assign(rng.normal(size=weight.shape))
    return crf


def _layer_scores(crf):
    weights = (crf.transitions, crf.start_transitions, crf.end_transitions)
    weights = [keras.ops.convert_to_numpy(weight).astype("float32") for weight in weights]
    return _constrained(NAMES[crf.num_tags], *weights)


def _check_the_layers_method(crf, rng):
    lengths = np.array([5, 3, 1])
    mask = np.arange(5)[None, :] < lengths[:, None]
    # Strong inside tags, so the unconstrained best path would often break IOB2.
    potentials = (rng.normal(size=(4, 5, 5)) + np.array([0, 0, 2, 0, 2])).astype("float32")
    mask = np.concatenate([mask, mask[:1]])
    tags = np.where(mask, keras.ops.convert_to_numpy(crf(potentials, mask=mask)[0]), PADDING_TAG)
    tags[3] = [2, 2, 0, 1, 2]  # I-PER may not start a sentence
    names, continuation = NAMES[5], _continuation(NAMES[5])
    starts = _entity_starts(names, np.where(mask, tags, 0))
    got = crf.segment_log_probs(potentials, tags, starts, continuation, mask=mask)
    assert keras.backend.standardize_dtype(got.dtype) == "float32"
    got = keras.ops.convert_to_numpy(got)
    for row, length in enumerate(mask.sum(axis=1)):
        expected = _reference(potentials[row], length, _layer_scores(crf), tags[row], starts[row], continuation)
        _assert_log_probs(got[row], expected)
    assert np.isneginf(got[3, :2]).all() and np.isfinite(got[3, 2:]).all()


def test_the_crf_layer_scores_the_spans_it_decodes_under_its_constraints():
    rng = np.random.default_rng(5)
    _check_the_layers_method(_iob2_crf(rng), rng)


def test_the_crf_layer_stays_float32_under_a_float16_floatx(float16_floatx):
    rng = np.random.default_rng(6)
    _check_the_layers_method(_iob2_crf(rng), rng)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.function is TensorFlow's")
def test_runs_in_a_tf_function_of_unknown_batch_and_time():
    import tensorflow as tf

    rng = np.random.default_rng(8)
    scores = _random_scores(rng, 5, constrained=True)
    continuation = _continuation(NAMES[5])

    @tf.function(
        input_signature=[
            tf.TensorSpec((None, None, 5), tf.float32),
            tf.TensorSpec((None, None), tf.bool),
            tf.TensorSpec((None, None), tf.int32),
            tf.TensorSpec((None, None), tf.bool),
        ]
    )
    def confidence(potentials, mask, tags, starts):
        return segment_log_probs(potentials, mask, *scores, tags, starts, continuation)

    # One token each: the scans over the steps after the first would otherwise run zero times.
    for lengths in (np.array([4, 2, 3]), np.array([1])):
        potentials, mask, tags, lengths = _padded_batch(rng, 5, lengths, scores)
        starts = _entity_starts(NAMES[5], np.where(mask, tags, 0))
        got = confidence(potentials, mask, tags.astype("int32"), starts).numpy()
        for row, length in enumerate(lengths):
            expected = _reference(potentials[row], length, scores, tags[row], starts[row], continuation)
            _assert_log_probs(got[row], expected)
    assert confidence.experimental_get_tracing_count() == 1


def _tagger(output_layer, **kwargs):
    model = SequenceTagger(
        12, 10, 5, word_embedding_dim=5, char_embedding_dim=3, char_filters=4,
        encoder={"units": 6, "bidirectional": True}, dropout=0.0, output_layer=output_layer, seed=1, **kwargs,
    )
    model.build()
    for weight in model.weights:
        weight.assign(np.random.default_rng(len(weight.path)).normal(size=weight.shape).astype("float32"))
    return model


def test_the_softmax_tagger_multiplies_the_probabilities_of_the_spans_tokens():
    model = _tagger("softmax", **iob2_constraints(NAMES[5]))
    batch = tagger_inputs([[3, 4, 5, 6], [7, 8], [9]])
    mask = batch["words"] != 0
    tags = np.where(mask, np.random.default_rng(2).integers(0, 5, size=mask.shape), PADDING_TAG)
    starts = np.array([[False, True, False, False], [False, False, True, True], [True, False, True, False]])
    got = keras.ops.convert_to_numpy(model.segment_log_probs(batch, tags, starts, _continuation(NAMES[5])))
    potentials = keras.ops.convert_to_numpy(model(batch)).astype("float64")
    probs = np.exp(potentials) / np.exp(potentials).sum(axis=-1, keepdims=True)
    for row, length in enumerate(mask.sum(axis=1)):
        for t in range(4):
            s = max([0] + [u for u in range(t + 1) if starts[row, u]])
            expected = np.log(np.prod([probs[row, u, tags[row, u]] for u in range(s, t + 1)])) if t < length else 0.0
            np.testing.assert_allclose(got[row, t], expected, rtol=1e-5, atol=1e-5)
    assert got.dtype == np.float32


def test_the_crf_tagger_scores_its_decoded_spans_with_its_crf():
    model = _tagger("crf", **iob2_constraints(NAMES[5]))
    batch = tagger_inputs([[3, 4, 5, 6], [7, 8], [9]])
    mask = batch["words"] != 0
    tags = keras.ops.convert_to_numpy(model.decode(batch))
    continuation = _continuation(NAMES[5])
    starts = _entity_starts(NAMES[5], tags)
    got = keras.ops.convert_to_numpy(model.segment_log_probs(batch, tags, starts, continuation))
    potentials = keras.ops.convert_to_numpy(model(batch))
    for row, length in enumerate(mask.sum(axis=1)):
        expected = _reference(potentials[row], length, _layer_scores(model.crf), tags[row], starts[row], continuation)
        _assert_log_probs(got[row], expected)
