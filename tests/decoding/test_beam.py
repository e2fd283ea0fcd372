import itertools

import keras
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
    # GNMT's lengths leave the end token out: 3 and 1.
    np.testing.assert_allclose(scores, [long / ((5 + 3) / 6)], rtol=1e-5)
    assert long / ((5 + 3) / 6) > short / ((5 + 1) / 6)


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
        candidates.sort(key=lambda c: -c[1] / _penalty(_scored_length(c[0][1:], END), alpha))
        beams = candidates[:width]
    tokens, score, _ = beams[0]
    return list(tokens[1:]), score / _penalty(_scored_length(tokens[1:], END), alpha)


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
    from seqtasks.decoding.beam import _row_top_k

    rows = np.random.default_rng(size).normal(size=(6, size)).astype("float32")
    rows[0, :k] = 9.0 + np.arange(k)  # a row whose best entries share one chunk
    values, indices, row_max = (np.asarray(ops.convert_to_numpy(t)) for t in _row_top_k(rows, k, chunk))
    expected_values, expected_indices = (np.asarray(ops.convert_to_numpy(t)) for t in ops.top_k(rows, k=k))
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_array_equal(values, expected_values)
    assert values.shape == indices.shape == (6, k) and row_max.shape == (6, 1)
    assert indices.dtype == np.int32
    np.testing.assert_array_equal(row_max[:, 0], rows.max(axis=-1))


# --- Scripted models: what the model says depends on the step, so a test can force known sequences.

P = 6  # a non-zero padding id (a token the scripts below never favour)


def _scored_length(tokens, end_id):
    """GNMT's |Y|: the tokens produced, the end token left out."""
    return len(tokens) - (len(tokens) > 0 and tokens[-1] == end_id)


def _penalty(length, alpha):
    """GNMT length penalty, written out here rather than taken from the package."""
    return ((5.0 + length) / 6.0) ** alpha


def _script_logits(script, vocab=VOCAB):
    """`script[t][last] = {token: p}` -> logits `(steps, vocab, vocab)`; unlisted mass spread evenly.

    The logits are `log p` plus an offset per row, so they are not normalised:
    the search has to normalise them itself.
    """
    logits = np.zeros((len(script), vocab, vocab))
    for t, rows in enumerate(script):
        for last in range(vocab):
            probs = rows.get(last, {})
            rest = (1.0 - sum(probs.values())) / (vocab - len(probs))
            row = np.array([probs.get(token, rest) for token in range(vocab)])
            logits[t, last] = np.log(row) + 3.0 * t - 1.5 * last
    return logits.astype("float32")


def _scripted_step(logits_by_entry):
    """Fake model: row of batch entry `b` reads `logits_by_entry[b, steps taken, last id]`.

    Its state per row is `(b, steps taken)`, so the step count of the best
    hypothesis comes back with it.
    """
    logits_by_entry = np.asarray(logits_by_entry, np.float32)
    _, steps, vocab, _ = logits_by_entry.shape
    flat = logits_by_entry.reshape(-1, vocab)

    def step(ids, state):
        entry, taken = state
        return ops.take(flat, (entry * steps + taken) * vocab + ids, axis=0), (entry, taken + 1)

    return step


def _run_script(scripts, width, alpha, max_length, pad_id=0):
    logits = np.stack([_script_logits(script) for script in scripts])
    batch = len(scripts)
    state = tile_beams((np.arange(batch, dtype=np.int32), np.zeros(batch, np.int32)), width)
    ids, lengths, scores, (_, taken) = beam_search(
        _scripted_step(logits), state, np.full(batch, START), END, max_length, width, alpha, pad_id=pad_id
    )
    return np.array(ids), np.array(lengths), np.array(scores), np.array(taken)


def _assert_padded(ids, lengths, end_id, pad_id):
    """Every returned sequence: tokens, `end_id` last unless cut at `max_length`, then only `pad_id`."""
    max_length = ids.shape[1]
    for row, length in zip(ids, lengths):
        assert 1 <= length <= max_length
        assert end_id not in row[: length - 1], row
        if length < max_length:
            assert row[length - 1] == end_id, row
        np.testing.assert_array_equal(row[length:], np.full(max_length - length, pad_id))


def _overtaking_script(last_x_p):
    """The ended "end" (p .42) against "X X X X X", cut at max_length 5 (p .2, then .99 thrice, then `last_x_p`).

    Y (p .37) leads the first step only: every continuation of it costs log(1/7).
    """
    return [
        {START: {END: 0.42, X: 0.2, Y: 0.37}},
        {X: {X: 0.99}},
        {X: {X: 0.99}},
        {X: {X: 0.99}},
        {X: {X: last_x_p}},
    ]


def test_a_live_hypothesis_overtakes_the_ended_leader_at_the_last_step():
    # GNMT's length leaves out the end token: "end" is scored with the penalty of length 0 and
    # "X X X X end" with that of "X X X X", so only a hypothesis cut at max_length can overtake.
    alpha, max_length = 1.0, 5
    short = np.log(0.42)
    prefixes = [np.log(0.2) + k * np.log(0.99) for k in range(5)]  # "X", "X X", ... "X X X X X"
    # The premise, by hand: "end" leads at steps 1 to 4 (it ends at step 1, Y leads that step) ...
    assert np.log(0.37) / _penalty(1, alpha) > short / _penalty(0, alpha)
    for n, prefix in enumerate(prefixes[:4], start=1):
        assert prefix / _penalty(n, alpha) < short / _penalty(0, alpha)
    # ... and at step 5 "X X X X X" passes it.
    assert prefixes[4] / _penalty(5, alpha) > short / _penalty(0, alpha)

    ids, lengths, scores, taken = _run_script([_overtaking_script(0.99)], 3, alpha, max_length)
    np.testing.assert_array_equal(ids, [[X, X, X, X, X]])
    np.testing.assert_array_equal(lengths, [5])
    np.testing.assert_allclose(scores, [prefixes[4] / _penalty(5, alpha)], rtol=1e-5)
    np.testing.assert_array_equal(taken, [5])


