import keras
import numpy as np
import pytest
from keras import ops

from seqtasks.decoding import greedy_search, sampling_search, tile_beams
from seqtasks.decoding.sampling import truncated_distribution, uniforms

pytestmark = pytest.mark.backends

START, END = 1, 0
PROBS = np.array([0.04, 0.01, 0.35, 0.25, 0.2, 0.1, 0.05])  # END, START, then five words
VOCAB = len(PROBS)


def _reference(probs, temperature=1.0, top_k=0, top_p=1.0):
    """The truncated, renormalised distribution written out: temperature, top-k, then top-p."""
    scaled = np.exp(np.log(probs) / temperature)
    scaled /= scaled.sum()
    order = np.argsort(-scaled, kind="stable")
    keep = np.zeros(len(probs), bool)
    keep[order[: top_k or len(probs)]] = True
    within_k = np.where(keep, scaled, 0.0) / scaled[keep].sum()
    mass = 0.0
    nucleus = np.zeros(len(probs), bool)
    for token in order:
        if not keep[token]:
            break
        nucleus[token] = True
        mass += within_k[token]
        if mass >= top_p:
            break
    out = np.where(nucleus, within_k, 0.0)
    return out / out.sum()


def _fixed_step(log_probs):
    """A model that says the same distribution at every step, whatever it was fed."""
    table = ops.convert_to_tensor(np.asarray(log_probs, np.float32) + 3.0)  # not normalised

    def step(ids, state):
        return ops.tile(ops.expand_dims(table, 0), (ops.shape(ids)[0], 1)), state

    return step


def _first_tokens(samples, seed, **settings):
    ids, _, _, _ = sampling_search(
        _fixed_step(np.log(PROBS)), (), np.full(1, START), END, 1, num_samples=samples, seed=seed, **settings
    )
    return np.array(ids)[0, :, 0]


@pytest.mark.parametrize(
    "settings",
    [{}, {"temperature": 0.7}, {"temperature": 1.5}, {"top_k": 3}, {"top_p": 0.75}, {"top_k": 4, "top_p": 0.7, "temperature": 1.3}],
)
def test_ten_thousand_samples_follow_the_truncated_renormalised_distribution(settings):
    samples = 10_000
    tokens = _first_tokens(samples, seed=2026, **settings)
    frequencies = np.bincount(tokens, minlength=VOCAB) / samples
    expected = _reference(PROBS, **settings)
    # Five standard deviations of a frequency out of 10,000 draws: a false alarm about once in 10^6 tokens.
    tolerance = 5 * np.sqrt(expected * (1 - expected) / samples) + 1e-9
    assert np.all(np.abs(frequencies - expected) <= tolerance), (frequencies, expected)
    assert np.all(frequencies[expected == 0] == 0)


def test_truncated_distribution_is_the_reference_one():
    logits = np.log(PROBS)[None].astype("float32")
    for settings in [{"top_k": 2}, {"top_p": 0.5}, {"top_p": 0.62}, {"top_k": 1}, {"top_p": 1e-6}, {"temperature": 0.5}]:
        probabilities, order = (np.array(x) for x in truncated_distribution(logits, **settings))
        by_token = np.zeros(VOCAB)
        by_token[order[0]] = probabilities[0]
        np.testing.assert_allclose(by_token, _reference(PROBS, **settings), atol=1e-6, err_msg=str(settings))
        assert list(order[0]) == list(np.argsort(-PROBS, kind="stable"))


def test_steps_are_drawn_independently():
    # Pairs of the first two tokens of 10,000 sequences: their frequencies are products of the marginals.
    probs = np.array([0.001, 0.001, 0.5, 0.3, 0.198])
    ids, _, _, _ = sampling_search(
        _fixed_step(np.log(probs)), (), np.full(1, START), END, 2, num_samples=10_000, seed=7
    )
    pairs = np.array(ids)[0]
    words = probs[2:] / probs[2:].sum()
    for a in range(2, 5):
        for b in range(2, 5):
            expected = probs[a] * probs[b]
            observed = np.mean((pairs[:, 0] == a) & (pairs[:, 1] == b))
            assert abs(observed - expected) <= 5 * np.sqrt(expected * (1 - expected) / 10_000), (a, b, words)


