"""`segment_log_probs`, an entity span's confidence, against brute force over every tag path (NumPy, float64)."""

import itertools

import keras
import numpy as np
import pytest
from layer_test_utils import tagger_inputs

from seqtasks.layers import CRF
from seqtasks.layers.crf import FORBIDDEN, iob2_constraints, segment_log_probs
from seqtasks.models import SequenceTagger

pytestmark = pytest.mark.backends

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