@pytest.mark.parametrize("pad_id", [0, P])
def test_the_ended_leader_wins_when_the_live_one_fails_at_the_last_step(pad_id):
    # As above, but the fifth X costs log .5: the search must still run every step (the live
    # "X X X X" could pass the leader until then), and return the ended one.
    alpha = 1.0
    prefix = np.log(0.2) + 3 * np.log(0.99)
    short = np.log(0.42) / _penalty(0, alpha)
    assert prefix / _penalty(5, alpha) > short  # it could pass it until the last step
    assert (prefix + np.log(0.5)) / _penalty(5, alpha) < short
    assert (prefix + np.log(0.5 / 6)) / _penalty(4, alpha) < short  # "X X X X end" neither

    ids, lengths, scores, taken = _run_script([_overtaking_script(0.5)], 3, alpha, 5, pad_id=pad_id)
    np.testing.assert_array_equal(ids, [[END, pad_id, pad_id, pad_id, pad_id]])
    np.testing.assert_array_equal(lengths, [1])
    np.testing.assert_allclose(scores, [short], rtol=1e-5)
    np.testing.assert_array_equal(taken, [5])  # no early stop: the bound had to wait for step 5


# Entry 0: "X end" (.6 * .9) beats "Y end" (.3 * .9) and "end" (.09); all three end by step 2.
# Entry 1: "end" (.7) at step 1; its live "X" (.2) can no longer pass it (alpha 0).
EARLY_STOP = [
    [{START: {X: 0.6, Y: 0.3, END: 0.09}}, {X: {END: 0.9}, Y: {END: 0.9}}] + [{}] * 4,
    [{START: {END: 0.7, X: 0.2}}, {X: {END: 0.5}}] + [{}] * 4,
]


@pytest.mark.parametrize("pad_id", [0, 1, P])
def test_an_early_stop_pads_with_pad_id(pad_id):
    ids, lengths, scores, taken = _run_script(EARLY_STOP, width=3, alpha=0.0, max_length=6, pad_id=pad_id)
    np.testing.assert_array_equal(taken, [2, 2])  # both entries decided after 2 of 6 steps
    np.testing.assert_array_equal(ids, [[X, END] + [pad_id] * 4, [END] + [pad_id] * 5])
    np.testing.assert_array_equal(lengths, [2, 1])
    np.testing.assert_allclose(scores, [np.log(0.6) + np.log(0.9), np.log(0.7)], rtol=1e-5)
    _assert_padded(ids, lengths, END, pad_id)


def test_an_early_stop_with_a_length_penalty_pads_with_pad_id():
    # alpha 1: entry 1's "end" (length 0) against its live "X" whose bound is log .2 / penalty(6).
    alpha = 1.0
    assert np.log(0.2) / _penalty(6, alpha) < np.log(0.7) / _penalty(0, alpha)
    assert np.log(0.6 * 0.9) / _penalty(1, alpha) > np.log(0.3 * 0.9) / _penalty(1, alpha)
    ids, lengths, scores, taken = _run_script(EARLY_STOP, width=3, alpha=alpha, max_length=6, pad_id=P)
    np.testing.assert_array_equal(taken, [2, 2])
    np.testing.assert_array_equal(ids, [[X, END, P, P, P, P], [END, P, P, P, P, P]])
    np.testing.assert_array_equal(lengths, [2, 1])
    expected = [np.log(0.6 * 0.9) / _penalty(1, alpha), np.log(0.7) / _penalty(0, alpha)]
    np.testing.assert_allclose(scores, expected, rtol=1e-5)


# --- Brute force: a beam wide enough to keep every candidate is an exhaustive search.


def _prefix_step(logits_by_entry, vocab):
    """Fake model whose logits depend on the whole prefix fed so far.

    State per row: `(b, code)`, `code` the fed ids as digits `id + 1` in base
    `vocab + 1` (a bijection), and the logits `logits_by_entry[b, code]`.
    """
    codes = logits_by_entry.shape[1]
    flat = logits_by_entry.reshape(-1, vocab)

    def step(ids, state):
        entry, code = state
        code = code * (vocab + 1) + ids + 1
        return ops.take(flat, entry * codes + code, axis=0), (entry, code)

    return step


def _decode_prefix(code, vocab):
    digits = []
    while code:
        digits.append(code % (vocab + 1) - 1)
        code //= vocab + 1
    return digits[::-1]


def _exhaustive(logits, vocab, start, end_id, max_length, alpha):
    """Every sequence: ended by `end_id` (at most `max_length` tokens) or cut at `max_length`.

    Returns the four best `(score, tokens)`, score = log p / penalty(length).
    """
    no_attention = np.zeros((logits.shape[0], 1))
    return _exhaustive_preferring(logits, no_attention, vocab, start, end_id, max_length, alpha, 0.0, 0)


@pytest.mark.parametrize("vocab, max_length", [(4, 3), (3, 4)])
def test_a_beam_that_keeps_every_candidate_finds_the_exhaustive_best(vocab, max_length):
    start, end_id = 1, 2
    width = vocab**max_length  # more than the candidates of any step: nothing is ever pruned
    codes = (vocab + 1) ** max_length
    rng = np.random.default_rng(vocab * 10 + max_length)
    steps_taken = []
    for case, (alpha, pad_id) in enumerate([(0.0, 0), (0.6, vocab - 1), (1.5, 0), (3.0, vocab - 1)]):
        batch = 3
        logits = rng.normal(0.0, 1.5, size=(batch, codes, vocab)) + rng.normal(0.0, 3.0, size=(batch, codes, 1))
        logits[..., end_id] += rng.uniform(0.0, 2.5, size=(batch, codes))  # ends are common: early stops
        logits = logits.astype("float32")
        state = tile_beams((np.arange(batch, dtype=np.int32), np.zeros(batch, np.int32)), width)
        ids, lengths, scores, (_, code) = beam_search(
            _prefix_step(logits, vocab), state, np.full(batch, start), end_id, max_length, width, alpha, pad_id
        )
        ids, lengths, scores, code = (np.array(x) for x in (ids, lengths, scores, code))
        _assert_padded(ids, lengths, end_id, pad_id)
        for b in range(batch):
            (best, tokens), (second, _), *_ = _exhaustive(logits[b], vocab, start, end_id, max_length, alpha)
            assert best - second > 1e-4 * abs(best), "a near tie: pick another seed"
            assert list(ids[b, : lengths[b]]) == list(tokens), (case, b)
            np.testing.assert_allclose(scores[b], best, rtol=1e-5)
            # The returned state is the best hypothesis' own: the ids it was fed.
            fed = _decode_prefix(int(code[b]), vocab)
            assert fed == [start] + list(ids[b, : len(fed) - 1])
            steps_taken.append(len(fed))
    # Both ways the loop ends were exercised: at max_length, and early.
    assert max(steps_taken) == max_length and min(steps_taken) < max_length, steps_taken