def _bigram_model(seed):
    rng = np.random.default_rng(seed)
    table = np.log(rng.dirichlet(np.full(VOCAB, 0.7), size=VOCAB)).astype("float32")

    def step(ids, state):
        return ops.take(table, ids, axis=0), state

    return table, step


def test_same_seed_same_samples_whatever_the_batch():
    table, step = _bigram_model(0)
    settings = dict(end_id=END, max_length=8, num_samples=5, top_p=0.9)
    alone = sampling_search(step, (), np.full(1, START), seed=11, **settings)
    again = sampling_search(step, (), np.full(1, START), seed=11, **settings)
    batched = sampling_search(step, (), np.array([3, START, 4], np.int32), seed=11, **settings)
    other_seed = sampling_search(step, (), np.full(1, START), seed=12, **settings)
    for mine, theirs in zip(alone[:3], again[:3]):
        np.testing.assert_array_equal(np.array(mine), np.array(theirs))
    for mine, theirs in zip(alone[:3], batched[:3]):
        np.testing.assert_array_equal(np.array(mine)[0], np.array(theirs)[1])
    assert not np.array_equal(np.array(alone[0]), np.array(other_seed[0]))
    # The five samples of one input differ from one another.
    assert len({tuple(row) for row in np.array(alone[0])[0]}) > 1


def test_scores_lengths_and_padding_of_the_samples_are_the_models():
    table, step = _bigram_model(1)
    pad = 6
    ids, lengths, scores, _ = sampling_search(
        step, (), np.full(2, START), END, 6, num_samples=50, temperature=1.4, top_k=5, seed=3, pad_id=pad
    )
    ids, lengths, scores = np.array(ids), np.array(lengths), np.array(scores)
    assert ids.shape == (2, 50, 6) and lengths.shape == scores.shape == (2, 50)
    log_probs = table - np.log(np.exp(table).sum(-1, keepdims=True))
    for b in range(2):
        for k in range(50):
            tokens = list(ids[b, k, : lengths[b, k]])
            assert END not in tokens[:-1] and (tokens[-1] == END or len(tokens) == 6)
            assert all(token == pad for token in ids[b, k, lengths[b, k] :])
            fed = [START] + tokens[:-1]
            # The model's own log-probability, not that of the sharpened, truncated distribution.
            expected = sum(log_probs[a, t] for a, t in zip(fed, tokens))
            np.testing.assert_allclose(scores[b, k], expected, rtol=1e-5)


def test_top_k_one_is_greedy_search():
    table, step = _bigram_model(2)
    start = np.array([START, 3, 4], np.int32)
    greedy = greedy_search(step, (), start, END, 7)
    sampled = sampling_search(step, (), start, END, 7, top_k=1, temperature=3.0, seed=99)
    for mine, theirs in zip(sampled[:3], greedy[:3]):
        np.testing.assert_allclose(np.array(mine), np.array(theirs), rtol=1e-6)


def test_the_state_of_every_sample_comes_back():
    table, bigram = _bigram_model(3)

    def step(ids, state):
        logits, _ = bigram(ids, state)
        return logits, state + 1

    state = tile_beams(np.zeros(2, np.int32), 3)
    ids, lengths, _, steps = sampling_search(step, state, np.full(2, START), END, 5, num_samples=3, seed=1)
    assert np.array(steps).shape == (6,)
    # Every row is stepped until the longest sample of the batch has ended.
    assert set(np.array(steps)) == {int(np.array(lengths).max())}


