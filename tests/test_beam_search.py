import numpy as np
import pytest
from keras import ops

from seqtasks.decoding import beam_search, greedy_search, length_penalty, tile_beams

pytestmark = pytest.mark.backends

PAD, START, END, X, Y, Z, W = range(7)
VOCAB = 7


def _table(rows):
    """Log-probabilities of the next token given the last one; unlisted mass spread thinly."""
    table = np.full((VOCAB, VOCAB), 1e-6)
    for last, probs in rows.items():
        for token, p in probs.items():
            table[last, token] = p
    table /= table.sum(1, keepdims=True)
    return np.log(table).astype("float32")


# Greedy takes X (0.55) and then wanders (X -> X 0.34); the best whole sentence is "Y end".
TRAP = _table(
    {
        START: {X: 0.55, Y: 0.45},
        X: {X: 0.34, Y: 0.33, END: 0.33},
        Y: {END: 0.99, X: 0.01},
    }
)
# Short "X end" (log p -1.02, 2 tokens) against long "Y Z W end" (log p -1.20, 4 tokens).
# Z leads to W only after Y: with a wrongly gathered state the long path breaks.
SHORT_LONG = {
    START: {X: 0.40, Y: 0.35, END: 0.05, Z: 0.1, W: 0.1},
    X: {END: 0.9, Z: 0.05, W: 0.05},
    Y: {Z: 0.95, END: 0.05},
    W: {END: 0.95, X: 0.05},
}


def _bigram_step(table_after_y, table_otherwise):
    """Fake model whose state is the token before the last one."""

    def step(ids, previous):
        after_y = ops.expand_dims(ops.equal(previous, Y), -1)
        logits = ops.where(after_y, ops.take(table_after_y, ids, axis=0), ops.take(table_otherwise, ids, axis=0))
        return logits, ids

    return step


def _unigram_step(table):
    def step(ids, state):
        return ops.take(table, ids, axis=0), state

    return step


def _run_beam(step, batch, width, alpha=0.0, max_length=6):
    state = tile_beams(np.zeros(batch, np.int32), width)
    return [np.array(x) for x in beam_search(step, state, np.full(batch, START), END, max_length, width, alpha)]


def test_beam_search_finds_what_greedy_misses():
    ids, lengths, scores, _ = _run_beam(_unigram_step(TRAP), batch=2, width=3)
    np.testing.assert_array_equal(ids, [[Y, END, 0, 0, 0, 0]] * 2)
    np.testing.assert_array_equal(lengths, [2, 2])
    np.testing.assert_allclose(scores, TRAP[START, Y] + TRAP[Y, END], rtol=1e-5)
    greedy_ids, _, _, _ = greedy_search(_unigram_step(TRAP), (), np.full(2, START), END, 6)
    assert np.array(greedy_ids)[0, 0] == X


def test_length_penalty_can_prefer_the_longer_hypothesis():
    with_y = _table({**SHORT_LONG, Z: {W: 0.95, END: 0.05}})
    without_y = _table({**SHORT_LONG, Z: {END: 0.95, W: 0.05}})
    step = _bigram_step(with_y, without_y)
    ids, lengths, scores, _ = _run_beam(step, batch=1, width=4, alpha=0.0)
    np.testing.assert_array_equal(ids[0, :2], [X, END])
    short = without_y[START, X] + without_y[X, END]
    np.testing.assert_allclose(scores, [short], rtol=1e-5)

    ids, lengths, scores, _ = _run_beam(step, batch=1, width=4, alpha=1.0)
    np.testing.assert_array_equal(ids[0, :4], [Y, Z, W, END])
    long = without_y[START, Y] + without_y[Y, Z] + with_y[Z, W] + without_y[W, END]
    np.testing.assert_allclose(lengths, [4])
    np.testing.assert_allclose(scores, [long / ((5 + 4) / 6)], rtol=1e-5)
    assert long / ((5 + 4) / 6) > short / ((5 + 2) / 6)


def test_beam_width_one_equals_greedy():
    rng = np.random.default_rng(0)
    table = np.log(rng.dirichlet(np.full(VOCAB, 0.3), size=VOCAB)).astype("float32")
    step = _bigram_step(table, np.roll(table, 1, axis=1))
    start = np.full(3, START)
    greedy = greedy_search(step, np.zeros(3, np.int32), start, END, 8)
    beam = beam_search(step, tile_beams(np.zeros(3, np.int32), 1), start, END, 8, beam_width=1)
    for g, b in zip(greedy[:3], beam[:3]):
        np.testing.assert_allclose(np.array(b), np.array(g), rtol=1e-6)