def test_a_live_hypothesis_that_can_at_best_tie_the_ended_leader_does_not_keep_the_search_going():
    # Exact float arithmetic: two tokens at logit 0 and the rest at -1e9 give log p = -log 2 each;
    # one token at 0 gives log p = 0. "end" ends at step 1 with -log 2 (its length 0: penalty 5 / 6);
    # "X Y" has -2 log 2, and "X Y Y Y Y" can reach -2 log 2 / penalty(5) = -log 2 / (5 / 6) at most: a tie.
    alpha, max_length = 1.0, 5
    assert _penalty(max_length, alpha) == 2 * _penalty(0, alpha)
    logits = np.full((1, max_length, VOCAB, VOCAB), -1e9, np.float32)
    logits[0, 0, START, [END, X]] = 0.0
    logits[0, 1, X, [Y, Z]] = 0.0
    logits[0, 2:, Y, Y] = 0.0
    logits[0, 2:, Z, Z] = 0.0
    state = tile_beams((np.zeros(1, np.int32), np.zeros(1, np.int32)), 3)
    ids, _, scores, (_, taken) = beam_search(
        _scripted_step(logits), state, np.full(1, START), END, max_length, 3, alpha
    )
    np.testing.assert_array_equal(np.array(ids), [[END, 0, 0, 0, 0]])
    np.testing.assert_allclose(np.array(scores), [-np.log(2.0) / _penalty(0, alpha)], rtol=1e-6)
    np.testing.assert_array_equal(np.array(taken), [2])  # "end" leads after step 2; nothing can pass it


@pytest.mark.parametrize("vocab, max_length", [(4, 3), (3, 4)])
def test_the_n_best_of_a_beam_that_keeps_every_candidate_are_the_exhaustive_n_best(vocab, max_length):
    start, end_id, n_best = 1, 2, 3
    width = vocab**max_length
    rng = np.random.default_rng(vocab * 100 + max_length)
    for alpha, pad_id in [(0.0, 0), (1.0, vocab - 1)]:
        batch = 2
        logits = rng.normal(0.0, 1.5, size=(batch, (vocab + 1) ** max_length, vocab))
        logits[..., end_id] += 1.5  # ends are common: early stops
        logits = logits.astype("float32")
        state = tile_beams((np.arange(batch, dtype=np.int32), np.zeros(batch, np.int32)), width)
        ids, lengths, scores, _ = beam_search(
            _prefix_step(logits, vocab), state, np.full(batch, start), end_id, max_length, width, alpha, pad_id,
            n_best=n_best,
        )
        ids, lengths, scores = (np.array(x) for x in (ids, lengths, scores))
        assert ids.shape == (batch, n_best, max_length) and lengths.shape == scores.shape == (batch, n_best)
        for b in range(batch):
            expected = _exhaustive(logits[b], vocab, start, end_id, max_length, alpha)
            gaps = [first - second for (first, _), (second, _) in zip(expected, expected[1:])]
            assert min(gaps) > 1e-4 * abs(expected[0][0]), "a near tie: pick another seed"
            _assert_padded(ids[b], lengths[b], end_id, pad_id)
            for k, (score, tokens) in enumerate(expected[:n_best]):
                assert list(ids[b, k, : lengths[b, k]]) == list(tokens), (alpha, b, k)
                np.testing.assert_allclose(scores[b, k], score, rtol=1e-5)


def test_the_n_best_wait_until_the_last_of_them_cannot_be_passed():
    # "end" (.7) is the best after step 1, and no live hypothesis can pass it: one best stops there.
    # The second best, "X X end" (.2 * .9 * .9), ends only at step 3: two best run until then.
    script = [{START: {END: 0.7, X: 0.2}}, {X: {X: 0.9}}, {X: {END: 0.9}}] + [{}] * 3
    ids, lengths, scores, taken = _run_script([script], width=3, alpha=0.0, max_length=6)
    np.testing.assert_array_equal(taken, [1])
    logits = _script_logits(script)[None]
    state = tile_beams((np.zeros(1, np.int32), np.zeros(1, np.int32)), 3)
    ids, lengths, scores, (_, taken) = (
        ops.convert_to_numpy(x) if not isinstance(x, tuple) else tuple(ops.convert_to_numpy(y) for y in x)
        for x in beam_search(_scripted_step(logits), state, np.full(1, START), END, 6, 3, n_best=2)
    )
    np.testing.assert_array_equal(ids, [[[END, 0, 0, 0, 0, 0], [X, X, END, 0, 0, 0]]])
    np.testing.assert_array_equal(lengths, [[1, 3]])
    np.testing.assert_allclose(scores, [[np.log(0.7), np.log(0.2 * 0.9 * 0.9)]], rtol=1e-5)
    np.testing.assert_array_equal(taken, [3])


@pytest.mark.parametrize("width, n_best", [(1, 1), (3, 1), (3, 3)])
def test_n_best_from_one_to_the_beam_width_returns_that_many(width, n_best):
    ids, lengths, scores, _ = beam_search(
        _unigram_step(TRAP), tile_beams((), width), np.full(2, START), END, 4, width, n_best=n_best
    )
    assert np.array(ids).shape == (2, n_best, 4) and np.array(scores).shape == np.array(lengths).shape == (2, n_best)
    np.testing.assert_array_equal(np.array(ids)[:, 0, :2], [[Y, END]] * 2 if width > 1 else [[X, X]] * 2)


@pytest.mark.parametrize("n_best", [0, 4])
def test_n_best_outside_one_to_the_beam_width_is_an_error(n_best):
    with pytest.raises(ValueError, match=rf"Expected n_best in 1..beam_width=3. Received: n_best={n_best}"):
        beam_search(_unigram_step(TRAP), (), np.full(1, START), END, 3, beam_width=3, n_best=n_best)


# --- Per entry early stop, graph mode, states of any rank, unknown shapes.


def test_each_entry_is_decided_by_its_own_hypotheses():
    # Entry 0: "end" (.35) at step 1; its live hypotheses have .65 / 6 each, below .35.
    # Entry 1: "end" (.6) at step 1; its live "X" (.39) is below .6 but above entry 0's .35.
    # Each entry is decided after step 1: the search stops there, although entry 1's live "X"
    # could pass entry 0's leader (that is no concern of entry 0).
    scripts = [[{START: {END: 0.35}}] + [{}] * 5, [{START: {END: 0.6, X: 0.39}}] + [{}] * 5]
    assert np.log(0.65 / 6) < np.log(0.35) < np.log(0.39) < np.log(0.6)
    ids, lengths, scores, taken = _run_script(scripts, width=3, alpha=0.0, max_length=6)
    np.testing.assert_array_equal(taken, [1, 1])
    np.testing.assert_array_equal(ids, [[END, 0, 0, 0, 0, 0]] * 2)
    np.testing.assert_array_equal(lengths, [1, 1])
    np.testing.assert_allclose(scores, [np.log(0.35), np.log(0.6)], rtol=1e-5)