def test_uniforms_are_spread_evenly_and_differ_by_seed_sample_and_step():
    u = np.array(uniforms(5, ops.arange(200_000), 3))
    assert u.min() >= 0.0 and u.max() < 1.0
    counts = np.histogram(u, bins=20, range=(0, 1))[0]
    assert np.all(np.abs(counts - 10_000) < 5 * np.sqrt(10_000))
    first = np.array(uniforms(5, ops.arange(1000), 3))
    assert not np.array_equal(first, np.array(uniforms(6, ops.arange(1000), 3)))
    assert not np.array_equal(first, np.array(uniforms(5, ops.arange(1000), 4)))
    assert abs(np.corrcoef(first[:-1], first[1:])[0, 1]) < 0.15
    # Counter-based: the same numbers on every backend (these are TensorFlow's and JAX's).
    np.testing.assert_array_equal(
        np.round(np.array(uniforms(0, ops.arange(3), 0)) * (1 << 24)).astype(np.int64),
        [int(x) >> 8 for x in _lowbias32_chain(0, range(3), 0)],
    )


def _lowbias32(x):
    x &= 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def _lowbias32_chain(seed, samples, step):
    return [_lowbias32(_lowbias32(_lowbias32(seed) ^ k) ^ step) for k in samples]


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"num_samples": 0}, "Expected num_samples >= 1. Received: num_samples=0"),
        ({"temperature": 0.0}, "Expected temperature > 0. Received: temperature=0.0"),
        ({"temperature": -1}, "Expected temperature > 0. Received: temperature=-1"),
        ({"top_k": -2}, "Expected top_k >= 0 (0 keeps every token). Received: top_k=-2"),
        ({"top_p": 0.0}, "Expected top_p in (0, 1]. Received: top_p=0.0"),
        ({"top_p": 1.5}, "Expected top_p in (0, 1]. Received: top_p=1.5"),
    ],
)
def test_settings_outside_their_range_are_errors(settings, message):
    _, step = _bigram_model(4)
    with pytest.raises(ValueError) as error:
        sampling_search(step, (), np.full(1, START), END, 4, **settings)
    assert str(error.value) == message


def test_settings_given_as_tensors_sample_as_the_same_numbers_do():
    if keras.backend.backend() != "tensorflow":
        pytest.skip("settings as tensors: TensorFlow graphs only")
    import tensorflow as tf

    _, step = _bigram_model(5)

    def sample(num_samples, temperature, top_k, top_p, seed):
        return sampling_search(
            step, (), tf.fill([2], START), END, 6, num_samples=num_samples, temperature=temperature,
            top_k=top_k, top_p=top_p, seed=seed,
        )[:3]

    spec = [tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.int32),
            tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.int32)]
    traced = tf.function(sample, input_signature=spec)
    for settings in [(4, 1.0, 0, 1.0, 1), (3, 0.6, 3, 0.9, -5)]:
        for mine, theirs in zip(traced(*settings), sample(*settings)):
            np.testing.assert_allclose(np.array(mine), np.array(theirs), rtol=1e-6)


def test_one_sample_per_input_has_a_sample_axis_of_one():
    table, step = _bigram_model(6)
    ids, lengths, scores, _ = sampling_search(step, (), np.full(2, START), END, 5, num_samples=1, seed=2)
    assert np.array(ids).shape == (2, 1, 5) and np.array(lengths).shape == np.array(scores).shape == (2, 1)
    alone = sampling_search(step, (), np.full(2, START), END, 5, seed=2)
    np.testing.assert_array_equal(np.array(ids)[:, 0], np.array(alone[0]))


def _reference_uniforms(seed, sample, step):
    """`uniforms` written out with NumPy (`seed` and `sample` may be arrays): the top 24 bits of the chained hashes."""
    x = _lowbias32(_lowbias32(_lowbias32(np.array(seed, np.uint64)) ^ np.asarray(sample, np.uint64)) ^ np.uint64(step))
    return (x >> np.uint64(8)) / float(1 << 24)