def test_rows_of_a_batch_are_searched_independently():
    tables = np.stack([TRAP, _table({START: {X: 0.9}, X: {END: 0.9}})])

    def step(ids, row):
        return ops.take(ops.reshape(tables, (-1, VOCAB)), row * VOCAB + ids, axis=0), row

    state = tile_beams(np.array([0, 1], np.int32), 3)
    ids, lengths, _, row = beam_search(step, state, np.full(2, START), END, 6, 3)
    np.testing.assert_array_equal(np.array(ids)[:, :2], [[Y, END], [X, END]])
    np.testing.assert_array_equal(np.array(row), [0, 1])  # the best beam's state, per batch entry


def test_max_length_cuts_hypotheses_that_never_end():
    loop = _table({START: {X: 0.9}, X: {X: 0.99}})
    ids, lengths, _, _ = _run_beam(_unigram_step(loop), batch=1, width=2, max_length=4)
    np.testing.assert_array_equal(ids, [[X, X, X, X]])
    np.testing.assert_array_equal(lengths, [4])


def test_helpers():
    tiled = tile_beams({"a": np.array([[1, 2], [3, 4]])}, 2)
    np.testing.assert_array_equal(np.array(tiled["a"]), [[1, 2], [1, 2], [3, 4], [3, 4]])
    np.testing.assert_allclose(np.array(length_penalty(np.array([1, 7]), 0.6)), [1.0, 2.0**0.6], rtol=1e-6)
    with pytest.raises(ValueError, match="Expected beam_width >= 1. Received: beam_width=0"):
        beam_search(_unigram_step(TRAP), (), np.full(1, START), END, 3, beam_width=0)


def _reference_beam(table, width, alpha, max_length):
    """Plain beam search over whole candidate lists, for one sequence of a unigram model."""
    beams = [((START,), 0.0, False)]
    for _ in range(max_length):
        if all(done for _, _, done in beams):
            break
        candidates = []
        for tokens, score, done in beams:
            if done:
                candidates.append((tokens, score, True))
                continue
            for token in range(VOCAB):
                candidates.append((tokens + (token,), score + float(table[tokens[-1], token]), token == END))
        penalty = lambda tokens: ((5 + len(tokens) - 1) / 6) ** alpha  # noqa: E731
        candidates.sort(key=lambda c: -c[1] / penalty(c[0]))
        beams = candidates[:width]
    tokens, score, _ = beams[0]
    return list(tokens[1:]), score / (((5 + len(tokens) - 1) / 6) ** alpha)


@pytest.mark.parametrize("width, max_length", [(2, 5), (3, 8), (5, 5), (5, 10), (9, 8)])
def test_matches_a_plain_beam_search_that_never_stops_early(width, max_length):
    rng = np.random.default_rng(width * max_length)
    for case in range(6):
        table = np.log(rng.dirichlet(np.full(VOCAB, 0.5), size=VOCAB)).astype("float32")
        alpha = [0.0, 0.6, 1.0, 2.0, 0.6, 0.0][case]
        ids, lengths, scores, _ = _run_beam(
            _unigram_step(table), batch=1, width=width, alpha=alpha, max_length=max_length
        )
        expected_tokens, expected_score = _reference_beam(table, width, alpha, max_length)
        assert list(ids[0, : lengths[0]]) == expected_tokens
        np.testing.assert_allclose(scores[0], expected_score, rtol=1e-5)


@pytest.mark.parametrize("size, k, chunk", [(1, 1, 64), (7, 5, 3), (10, 3, 4), (50, 9, 8), (4487, 5, 64)])
def test_chunked_top_k_equals_top_k(size, k, chunk):
    from seqtasks.decoding.beam_search import _row_top_k

    rows = np.random.default_rng(size).normal(size=(6, size)).astype("float32")
    rows[0, :k] = 9.0 + np.arange(k)  # a row whose best entries share one chunk
    values, indices, row_max = (np.asarray(ops.convert_to_numpy(t)) for t in _row_top_k(rows, k, chunk))
    expected_values, expected_indices = (np.asarray(ops.convert_to_numpy(t)) for t in ops.top_k(rows, k=k))
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_array_equal(values, expected_values)
    np.testing.assert_array_equal(row_max[:, 0], rows.max(axis=-1))