def _compiled(fn):
    """`fn` as one graph (`tf.function` / `jax.jit`), as a model's `predict` runs it."""

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.function(fn)
    if keras.backend.backend() == "jax":
        import jax

        return jax.jit(fn)
    return fn


def _recording_step(logits_by_entry, max_length):
    """`_scripted_step`, whose state also holds `fed` `(rows, max_length)`: the ids each row was fed."""
    scripted = _scripted_step(logits_by_entry)

    def step(ids, state):
        entry, taken, fed = state
        at_step = ops.cast(ops.equal(ops.arange(max_length), ops.expand_dims(taken, 1)), "int32")
        logits, (entry, taken) = scripted(ids, (entry, taken))
        return logits, (entry, taken, fed + ops.expand_dims(ids, 1) * at_step)

    return step


@pytest.mark.parametrize("compile", [False, True], ids=["eager", "graph"])
def test_beam_search_runs_as_one_graph_and_returns_the_best_hypothesis_state(compile):
    # EARLY_STOP with alpha 1 and pad_id P, as above; the state has a rank-2 part.
    alpha, max_length, width = 1.0, 6, 3
    logits = np.stack([_script_logits(script) for script in EARLY_STOP])
    step = _recording_step(logits, max_length)

    def decode(start):
        state = (np.arange(2, dtype=np.int32), np.zeros(2, np.int32), np.zeros((2, max_length), np.int32))
        return beam_search(step, tile_beams(state, width), start, END, max_length, width, alpha, pad_id=P)

    run = _compiled(decode) if compile else decode
    ids, lengths, scores, (entry, taken, fed) = run(np.full(2, START, np.int32))
    assert ops.convert_to_numpy(ids).dtype == np.int32
    assert ops.convert_to_numpy(lengths).dtype == np.int32
    assert ops.convert_to_numpy(scores).dtype == np.float32
    np.testing.assert_array_equal(np.array(ids), [[X, END, P, P, P, P], [END, P, P, P, P, P]])
    np.testing.assert_array_equal(np.array(lengths), [2, 1])
    expected = [np.log(0.6 * 0.9) / _penalty(1, alpha), np.log(0.7) / _penalty(0, alpha)]
    np.testing.assert_allclose(np.array(scores), expected, rtol=1e-5)
    np.testing.assert_array_equal(np.array(entry), [0, 1])
    np.testing.assert_array_equal(np.array(taken), [2, 2])
    # What the best hypothesis was fed: the start id, then its own tokens (an ended one: its END).
    np.testing.assert_array_equal(np.array(fed), [[START, X, 0, 0, 0, 0], [START, END, 0, 0, 0, 0]])