def _flat_step(vocab):
    """Equal logits: with a power-of-two vocabulary the cumulative probabilities t / vocab are exact in float32."""
    return _fixed_step(np.zeros(vocab))


@pytest.fixture(params=["float16", "float64"])
def other_floatx(request):
    previous = keras.config.floatx()
    keras.config.set_floatx(request.param)
    yield request.param
    keras.config.set_floatx(previous)


def test_sampling_is_in_float32_whatever_the_global_floatx(other_floatx):
    # Equal logits over a power-of-two vocabulary: token t (ties keep the ids' order) holds exactly
    # [t / V, (t + 1) / V) of the cumulative distribution, so sample k draws floor(u_k * V). 40,000
    # samples (more than int16 counts) of 8 tokens, then 64 samples of 4096 tokens (sorted positions
    # past float16's exact integers).
    for samples, vocab in [(40_000, 8), (64, 4096)]:
        ids, lengths, scores, _ = sampling_search(
            _flat_step(vocab), (), np.full(1, START), END, 1, num_samples=samples, seed=21
        )
        ids, lengths, scores = (ops.convert_to_numpy(x) for x in (ids, lengths, scores))
        assert (ids.dtype, lengths.dtype, scores.dtype) == (np.int32, np.int32, np.float32)
        expected = np.floor(_reference_uniforms(21, np.arange(samples), 0) * vocab)
        np.testing.assert_array_equal(ids[0, :, 0], expected)
        np.testing.assert_array_equal(lengths, 1)
        np.testing.assert_allclose(scores, -np.log(vocab), rtol=1e-6)
    settings = {"temperature": 0.7, "top_k": 4, "top_p": 0.7}
    probabilities, order = truncated_distribution(np.log(PROBS)[None].astype("float32"), **settings)
    probabilities, order = ops.convert_to_numpy(probabilities), ops.convert_to_numpy(order)
    assert (probabilities.dtype, order.dtype) == (np.float32, np.int32)
    by_token = np.zeros(VOCAB)
    by_token[order[0]] = probabilities[0]
    np.testing.assert_allclose(by_token, _reference(PROBS, **settings), atol=1e-6)
    u = ops.convert_to_numpy(uniforms(5, ops.convert_to_tensor(np.arange(1000), "int32"), 3))
    assert u.dtype == np.float32
    np.testing.assert_array_equal(u, _reference_uniforms(5, np.arange(1000), 3))


def test_each_row_is_truncated_on_its_own():
    # The second row's logits lie 200 below the first's: normalising over the whole batch would underflow it.
    logits = np.stack([np.log(PROBS), np.log(PROBS) - 200.0]).astype("float32")
    probabilities, order = (np.array(x) for x in truncated_distribution(logits, top_p=0.85))
    for row in range(2):
        by_token = np.zeros(VOCAB)
        by_token[order[row]] = probabilities[row]
        np.testing.assert_allclose(by_token, _reference(PROBS, top_p=0.85), atol=1e-6, err_msg=str(row))


def test_the_nucleus_stops_at_the_token_whose_mass_reaches_top_p_exactly():
    # Four equal tokens (exactly 0.25 each): two reach 0.5, three reach 0.75; no more is kept.
    for top_p, kept in [(0.5, 2), (0.75, 3), (0.74, 3), (1.0, 4)]:
        probabilities = np.array(truncated_distribution(np.zeros((1, 4), np.float32), top_p=top_p)[0])[0]
        np.testing.assert_allclose(probabilities, [1 / kept] * kept + [0.0] * (4 - kept), err_msg=str(top_p))
        np.testing.assert_allclose(probabilities[probabilities > 0].sum(), 1.0, rtol=1e-6)