def _traced_with_unknown(shape_of_table, shape_of_start, width, alpha, max_length):
    """A `tf.function` of a unigram search whose table / batch size are unknown when traced."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec(shape_of_table, tf.float32), tf.TensorSpec(shape_of_start, tf.int32)])
    def run(table, start):
        state = tile_beams(ops.zeros_like(start), width)
        return beam_search(_unigram_step(table), state, start, END, max_length, width, alpha)[:3]

    return run


@pytest.mark.parametrize(
    "shape_of_table, shape_of_start, width",
    [
        ([None, None], [1], 2),
        ([None, None], [1], 5),
        ([None, None], [1], 9),
        ([VOCAB, VOCAB], [None], 5),
        ([VOCAB, VOCAB], [None], 9),
    ],
    ids=["unknown-vocab-2", "unknown-vocab-5", "unknown-vocab-wider", "unknown-batch-5", "unknown-batch-wider-than-vocab"],
)
def test_shapes_unknown_when_traced_give_the_plain_beam_search_result(shape_of_table, shape_of_start, width):

    if keras.backend.backend() != "tensorflow":
        pytest.skip("shapes unknown at trace time: TensorFlow graphs only")
    rng = np.random.default_rng(width + 100)
    for alpha in [0.0, 1.0]:
        table = np.log(rng.dirichlet(np.full(VOCAB, 0.5), size=VOCAB)).astype("float32")
        run = _traced_with_unknown(shape_of_table, shape_of_start, width, alpha, 6)
        ids, lengths, scores = (np.array(x) for x in run(table, np.full(1, START, np.int32)))
        expected_tokens, expected_score = _reference_beam(table, width, alpha, 6)
        assert list(ids[0, : lengths[0]]) == expected_tokens
        np.testing.assert_allclose(scores[0], expected_score, rtol=1e-5)


def test_a_beam_wider_than_an_unknown_vocabulary():

    if keras.backend.backend() != "tensorflow":
        pytest.skip("shapes unknown at trace time: TensorFlow graphs only")
    table = _table({START: {X: 0.9}, X: {END: 0.9}})
    run = _traced_with_unknown([None, None], [1], VOCAB + 2, 0.0, 4)
    ids, _, _ = (np.array(x) for x in run(table, np.full(1, START, np.int32)))
    np.testing.assert_array_equal(ids[0, :2], [X, END])


def test_search_is_in_float32_whatever_the_global_floatx(float16_floatx):
    # greedy_search computes in float32 under any floatx (tests/decoding/test_greedy.py); beam search fails.
    ids, _, scores, _ = _run_beam(_unigram_step(TRAP), batch=1, width=3, alpha=1.0)
    np.testing.assert_array_equal(ids, [[Y, END, 0, 0, 0, 0]])
    assert scores.dtype == np.float32
    np.testing.assert_allclose(scores, (TRAP[START, Y] + TRAP[Y, END]) / _penalty(1, 1.0), rtol=1e-6)


def test_with_beam_width_one_an_ended_entry_keeps_its_score_while_another_runs_on():
    # EARLY_STOP with one hypothesis per entry: entry 1 ends at step 1, entry 0 at step 2.
    ids, lengths, scores, taken = _run_script(EARLY_STOP, width=1, alpha=0.0, max_length=6)
    np.testing.assert_array_equal(ids, [[X, END, 0, 0, 0, 0], [END, 0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(lengths, [2, 1])
    np.testing.assert_allclose(scores, [np.log(0.6) + np.log(0.9), np.log(0.7)], rtol=1e-5)
    np.testing.assert_array_equal(taken, [2, 2])


def test_length_penalty_is_float32_whatever_the_global_floatx(float16_floatx):
    # (5 + 2) / 6 = 7 / 6 is 1.1670 in float16, 1.1666666 in float32.
    penalty = ops.convert_to_numpy(length_penalty(np.array([1, 2], np.int32), 1.0))
    assert penalty.dtype == np.float32
    np.testing.assert_allclose(penalty, [1.0, 7.0 / 6.0], rtol=1e-6)


def test_the_early_stop_weighs_the_leader_by_its_own_length_penalty():
    # alpha 2. After step 3 "X Y end" (.6 * .8 * .9, length 2) leads with log .432 / p(2) = -0.617;
    # the best live hypothesis, "X Y W" (.6 * .8 * .09), could reach at most log .0432 / p(6) = -0.935
    # by max_length, so the search stops. Weighing the leader by p(2) the wrong way (-1.142) would
    # run a fourth step.
    alpha = 2.0
    leader, live = np.log(0.6 * 0.8 * 0.9), np.log(0.6 * 0.8 * 0.09)
    assert live / _penalty(6, alpha) < leader / _penalty(2, alpha)
    assert live / _penalty(6, alpha) > leader * _penalty(2, alpha)
    script = [
        {START: {X: 0.6, Y: 0.1, Z: 0.1, W: 0.1, END: 0.1}},
        {X: {Y: 0.8, Z: 0.1}},
        {Y: {END: 0.9, W: 0.09}},
    ] + [{}] * 3
    ids, lengths, scores, taken = _run_script([script], width=3, alpha=alpha, max_length=6)
    np.testing.assert_array_equal(ids, [[X, Y, END, 0, 0, 0]])
    np.testing.assert_allclose(scores, [leader / _penalty(2, alpha)], rtol=1e-5)
    np.testing.assert_array_equal(taken, [3])


@pytest.mark.parametrize("width, n_best, max_length, alpha", [(1, 1, 6, 0.0), (3, 2, 6, 0.6), (5, 5, 4, 1.0), (9, 3, 6, 0.0)])
def test_settings_given_as_tensors_search_as_the_same_numbers_do(width, n_best, max_length, alpha):
    # An export's `with_settings` signature traces one graph for every setting.
    if keras.backend.backend() != "tensorflow":
        pytest.skip("settings as tensors: TensorFlow graphs only")
    import tensorflow as tf

    rng = np.random.default_rng(width)
    table = np.log(rng.dirichlet(np.full(VOCAB, 0.5), size=VOCAB)).astype("float32")

    def step(ids, state):
        return tf.gather(table, ids), state

    def search(width, n_best, max_length, alpha):
        state = tf.repeat(tf.zeros([2]), width, axis=0)
        return beam_search(step, state, tf.fill([2], START), END, max_length, width, alpha=alpha, n_best=n_best)[:3]

    traced = tf.function(search, input_signature=[tf.TensorSpec([], tf.int32)] * 3 + [tf.TensorSpec([], tf.float32)])
    got = traced(width, n_best, max_length, alpha)
    expected = search(width, n_best, max_length, alpha)
    assert got[0].shape == (2, n_best, max_length)
    for mine, theirs in zip(got, expected):
        np.testing.assert_allclose(np.array(mine), np.array(theirs), rtol=1e-5)


@pytest.mark.parametrize("n_best", [None, 2])
def test_a_beam_width_given_as_a_tensor_with_n_best_a_number_or_none(n_best):
    # Only `beam_width` is a tensor (`n_best` fixed by the caller): it is not checked in Python,
    # where a traced tensor has no truth value, and the search is the one with the same number.
    if keras.backend.backend() != "tensorflow":
        pytest.skip("settings as tensors: TensorFlow graphs only")
    import tensorflow as tf

    width, max_length, alpha = 3, 6, 0.6
    rng = np.random.default_rng(11)
    table = np.log(rng.dirichlet(np.full(VOCAB, 0.5), size=VOCAB)).astype("float32")

    def search(width):
        state = tf.repeat(tf.zeros([2]), width, axis=0)
        return beam_search(_unigram_step(table), state, tf.fill([2], START), END, max_length, width, alpha, n_best=n_best)[:3]

    traced = tf.function(search, input_signature=[tf.TensorSpec([], tf.int32)])
    ids, lengths, scores = (np.array(x) for x in traced(width))
    expected_tokens, expected_score = _reference_beam(table, width, alpha, max_length)
    best = (ids, lengths, scores) if n_best is None else (ids[:, 0], lengths[:, 0], scores[:, 0])
    assert ids.shape == ((2, max_length) if n_best is None else (2, n_best, max_length))
    for b in range(2):
        assert list(best[0][b, : best[1][b]]) == expected_tokens
        np.testing.assert_allclose(best[2][b], expected_score, rtol=1e-5)
    for mine, theirs in zip((ids, lengths, scores), search(width)):
        np.testing.assert_allclose(mine, np.array(theirs), rtol=1e-5)


# --- Preferences: GNMT's coverage penalty and blocking of repeated n-grams, against brute force.


def _repeats_an_ngram(tokens, size):
    grams = [tuple(tokens[i : i + size]) for i in range(len(tokens) - size + 1)]
    return len(grams) != len(set(grams))


def _coverage(accumulated, beta):
    """GNMT's cp written out: positions never attended (padding) count as covered."""
    covered = np.where(accumulated == 0.0, 1.0, np.minimum(accumulated, 1.0))
    return beta * np.log(covered).sum()


def _attending_step(logits_by_entry, attention_by_entry, vocab):
    """`_prefix_step` whose state also sums the attention weights its prefixes give."""
    prefix_step = _prefix_step(logits_by_entry, vocab)
    codes, source_length = attention_by_entry.shape[1:]
    flat = attention_by_entry.reshape(-1, source_length)

    def step(ids, state):
        entry, code, accumulated = state
        logits, (entry, code) = prefix_step(ids, (entry, code))
        return logits, (entry, code, accumulated + ops.take(flat, entry * codes + code, axis=0))

    return step