def _forced_step(next_token):
    """A model that puts almost all the mass on `next_token[fed]` (every other token 20 nats lower)."""
    table = np.full((VOCAB, VOCAB), -20.0, np.float32)
    table[np.arange(VOCAB), next_token] = 0.0

    def step(ids, state):
        return ops.take(table, ids, axis=0), state

    return table, step


@pytest.mark.parametrize("pad_id", [None, 1, 6])
def test_positions_after_the_end_hold_pad_id_zero_by_default(pad_id):
    # START -> 3 -> END (length 2) and 4 -> 5 -> 3 -> END (length 3): the loop stops after three
    # steps, so positions 3 to 5 are never drawn.
    table, step = _forced_step([2, 3, 2, END, 5, 3, 2])
    settings = {} if pad_id is None else {"pad_id": pad_id}
    pad = 0 if pad_id is None else pad_id
    ids, lengths, scores, _ = sampling_search(step, (), np.array([START, 4]), END, 6, top_k=1, seed=5, **settings)
    np.testing.assert_array_equal(np.array(ids), [[3, END, pad, pad, pad, pad], [5, 3, END, pad, pad, pad]])
    np.testing.assert_array_equal(np.array(lengths), [2, 3])
    # Each forced token has log-probability -log(1 + 6 e^-20), -1.2e-8: the scores are 0 to float32's precision.
    np.testing.assert_allclose(np.array(scores), [0.0, 0.0], atol=1e-6)


def test_without_a_seed_the_samples_are_those_of_seed_zero():
    _, step = _bigram_model(7)
    settings = dict(end_id=END, max_length=8, num_samples=5)
    default = sampling_search(step, (), np.full(2, START), **settings)
    zero = sampling_search(step, (), np.full(2, START), seed=0, **settings)
    for mine, theirs in zip(default[:3], zero[:3]):
        np.testing.assert_array_equal(np.array(mine), np.array(theirs))


def test_a_single_sequence_draws_from_the_whole_distribution():
    # One batch entry, one sample, 200 steps of a model whose end (and start) token never comes.
    probs = np.array([1e-30, 1e-30, 0.35, 0.25, 0.2, 0.1, 0.1])
    ids, lengths, _, _ = sampling_search(_fixed_step(np.log(probs)), (), np.full(1, START), END, 200, seed=4)
    assert np.array(lengths).tolist() == [200]
    frequencies = np.bincount(np.array(ids)[0], minlength=VOCAB) / 200
    tolerance = 5 * np.sqrt(probs * (1 - probs) / 200) + 1e-9
    assert np.all(np.abs(frequencies - probs) <= tolerance), (frequencies, probs)


def test_a_uniform_on_a_boundary_of_the_cumulative_distribution_draws_the_next_token():
    # Inverse transform: the first token whose cumulative probability exceeds u. Four equal tokens,
    # cumulative 0.25, 0.5, 0.75, 1 exactly; seed 5339144's first uniform is exactly 0.5, which lies in
    # token 2's interval [0.5, 0.75), not token 1's [0.25, 0.5).
    assert _reference_uniforms(5_339_144, 0, 0) == 0.5
    ids, _, _, _ = sampling_search(_flat_step(4), (), np.full(1, START), END, 1, seed=5_339_144)
    assert np.array(ids).tolist() == [[2]]


def test_a_uniform_above_the_float32_total_of_the_distribution_still_draws_one_of_its_tokens():
    # Cumulative float32 sums of many equal probabilities fall short of 1 by a few float32 steps
    # (TensorFlow: 2e-4 for 32,000 tokens; JAX: 4e-7 for 10,000): a seed whose first uniform lies above
    # that total has no position whose cumulative probability exceeds it.
    totals = {
        vocab: float(np.array(ops.cumsum(truncated_distribution(np.zeros((1, vocab), np.float32))[0], axis=-1))[0, -1])
        for vocab in (10_000, 32_000)
    }
    vocab = min(totals, key=totals.get)
    for first in range(0, 1 << 24, 1 << 20):
        (above,) = np.nonzero(_reference_uniforms(np.arange(first, first + (1 << 20)), 0, 0) >= totals[vocab])
        if len(above):
            break
    assert len(above), totals
    ids, lengths, scores, _ = sampling_search(
        _flat_step(vocab), (), np.full(1, START), END, 1, seed=first + int(above[0])
    )
    assert 0 <= int(np.array(ids)[0, 0]) < vocab and np.array(lengths).tolist() == [1]
    np.testing.assert_allclose(np.array(scores), [-np.log(vocab)], rtol=1e-6)