def _exhaustive_preferring(logits, attention, vocab, start, end_id, max_length, alpha, beta, ngram_size):
    """`_exhaustive` with coverage (on ended sequences) and without sequences repeating an n-gram."""
    log_probs = logits.astype(np.float64)
    log_probs = log_probs - np.log(np.exp(log_probs).sum(-1, keepdims=True))
    scored = []
    for length in range(1, max_length + 1):
        for tokens in itertools.product(range(vocab), repeat=length):
            if end_id in tokens[:-1] or (length < max_length and tokens[-1] != end_id):
                continue
            if ngram_size and _repeats_an_ngram(tokens, ngram_size):
                continue
            code, total, accumulated = 0, 0.0, np.zeros(attention.shape[-1])
            for fed, token in zip((start,) + tokens[:-1], tokens):
                code = code * (vocab + 1) + fed + 1
                total += log_probs[code, token]
                accumulated += attention[code]
            score = total / _penalty(_scored_length(tokens, end_id), alpha)
            if tokens[-1] == end_id:
                score += _coverage(accumulated, beta)
            scored.append((score, tokens))
    scored.sort(reverse=True)
    return scored[:4]


@pytest.mark.parametrize(
    "vocab, max_length, beta, ngram_size",
    [(4, 3, 0.8, 0), (3, 4, 2.0, 0), (4, 4, 0.0, 1), (3, 5, 0.0, 2), (4, 4, 1.0, 2)],
)
def test_a_beam_that_keeps_every_candidate_prefers_as_the_exhaustive_search_does(vocab, max_length, beta, ngram_size):
    start, end_id, batch, n_best, source_length = 1, 2, 3, 3, 4
    width = vocab**max_length
    codes = (vocab + 1) ** max_length
    rng = np.random.default_rng(1000 * vocab + 10 * max_length + ngram_size)
    for alpha in (0.0, 1.0):
        logits = rng.normal(0.0, 1.5, size=(batch, codes, vocab)) + rng.normal(0.0, 3.0, size=(batch, codes, 1))
        logits[..., end_id] += rng.uniform(0.0, 2.0, size=(batch, codes))
        logits = logits.astype("float32")
        attention = rng.dirichlet(np.full(source_length, 0.3), size=(batch, codes))
        attention[0, :, -1] = 0.0  # entry 0's last source position is padding: never attended
        attention[0] /= attention[0].sum(-1, keepdims=True)
        attention = attention.astype("float32")
        state = tile_beams(
            (np.arange(batch, dtype=np.int32), np.zeros(batch, np.int32), np.zeros((batch, source_length), np.float32)),
            width,
        )
        ids, lengths, scores, _ = beam_search(
            _attending_step(logits, attention, vocab), state, np.full(batch, start), end_id, max_length, width, alpha,
            n_best=n_best, coverage_penalty_weight=beta, coverage_fn=lambda state: state[2],
            no_repeat_ngram_size=ngram_size,
        )
        ids, lengths, scores = (np.array(x) for x in (ids, lengths, scores))
        for b in range(batch):
            expected = _exhaustive_preferring(
                logits[b], attention[b], vocab, start, end_id, max_length, alpha, beta, ngram_size
            )
            gaps = [first - second for (first, _), (second, _) in zip(expected, expected[1:])]
            assert min(gaps) > 1e-4 * abs(expected[0][0]), "a near tie: pick another seed"
            for k, (score, tokens) in enumerate(expected[:n_best]):
                assert list(ids[b, k, : lengths[b, k]]) == list(tokens), (alpha, b, k)
                np.testing.assert_allclose(scores[b, k], score, rtol=1e-5)
            assert list(scores[b]) == sorted(scores[b], reverse=True)


def test_a_coverage_penalty_turns_the_search_to_the_output_that_attends_everywhere():
    # "X end" (p .6) looks at source position 0 on both steps: coverage (1.98, 0.02), cp = log 0.02.
    # "Y end" (p .4) looks at position 0, then 1: coverage (1.0, 1.0), cp = 0. With beta 1 it wins.
    logits = np.full((1, 3, VOCAB, VOCAB), -1e9, np.float32)
    logits[0, 0, START, [X, Y]] = np.log([0.6, 0.4])
    logits[0, 1, X, END] = logits[0, 1, Y, END] = 0.0
    weights = {START: [0.99, 0.01], X: [0.99, 0.01], Y: [0.01, 0.99]}
    table = np.zeros((VOCAB, 2), np.float32)
    for token, row in weights.items():
        table[token] = row
    scripted = _scripted_step(logits)

    def step(ids, state):
        entry, taken, accumulated = state
        out, (entry, taken) = scripted(ids, (entry, taken))
        return out, (entry, taken, accumulated + ops.take(table, ids, axis=0))

    def run(beta):
        state = tile_beams((np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros((1, 2), np.float32)), 2)
        ids, _, scores, _ = beam_search(
            step, state, np.full(1, START), END, 3, 2, coverage_penalty_weight=beta, coverage_fn=lambda s: s[2]
        )
        return list(np.array(ids)[0, :2]), float(np.array(scores)[0])

    assert run(0.0) == ([X, END], pytest.approx(np.log(0.6), rel=1e-5))
    ids, score = run(1.0)
    assert ids == [Y, END]
    # Y end: position 0 gets .99 + .01, position 1 .01 + .99: both covered, cp = 0.
    assert score == pytest.approx(np.log(0.4), rel=1e-5)


def test_blocking_repeated_bigrams_stops_a_loop_the_model_prefers():
    # The model loops "X Y X Y ..." (.9 a step) and rarely ends (.1): cut at max_length, the loop
    # outscores every ended output. With bigrams blocked, "X Y X" cannot go on with Y, and every
    # continuation that is left costs at least one more .1: the best is the shortest ending, "X end".
    table = _table({START: {X: 0.97, END: 0.03}, X: {Y: 0.9, END: 0.1}, Y: {X: 0.9, END: 0.1}})
    state = tile_beams(np.zeros(1, np.int32), 2)
    free = beam_search(_unigram_step(table), state, np.full(1, START), END, 6, 2)
    blocked = beam_search(_unigram_step(table), state, np.full(1, START), END, 6, 2, no_repeat_ngram_size=2)
    assert list(np.array(free[0])[0]) == [X, Y, X, Y, X, Y]
    ids, length = np.array(blocked[0])[0], int(np.array(blocked[1])[0])
    assert list(ids[:length]) == [X, END]
    np.testing.assert_allclose(np.array(blocked[2])[0], table[START, X] + table[X, END], rtol=1e-5)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_repeated_ngram_bans_match_brute_force(size):
    from seqtasks.decoding.beam import repeated_ngram_bans

    rng = np.random.default_rng(size)
    ids = rng.integers(0, 3, size=(6, 8)).astype("int32")
    for step in range(0, 9):
        got = np.array(repeated_ngram_bans(ids, step, size, 5))
        for row in range(6):
            produced = list(ids[row, :step])
            expected = [token for token in range(5) if _repeats_an_ngram(produced + [token], size)
                        and not _repeats_an_ngram(produced, size)]
            # Rows that already repeat an n-gram never occur in a search; compare the bans on the others.
            if not _repeats_an_ngram(produced, size):
                assert list(np.flatnonzero(got[row])) == expected, (step, row)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"coverage_penalty_weight": -0.5, "coverage_fn": lambda s: s}, "Expected coverage_penalty_weight >= 0. Received: coverage_penalty_weight=-0.5"),
        (
            {"coverage_penalty_weight": 0.2},
            "A coverage penalty needs `coverage_fn(state)`, the attention weights summed over the decoded steps. "
            "Received: coverage_penalty_weight=0.2, coverage_fn=None",
        ),
        ({"no_repeat_ngram_size": -1}, "Expected no_repeat_ngram_size to be an int >= 0 (0: no blocking). Received: no_repeat_ngram_size=-1"),
        ({"no_repeat_ngram_size": 2.0}, "Expected no_repeat_ngram_size to be an int >= 0 (0: no blocking). Received: no_repeat_ngram_size=2.0"),
        ({"no_repeat_ngram_size": True}, "Expected no_repeat_ngram_size to be an int >= 0 (0: no blocking). Received: no_repeat_ngram_size=True"),
    ],
)
def test_preferences_outside_their_range_are_errors(kwargs, message):
    state = tile_beams(np.zeros(1, np.int32), 2)
    with pytest.raises(ValueError) as error:
        beam_search(_unigram_step(TRAP), state, np.full(1, START), END, 4, 2, **kwargs)
    assert str(error.value) == message


def test_the_coverage_penalty_sums_over_the_source_axis_in_float32(float16_floatx):
    from seqtasks.decoding import coverage_penalty

    # (batch 2, beam 3, source 4) in float16, one padding position (0.0) per row; floatx is float16 too.
    rng = np.random.default_rng(0)
    accumulated = rng.uniform(0.05, 1.6, size=(2, 3, 4)).astype("float16")
    accumulated[..., -1] = 0.0
    got = coverage_penalty(accumulated, np.float16(0.75))
    expected = 0.75 * np.log(np.minimum(accumulated[..., :-1].astype(np.float64), 1.0)).sum(-1)
    assert ops.convert_to_numpy(got).dtype == np.float32 and got.shape == (2, 3)
    np.testing.assert_allclose(np.array(got), expected, rtol=1e-5)  # float32 logs of the float16 values


def test_a_coverage_weight_given_as_a_tensor_searches_as_the_same_number_does():
    if keras.backend.backend() != "tensorflow":
        pytest.skip("settings as tensors: TensorFlow graphs only")
    import tensorflow as tf

    vocab, max_length, batch, width = 4, 3, 2, 64
    rng = np.random.default_rng(5)
    logits = rng.normal(0.0, 1.5, size=(batch, (vocab + 1) ** max_length, vocab)).astype("float32")
    attention = rng.dirichlet(np.full(3, 0.3), size=(batch, (vocab + 1) ** max_length)).astype("float32")

    def search(beta):
        state = tile_beams(
            (tf.range(batch), tf.zeros([batch], tf.int32), tf.zeros([batch, 3])), width
        )
        return beam_search(
            _attending_step(logits, attention, vocab), state, tf.fill([batch], 1), 2, max_length, width,
            n_best=2, coverage_penalty_weight=beta, coverage_fn=lambda s: s[2], no_repeat_ngram_size=1,
        )[:3]

    traced = tf.function(search, input_signature=[tf.TensorSpec([], tf.float32)])
    for beta in (0.0, 1.5):
        for mine, theirs in zip(traced(beta), search(beta)):
            np.testing.assert_allclose(np.array(mine), np.array(theirs), rtol=1e-5)


def test_the_coverage_penalty_of_float32_attention_stays_float32_under_a_float16_floatx(float16_floatx):
    from seqtasks.decoding import coverage_penalty

    # Attention summed in float32 (as a mixed-precision model keeps it) with a float16 floatx: a
    # position attended 1e-8 is unattended, not padding (1e-8 is 0 in float16), and 0.3 and the
    # weight 0.1 keep their float32 values (float16 has 0.2998 and 0.09998).
    accumulated = np.array([[1e-8, 0.3, 0.0, 2.0], [0.7, 0.0, 0.45, 1.0]], np.float32)
    got = coverage_penalty(accumulated, 0.1)
    expected = [0.1 * (np.log(1e-8) + np.log(0.3)), 0.1 * (np.log(0.7) + np.log(0.45))]
    assert ops.convert_to_numpy(got).dtype == np.float32 and got.shape == (2,)
    np.testing.assert_allclose(np.array(got), expected, rtol=1e-6)


def _expected_bans(ids, step, size, vocab):
    """Per row, the tokens `_repeats_an_ngram` bans after `ids[row, :step]`; None where that already repeats one."""
    expected = []
    for row in ids:
        produced = list(row[:step])
        if size == 0:
            expected.append([])
        elif _repeats_an_ngram(produced, size):
            expected.append(None)  # never occurs in a search
        else:
            expected.append([token for token in range(vocab) if _repeats_an_ngram(produced + [token], size)])
    return expected


def _assert_bans(got, expected, context):
    for row, tokens in enumerate(expected):
        if tokens is not None:
            assert list(np.flatnonzero(np.array(got)[row])) == tokens, (context, row)