def _seed_above(total):
    """The first seed whose first uniform (sample 0, step 0) is at least `total`; skips the test if none is."""
    for first in range(0, 1 << 24, 1 << 20):
        (above,) = np.nonzero(_reference_uniforms(np.arange(first, first + (1 << 20)), 0, 0) >= total)
        if len(above):
            return first + int(above[0])
    pytest.skip(f"this backend's float32 total ({total}) leaves no uniform above it")


def test_a_uniform_above_the_float32_total_draws_the_last_token_kept_never_one_cut():
    # As above, with top-k cutting the least probable token: the draw falls back on the last token
    # truncation kept (with equal logits, sorted order is token order), not on the one it cut.
    vocab = 32_000
    probabilities, order = truncated_distribution(np.zeros((1, vocab), np.float32), top_k=vocab - 1)
    total = float(np.array(ops.cumsum(probabilities, axis=-1))[0, -1])
    last_kept = int(np.array(order)[0, vocab - 2])
    ids, _, _, _ = sampling_search(
        _flat_step(vocab), (), np.full(1, START), END, 1, top_k=vocab - 1, seed=_seed_above(total)
    )
    assert int(np.array(ids)[0, 0]) == last_kept


def test_top_p_of_one_keeps_every_token_even_below_float32_resolution():
    # exp(-20) / (1 + exp(-20)) = 2.06e-9: the cumulative sum before it is 1.0 in float32, yet top_p=1 keeps it.
    probabilities, order = truncated_distribution(np.array([[0.0, -20.0]], np.float32), top_p=1.0)
    np.testing.assert_allclose(np.array(probabilities), [[1 / (1 + np.exp(-20)), np.exp(-20) / (1 + np.exp(-20))]],
                               rtol=1e-6)
    cut, _ = truncated_distribution(np.array([[0.0, -20.0]], np.float32), top_p=0.999)
    np.testing.assert_array_equal(np.array(cut), [[1.0, 0.0]])


def test_a_uniform_above_the_float32_totals_draws_each_rows_own_last_kept_token():
    # Two rows of one batch that keep different numbers of tokens: top-k cuts token 31,999 of both, and
    # row 1's last 1,000 tokens (logits 1e4 lower) have probability exactly 0 in float32. Equal logits
    # sort in token order, so a uniform above both rows' float32 totals draws token 31,998 in row 0
    # and token 30,999 in row 1: each row's own last kept token, never one of the other row's.
    vocab = 32_000
    table = np.zeros((2, vocab), np.float32)
    table[1, -1000:] = -1e4

    def step(ids, state):
        return ops.take(table, ids, axis=0), state

    probabilities, _ = truncated_distribution(table, top_k=vocab - 1)
    total = float(np.array(ops.cumsum(probabilities, axis=-1))[:, -1].max())
    ids, _, scores, _ = sampling_search(step, (), np.array([0, 1]), END, 1, top_k=vocab - 1, seed=_seed_above(total))
    assert np.array(ids)[:, 0].tolist() == [vocab - 2, vocab - 1001]
    # Each drawn token's score is its log-probability under its own row's untruncated distribution.
    np.testing.assert_allclose(np.array(scores), [-np.log(vocab), -np.log(vocab - 1000)], rtol=1e-6)