def _near_repeats(block_length=14, seed=3):
    """Rows `block + copy`: the copy exact, or with one token changed (at every position in turn), and random rows.

    Long n-grams recur in them, and prefixes that match all but one of their tokens.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for changed in [None, *range(block_length)]:
        block = rng.integers(0, 3, size=block_length)
        copy = block.copy()
        if changed is not None:
            copy[changed] = (copy[changed] + 1 + rng.integers(0, 2)) % 3
        rows.append(np.concatenate([block, copy]))
    rows += list(rng.integers(0, 2, size=(4, 2 * block_length)))
    return np.array(rows, np.int32)


def test_repeated_ngram_bans_of_ngrams_longer_than_the_tensor_limit_match_brute_force():
    # A Python int size has no limit (only a tensor one has NGRAM_LIMIT).
    from seqtasks.decoding.beam import NGRAM_LIMIT, repeated_ngram_bans

    ids = _near_repeats()
    for size in (NGRAM_LIMIT - 1, NGRAM_LIMIT + 1, NGRAM_LIMIT + 3):
        banned_somewhere = False
        for step in range(ids.shape[1] + 1):
            expected = _expected_bans(ids, step, size, 5)
            _assert_bans(repeated_ngram_bans(ids, step, size, 5), expected, (size, step))
            banned_somewhere |= any(tokens for tokens in expected if tokens)
        assert banned_somewhere, size


def test_repeated_ngram_bans_with_a_size_given_as_a_tensor_match_brute_force():
    # One graph serves every size 0 .. NGRAM_LIMIT (an export's `with_settings` signature), for ids
    # whose shape is unknown when traced.
    if keras.backend.backend() != "tensorflow":
        pytest.skip("settings as tensors: TensorFlow graphs only")
    import tensorflow as tf

    from seqtasks.decoding.beam import NGRAM_LIMIT, repeated_ngram_bans

    traced = tf.function(
        lambda ids, step, size: repeated_ngram_bans(ids, step, size, 5),
        input_signature=[tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.int32)],
    )
    ids = _near_repeats()
    for size in range(NGRAM_LIMIT + 1):
        banned_somewhere = False
        for step in range(ids.shape[1] + 1):
            expected = _expected_bans(ids, step, size, 5)
            _assert_bans(traced(ids, step, size), expected, (size, step))
            banned_somewhere |= any(tokens for tokens in expected if tokens)
        assert banned_somewhere or size == 0, size


def test_repeated_ngram_bans_take_the_step_as_any_integer():
    # A NumPy int64 (what `np.arange` yields) or an int64 tensor gives the bans of the same int.
    from seqtasks.decoding.beam import repeated_ngram_bans

    ids = _near_repeats()
    for step in (15, 16, 20, ids.shape[1]):
        expected = _expected_bans(ids, step, 3, 5)
        _assert_bans(repeated_ngram_bans(ids, np.int64(step), 3, 5), expected, step)
        _assert_bans(repeated_ngram_bans(ids, ops.convert_to_tensor(step, "int64"), 3, 5), expected, step)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_repeated_ngram_bans_with_a_vocabulary_of_one_token(size):
    # Every row is "0 0 0 ...": the only token is banned once n - 1 of it have been produced.
    from seqtasks.decoding.beam import repeated_ngram_bans

    ids = np.zeros((2, 5), np.int32)
    for step in range(size + 1):
        got = np.array(repeated_ngram_bans(ids, step, size, 1))
        np.testing.assert_array_equal(got, np.full((2, 1), step == size), err_msg=str(step))


@pytest.mark.parametrize("size", [1, 2, 3])
def test_blocking_when_a_single_token_is_produced_bans_nothing(size):
    # max_length 1: nothing produced before the only token, so nothing can repeat; the search picks
    # what it picks unblocked (TRAP: X, .55).
    state = tile_beams(np.zeros(1, np.int32), 2)
    ids, lengths, scores, _ = beam_search(
        _unigram_step(TRAP), state, np.full(1, START), END, 1, 2, no_repeat_ngram_size=size
    )
    np.testing.assert_array_equal(np.array(ids), [[X]])
    np.testing.assert_array_equal(np.array(lengths), [1])
    np.testing.assert_allclose(np.array(scores), [TRAP[START, X]], rtol=1e-6)


def test_the_early_stop_weighs_an_ended_leader_with_its_coverage_penalty():
    # "end" (p .5) ends at step 1 having attended (.6, .4) of the source: with beta .3 it scores
    # log .5 / penalty(0) + .3 (log .6 + log .4) = -1.26, and leads "X" (log .2 = -1.61) after that
    # step. By its log-probability alone (-0.83) no live hypothesis could reach it, but with its
    # coverage penalty "X X X X X" (p .2 then .99 four times, cut at max_length 5, never ended, so
    # never penalised for coverage) passes it: the search must run on rather than stop after step 1.
    alpha, beta, max_length = 1.0, 0.3, 5
    ended = np.log(0.5) / _penalty(0, alpha) + beta * (np.log(0.6) + np.log(0.4))
    live = (np.log(0.2) + 4 * np.log(0.99)) / _penalty(max_length, alpha)
    assert ended > np.log(0.2) / _penalty(1, alpha)  # "end" leads after step 1 ...
    assert np.log(0.5) / _penalty(0, alpha) > np.log(0.2) / _penalty(max_length, alpha)  # ... out of reach unpenalised
    assert live > ended  # ... yet "X X X X X" passes it
    logits = _script_logits([{START: {END: 0.5, X: 0.2}}] + [{X: {X: 0.99}}] * 4)[None]
    attention = np.zeros((VOCAB, 2), np.float32)
    attention[START], attention[X] = [0.6, 0.4], [0.5, 0.5]
    scripted = _scripted_step(logits)

    def step(ids, state):
        entry, taken, accumulated = state
        out, (entry, taken) = scripted(ids, (entry, taken))
        return out, (entry, taken, accumulated + ops.take(attention, ids, axis=0))

    state = tile_beams((np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros((1, 2), np.float32)), 2)
    ids, lengths, scores, (_, taken, _) = beam_search(
        step, state, np.full(1, START), END, max_length, 2, alpha,
        coverage_penalty_weight=beta, coverage_fn=lambda s: s[2],
    )
    np.testing.assert_array_equal(np.array(ids), [[X] * 5])
    np.testing.assert_array_equal(np.array(lengths), [5])
    np.testing.assert_allclose(np.array(scores), [live], rtol=1e-5)
    np.testing.assert_array_equal(np.array(taken), [5])


def test_blocking_normalises_each_row_by_its_own_logits():
    # Entry 1's logits are entry 0's minus 200: the same distribution, so the same search. (Normalised
    # by the largest logit of the whole batch, every exp(logit - max) of entry 1 would underflow to 0.)
    def step(ids, offset):
        return ops.take(TRAP, ids, axis=0) + ops.expand_dims(offset, -1), offset

    state = tile_beams(np.array([0.0, -200.0], np.float32), 3)
    ids, lengths, scores, _ = beam_search(step, state, np.full(2, START), END, 6, 3, no_repeat_ngram_size=2)
    np.testing.assert_array_equal(np.array(ids), [[Y, END, 0, 0, 0, 0]] * 2)
    np.testing.assert_array_equal(np.array(lengths), [2, 2])
    # float32 logits near -200 are spaced 1.5e-5 apart: the scores agree to about that.
    np.testing.assert_allclose(np.array(scores), [TRAP[START, Y] + TRAP[Y, END]] * 2, rtol=1e-4)
