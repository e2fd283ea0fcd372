"""`seqtasks.decoding.search` and `score_ids` against references written out in NumPy.

A small model whose logits and attention NumPy computes as well: beam search
as wide as every output is brute force over every output; greedy search and
sampling are replayed step by step (sampling with the same counter-based
uniforms, `seqtasks.decoding.sampling.uniforms`); forced decoding is the
log-softmax of the teacher-forced logits.
"""

import itertools
from types import SimpleNamespace

import keras
import numpy as np
import pytest
from keras import ops

from seqtasks.decoding import score_ids, search
from seqtasks.decoding.sampling import uniforms
from seqtasks.models import Ensemble, Seq2Seq
from seqtasks.recipe import load_recipe
from seqtasks.text.special_ids import END_ID, PAD_ID, START_ID


VOCAB = 6
STEPS = 8
# Two inputs of three positions (not the batch size, nor the vocabulary size); the second one padded.
INPUTS = np.array([[4, 1, 5], [5, 4, 0]], np.int32)


class Model:
    """A step's logits: the fed token's row of a table, plus a row per input (by its first token) and a row per
    step (the state counts each input's steps). Its cache is that input's row, alone (`"plain"`: no attention),
    or twice (`"pair"`: no attention either), or with attention, whose weights over the input's positions are
    the fed token's row of scores softmaxed over the non-padding positions: a cache `(rows, keys, mask)` as a
    decoder's (`"triple"`), or a dict read by the model's own `memory_mask` (`"own_mask"`, as an ensemble's)."""

    def __init__(self, seed, kind="plain", end_first=()):
        rng = np.random.default_rng(seed)
        self.kind = kind
        self.table = rng.normal(0.0, 1.5, (VOCAB, VOCAB)).astype("float32")
        self.rows = rng.normal(0.0, 1.0, (VOCAB, VOCAB)).astype("float32")
        self.steps = rng.normal(0.0, 1.0, (STEPS, VOCAB)).astype("float32")
        self.scores = rng.normal(0.0, 2.0, (VOCAB, INPUTS.shape[1])).astype("float32")
        self.table[:, PAD_ID] = -30.0  # as a trained model, it never writes padding
        for first in end_first:  # an input that ends at once
            self.rows[first, END_ID] = 5.0
        if kind == "own_mask":
            self.memory_mask = lambda cache: cache["mask"]

    def encode(self, inputs):
        rows = ops.take(self.rows, ops.cast(inputs[:, 0], "int32"), axis=0)
        state = ops.zeros((ops.shape(inputs)[0],), "int32")
        mask = ops.not_equal(inputs, PAD_ID)
        cache = {"plain": rows, "pair": (rows, rows), "triple": (rows, rows, mask),
                 "own_mask": {"rows": rows, "mask": mask}}[self.kind]
        return cache, state

    def decode_step(self, ids, state, cache):
        rows = {"plain": lambda: cache, "pair": lambda: cache[1], "triple": lambda: cache[0],
                "own_mask": lambda: cache["rows"]}[self.kind]()
        logits = ops.take(self.table, ids, axis=0) + rows + ops.take(self.steps, state, axis=0)
        if self.kind in ("plain", "pair"):
            return logits, state + 1, None
        mask = cache[2] if self.kind == "triple" else cache["mask"]
        scores = ops.where(mask, ops.take(self.scores, ids, axis=0), -1e9)
        return logits, state + 1, ops.softmax(scores, axis=-1) * ops.cast(mask, "float32")

    # NumPy, one input (`row`) at a time.

    def log_probs(self, row, fed, step):
        logits = (self.table[fed] + self.rows[row[0]]) + self.steps[step]
        return _log_softmax(logits)

    def attention(self, row, fed):
        mask = np.asarray(row) != PAD_ID
        weights = np.where(mask, np.exp(self.scores[fed] - self.scores[fed][mask].max()), 0.0)
        return weights / weights.sum()


def _log_softmax(logits):
    logits = np.asarray(logits, np.float64)
    return logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()


def _penalty(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


def _exhaustive(model, row, max_length, alpha=0.0, beta=0.0, ngram=0, prefix=(), cap=None):
    """Every output of one input, best first, with the search's score: the log-probability of the tokens after
    `prefix` over the length penalty of the length without the end token, plus beta times the coverage penalty
    (summed attention) on an ended output; no output repeats an `ngram`-gram. With a `cap`, an output of `cap`
    tokens ends with the end token, forced (log-probability 0), and none is longer."""
    scored = []
    longest = max_length if cap is None else min(cap, max_length)
    for length in range(max(len(prefix), 1), longest + 1):
        for tokens in itertools.product(range(VOCAB), repeat=length):
            if tokens[: len(prefix)] != tuple(prefix) or END_ID in tokens[:-1]:
                continue
            if (length < max_length or length == cap) and tokens[-1] != END_ID:
                continue
            grams = [tokens[i : i + ngram] for i in range(len(tokens) - ngram + 1)] if ngram else []
            if len(grams) != len(set(grams)):
                continue
            fed = (START_ID,) + tokens[:-1]
            log_prob = lambda t: 0.0 if t + 1 == cap else model.log_probs(row, fed[t], t)[tokens[t]]  # noqa: E731
            total = sum(log_prob(t) for t in range(len(prefix), length))
            ended = tokens[-1] == END_ID
            score = total / _penalty(length - ended, alpha)
            if ended and beta:
                covered = sum(model.attention(row, token) for token in fed)
                covered = np.where(covered == 0.0, 1.0, np.minimum(covered, 1.0))
                score += beta * np.log(covered).sum()
            scored.append((score, tokens))
    return sorted(scored, reverse=True)


def _greedy(model, row, max_length, alpha=0.0, prefix=(), cap=None):
    """Greedy search written out: the most probable token at each step (the prefix's while it lasts; the end
    token, with the log-probability 0, as the `cap`-th token)."""
    tokens, total = [], 0.0
    for step in range(max_length):
        log_probs = model.log_probs(row, tokens[-1] if tokens else START_ID, step)
        if cap is not None and step == cap - 1 and step >= len(prefix):
            log_probs = np.where(np.arange(VOCAB) == END_ID, 0.0, -np.inf)
        token = prefix[step] if step < len(prefix) else int(np.argmax(log_probs))
        total += log_probs[token] if step >= len(prefix) else 0.0
        tokens.append(token)
        if token == END_ID:
            break
    return tuple(tokens), total / _penalty(len(tokens) - (tokens[-1] == END_ID), alpha)


def _sample(model, row, index, max_length, temperature, top_k, top_p, seed, alpha, prefix=()):
    """Sample `index` of one input written out: temperature, top-k, nucleus, then the first sorted token whose
    cumulative probability exceeds the step's uniform; scored under the model itself (temperature 1)."""
    tokens, total = [], 0.0
    for step in range(max_length):
        fed = tokens[-1] if tokens else START_ID
        log_probs = model.log_probs(row, fed, step)
        if step < len(prefix):
            token = prefix[step]
        else:
            logits = ((model.table[fed] + model.rows[row[0]]) + model.steps[step]).astype(np.float32)
            scaled = logits.astype(np.float64) / temperature
            order = np.argsort(-scaled, kind="stable")
            probs = np.exp(scaled[order] - scaled.max())
            probs /= probs.sum()
            rank = np.arange(VOCAB)
            probs = np.where((top_k == 0) | (rank < top_k), probs, 0.0)
            probs /= probs.sum()
            before = np.cumsum(probs) - probs
            probs = np.where((rank == 0) | (before < top_p) | (top_p >= 1.0), probs, 0.0)
            probs /= probs.sum()
            u = float(np.asarray(uniforms(seed, np.array([index], np.int32), np.int32(step)))[0])
            position = min(int((np.cumsum(probs) <= u).sum()), int((probs > 0).sum()) - 1)
            token = int(order[position])
            total += log_probs[token]
        tokens.append(token)
        if token == END_ID:
            break
    return total / _penalty(len(tokens) - (tokens[-1] == END_ID), alpha), tuple(tokens)


def _prefix_array(prefixes):
    out = np.zeros((len(prefixes), max(len(p) for p in prefixes)), np.int32)
    for b, prefix in enumerate(prefixes):
        out[b, : len(prefix)] = prefix
    return out


def _rows(ids, lengths):
    """Each output's tokens, checking that padding follows them."""
    ids, lengths = np.asarray(ids), np.asarray(lengths)
    pairs = list(zip(ids.reshape(-1, ids.shape[-1]), lengths.reshape(-1)))
    assert all((row[length:] == PAD_ID).all() for row, length in pairs)
    return [tuple(int(t) for t in row[:length]) for row, length in pairs]


@pytest.mark.backends
@pytest.mark.parametrize("kind, alpha, beta, ngram", [
    ("triple", 0.6, 0.0, 0), ("triple", 0.6, 1.0, 0), ("own_mask", 1.0, 1.7, 2), ("own_mask", 0.0, 0.0, 1),
])
def test_a_beam_as_wide_as_every_output_finds_the_brute_force_n_best(kind, alpha, beta, ngram):
    model, max_length = Model(1, kind), 4
    settings = dict(beam_width=VOCAB**max_length, max_length=max_length, length_penalty=alpha, coverage_penalty=beta,
                    no_repeat_ngram_size=ngram, n_best=3)
    ids, lengths, scores = (np.asarray(x) for x in search(model, INPUTS, settings, lists=True))
    assert ids.shape == (2, 3, max_length) and lengths.shape == scores.shape == (2, 3)
    for b, row in enumerate(INPUTS):
        expected = _exhaustive(model, row, max_length, alpha, beta, ngram)[:3]
        assert _rows(ids[b], lengths[b]) == [tokens for _, tokens in expected], b
        np.testing.assert_allclose(scores[b], [score for score, _ in expected], rtol=1e-5)
    best = [np.asarray(x) for x in search(model, INPUTS, {**settings, "n_best": 1})]
    np.testing.assert_array_equal(best[0], ids[:, 0])
    np.testing.assert_allclose(best[2], scores[:, 0], rtol=1e-6)


@pytest.mark.backends
@pytest.mark.parametrize("kind", ["triple", "own_mask"])
def test_a_prefix_is_forced_unscored_and_covered_as_the_rest(kind):
    _check_a_covered_prefix(kind)


def _check_a_covered_prefix(kind):
    model, max_length, prefixes = Model(2, kind), 4, [(4,), (1, 5)]
    settings = dict(beam_width=VOCAB**max_length, max_length=max_length, length_penalty=0.6, coverage_penalty=1.3,
                    n_best=2)
    out = search(model, INPUTS, settings, prefix=_prefix_array(prefixes), lists=True)
    ids, lengths, scores = (np.asarray(x) for x in out)
    for b, row in enumerate(INPUTS):
        expected = _exhaustive(model, row, max_length, 0.6, 1.3, prefix=prefixes[b])[:2]
        assert _rows(ids[b], lengths[b]) == [tokens for _, tokens in expected], b
        np.testing.assert_allclose(scores[b], [score for score, _ in expected], rtol=1e-5)


# The inputs hold 3 and 2 tokens: a factor of 0.6 bounds their outputs at ceil(2.4) = 3 and ceil(1.8) = 2 tokens.
FACTOR, CAPS = 0.6, (3, 2)


@pytest.mark.backends
@pytest.mark.parametrize("factor", [FACTOR, np.float32(FACTOR)])
@pytest.mark.parametrize("prefixes", [None, [(4,), (1, 5)]])
def test_a_length_factor_ends_each_output_at_its_own_bound_as_written_out(factor, prefixes):
    model, max_length = Model(6, "triple"), 5
    prefix = None if prefixes is None else _prefix_array(prefixes)
    given = [()] * 2 if prefixes is None else prefixes
    # A prefix is never cut: the second input's bound grows to its prefix and the end token.
    caps = [max(cap, len(p) + 1) for cap, p in zip(CAPS, given)]
    greedy = dict(beam_width=1, max_length=max_length, length_penalty=0.6, length_factor=factor)
    ids, lengths, scores = (np.asarray(x) for x in search(model, INPUTS, greedy, prefix=prefix))
    for b, row in enumerate(INPUTS):
        tokens, score = _greedy(model, row, max_length, 0.6, given[b], cap=caps[b])
        assert _rows(ids[b : b + 1], lengths[b : b + 1]) == [tokens] and len(tokens) <= caps[b], b
        np.testing.assert_allclose(scores[b], score, rtol=1e-5)
    wide = dict(greedy, beam_width=VOCAB**max_length, n_best=3, coverage_penalty=0.7)
    ids, lengths, scores = (np.asarray(x) for x in search(model, INPUTS, wide, prefix=prefix, lists=True))
    for b, row in enumerate(INPUTS):
        expected = _exhaustive(model, row, max_length, 0.6, 0.7, prefix=given[b], cap=caps[b])[:3]
        found = len(expected)  # a prefix may leave fewer outputs than n_best: the rest are impossible ones
        assert _rows(ids[b], lengths[b])[:found] == [tokens for _, tokens in expected], b
        np.testing.assert_allclose(scores[b, :found], [score for score, _ in expected], rtol=1e-5)
        assert (scores[b, found:] < -1e8).all()
    if keras.config.backend() == "tensorflow":  # the loop runs no longer than the longest bound
        assert ids.shape[-1] == max(caps)


@pytest.mark.backends
def test_samples_end_at_the_length_factor_s_bound_of_their_own_input():
    model = Model(6, "triple")
    sampled = dict(num_samples=8, n_best=8, max_length=5, temperature=2.0, seed=3)
    unbounded = np.asarray(search(model, INPUTS, sampled, lists=True)[1])
    ids, lengths, _ = (np.asarray(x) for x in search(model, INPUTS, {**sampled, "length_factor": FACTOR}, lists=True))
    for b, cap in enumerate(CAPS):
        assert (unbounded[b] > cap).any(), b  # the draws would run past the bound
        # The same draws, cut at the bound (best first, so compared as a multiset: the cut ones score anew).
        np.testing.assert_array_equal(np.sort(lengths[b]), np.sort(np.minimum(unbounded[b], cap)))
    if keras.config.backend() == "tensorflow":  # the loop runs no longer than the longest bound
        assert ids.shape[-1] == max(CAPS)


@pytest.mark.backends
def test_a_length_factor_of_zero_or_on_inputs_other_than_tokens_bounds_nothing():
    from seqtasks.decoding.model_search import output_caps

    model = Model(6, "triple")
    settings = dict(beam_width=3, max_length=5, n_best=2)
    plain = [np.asarray(x) for x in search(model, INPUTS, settings, lists=True)]
    for factor in (0, 0.0, np.float32(0.0)):
        again = search(model, INPUTS, {**settings, "length_factor": factor}, lists=True)
        for expected, got in zip(plain, again):
            np.testing.assert_array_equal(expected, np.asarray(got))
    assert output_caps(INPUTS, 0, 5) is None
    assert output_caps(INPUTS.astype("float32"), 2.0, 5) is None  # image features, not tokens
    np.testing.assert_array_equal(output_caps(INPUTS, np.float32(0.0), 5), [6, 6])  # past max_length: no bound
    np.testing.assert_array_equal(output_caps(INPUTS, 2.0, 5), [6, 6])  # ceil(8) and ceil(6)
    np.testing.assert_array_equal(output_caps(INPUTS, 1.5, 5), [6, 5])  # ceil(6) and ceil(4.5)
    np.testing.assert_array_equal(output_caps(INPUTS, 1.0, 9), [4, 3])
    np.testing.assert_array_equal(output_caps(INPUTS, 0.1, 9, _prefix_array([(4, 4, 4), (1,)])), [4, 2])


@pytest.mark.backends
@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
@pytest.mark.parametrize("prefixes", [None, [(5, 4), (1,)]])
def test_a_python_width_of_one_is_greedy_search_written_out(alpha, prefixes):
    # The first input ends at once: its length without the end token is 0.
    model, max_length = Model(3, "triple", end_first=(4,)), 6
    prefix = None if prefixes is None else _prefix_array(prefixes)
    settings = dict(beam_width=1, max_length=max_length, length_penalty=alpha)
    ids, lengths, scores = (np.asarray(x) for x in search(model, INPUTS, settings, prefix=prefix))
    listed = [np.asarray(x) for x in search(model, INPUTS, settings, prefix=prefix, lists=True)]
    assert ids.shape == (2, max_length) and listed[0].shape == (2, 1, max_length) and listed[2].shape == (2, 1)
    for b, row in enumerate(INPUTS):
        tokens, score = _greedy(model, row, max_length, alpha, () if prefixes is None else prefixes[b])
        assert _rows(ids[b : b + 1], lengths[b : b + 1]) == [tokens] == _rows(listed[0][b], listed[1][b]), b
        np.testing.assert_allclose([scores[b], listed[2][b, 0]], [score, score], rtol=1e-5)
    if prefixes is None:
        assert list(ids[0, :2]) == [END_ID, PAD_ID]


@pytest.mark.backends
def test_a_python_width_of_one_runs_greedy_search_unless_a_beam_search_preference_is_asked_for(monkeypatch):
    from seqtasks import decoding

    ran = []
    for name in ("greedy_search", "beam_search", "sampling_search"):
        original = getattr(decoding, name)
        monkeypatch.setattr(decoding, name, lambda *a, _name=name, _original=original, **k: (
            ran.append(_name), _original(*a, **k))[1])
    cases = [
        ("plain", dict(beam_width=1), "greedy_search"),
        ("triple", dict(beam_width=1), "greedy_search"),
        ("plain", dict(beam_width=np.int32(1)), "beam_search"),  # a tensor: any width, one graph
        ("triple", dict(beam_width=1, coverage_penalty=0.5), "beam_search"),
        ("own_mask", dict(beam_width=1, coverage_penalty=0.5), "beam_search"),
        ("plain", dict(beam_width=1, coverage_penalty=0.5), "greedy_search"),  # no attention to cover
        ("plain", dict(beam_width=1, no_repeat_ngram_size=2), "beam_search"),
        ("plain", dict(beam_width=1, no_repeat_ngram_size=1), "beam_search"),
        ("plain", dict(beam_width=2), "beam_search"),
        ("plain", dict(beam_width=2, num_samples=1), "sampling_search"),
    ]
    for kind, settings, expected in cases:
        ran.clear()
        search(Model(4, kind), INPUTS, {**settings, "max_length": 3})
        assert ran == [expected], (kind, settings)


@pytest.mark.backends
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_a_model_without_attention_searches_alike_with_any_coverage_penalty(kind):
    model = Model(5, kind)
    settings = dict(beam_width=3, max_length=5, length_penalty=0.6, n_best=2)
    prefix = _prefix_array([(4,), (5, 1)])
    for given in (None, prefix):
        plain = [np.asarray(x) for x in search(model, INPUTS, settings, prefix=given, lists=True)]
        weighed = search(model, INPUTS, {**settings, "coverage_penalty": np.float32(2.0)}, prefix=given, lists=True)
        for mine, theirs in zip(weighed, plain):
            np.testing.assert_allclose(np.asarray(mine), theirs, rtol=1e-6)


SAMPLING_CASES = [
    # num_samples, temperature, top_k, top_p, seed, alpha, prefixes
    (3, 1.7, 4, 0.9, 11, 0.6, None),
    (1, 0.5, 0, 1.0, 6, 1.0, None),
    (4, 1.0, 0, 0.7, 3, 0.0, [(5,), (4, 1)]),
    (2, 2.5, 2, 1.0, 8, 0.6, None),
]


def _sampled(model, case, max_length):
    samples, temperature, top_k, top_p, seed, alpha, prefixes = case
    expected = []
    for b, row in enumerate(INPUTS):
        prefix = () if prefixes is None else prefixes[b]
        drawn = [_sample(model, row, k, max_length, temperature, top_k, top_p, seed, alpha, prefix)
                 for k in range(samples)]
        expected.append(sorted(drawn, key=lambda pair: -pair[0]))
    return expected


@pytest.mark.backends
@pytest.mark.parametrize("case", SAMPLING_CASES)
def test_samples_are_drawn_as_written_out_and_come_back_best_first(case):
    samples, temperature, top_k, top_p, seed, alpha, prefixes = case
    model, max_length = Model(6, "triple"), 5
    settings = dict(beam_width=3, max_length=max_length, length_penalty=alpha, num_samples=samples,
                    temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, n_best=samples)
    prefix = None if prefixes is None else _prefix_array(prefixes)
    expected = _sampled(model, case, max_length)
    # Each setting given changes the samples here: a search that left one out would not pass.
    for index, default in ((1, 1.0), (2, 0), (3, 1.0), (4, 0)):  # temperature, top_k, top_p, seed
        if case[index] != default:
            changed = case[:index] + (default,) + case[index + 1 :]
            assert _sampled(model, changed, max_length) != expected, index
    ids, lengths, scores = (np.asarray(x) for x in search(model, INPUTS, settings, prefix=prefix, lists=True))
    assert ids.shape == (2, samples, max_length)
    best = [np.asarray(x) for x in search(model, INPUTS, settings, prefix=prefix)]
    assert best[0].shape == (2, max_length)
    for b in range(2):
        assert _rows(ids[b], lengths[b]) == [tokens for _, tokens in expected[b]], b
        np.testing.assert_allclose(scores[b], [score for score, _ in expected[b]], rtol=1e-5)
        assert _rows(best[0][b : b + 1], best[1][b : b + 1]) == [expected[b][0][1]]
        np.testing.assert_allclose(best[2][b], expected[b][0][0], rtol=1e-5)
    # Sampling is not greedy search.
    assert any(tokens != _greedy(model, INPUTS[b], max_length)[0] for b in range(2) for _, tokens in expected[b])


@pytest.mark.backends
def test_fewer_best_than_samples_are_the_best_of_them():
    case = SAMPLING_CASES[0]
    model, max_length = Model(6, "triple"), 5
    settings = dict(max_length=max_length, length_penalty=case[5], num_samples=3, temperature=case[1], top_k=case[2],
                    top_p=case[3], seed=case[4], n_best=2)
    ids, lengths, scores = (np.asarray(x) for x in search(model, INPUTS, settings, lists=True))
    expected = _sampled(model, case, max_length)
    assert ids.shape == (2, 2, max_length)
    for b in range(2):
        assert _rows(ids[b], lengths[b]) == [tokens for _, tokens in expected[b][:2]]
        np.testing.assert_allclose(scores[b], [score for score, _ in expected[b][:2]], rtol=1e-5)


@pytest.mark.backends
def test_settings_may_be_a_recipe_s_object_with_every_one():
    from seqtasks.decoding.settings import defaults

    model = Model(7, "triple")
    settings = dict(beam_width=3, max_length=5, length_penalty=0.6, coverage_penalty=0.4, n_best=2)
    recipe = SimpleNamespace(**{**defaults(), **settings})
    for mine, theirs in zip(search(model, INPUTS, recipe, lists=True), search(model, INPUTS, settings, lists=True)):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))


@pytest.mark.backends
def test_a_sample_count_given_as_a_tensor_samples_or_searches_as_written_out():
    if keras.backend.backend() != "tensorflow":
        pytest.skip("settings as tensors: TensorFlow graphs only")
    import tensorflow as tf

    model, max_length = Model(8, "plain"), 5
    traced = tf.function(
        lambda samples: search(model, INPUTS, dict(max_length=max_length, num_samples=samples, seed=9, n_best=1),
                               lists=True),
        input_signature=[tf.TensorSpec([], tf.int32)],
    )
    ids, lengths, scores = (np.asarray(x) for x in traced(1))
    expected = _sampled(model, (1, 1.0, 0, 1.0, 9, 0.0, None), max_length)
    for b in range(2):
        assert _rows(ids[b], lengths[b]) == [expected[b][0][1]]
        np.testing.assert_allclose(scores[b, 0], expected[b][0][0], rtol=1e-5)
    ids, lengths, scores = (np.asarray(x) for x in traced(0))
    for b, row in enumerate(INPUTS):
        tokens, score = _greedy(model, row, max_length)
        assert _rows(ids[b], lengths[b]) == [tokens]
        np.testing.assert_allclose(scores[b, 0], score, rtol=1e-5)
    assert any(expected[b][0][1] != _greedy(model, INPUTS[b], max_length)[0] for b in range(2))


class TeacherForced:
    """`Model`'s logits for whole target rows, as a Keras model's call gives them; in training (dropout, say)
    other logits."""

    def __init__(self, model):
        self.model = model

    def __call__(self, inputs, training=None):
        source, target_in = inputs
        model = self.model
        logits = (ops.take(model.table, target_in, axis=0) + ops.expand_dims(
            ops.take(model.rows, ops.cast(source[:, 0], "int32"), axis=0), 1)) + model.steps[: target_in.shape[1]]
        return logits * 1.7 if training else logits


@pytest.mark.backends
def test_forced_decoding_gives_each_target_token_s_log_probability_and_the_search_s_score():
    model = Model(9)
    # Three targets of four steps: one that ends, one that is only the end token, one cut at the length.
    source = np.array([[4, 1], [5, 2], [1, 1]], np.int32)
    targets = np.array([[4, 5, END_ID, PAD_ID], [END_ID, PAD_ID, PAD_ID, PAD_ID], [1, 4, 5, 4]], np.int32)
    expected_tokens = np.zeros(targets.shape)
    for b, (row, target) in enumerate(zip(source, targets)):
        fed = [START_ID] + list(target[:-1])
        for t, token in enumerate(target):
            if token != PAD_ID:
                expected_tokens[b, t] = model.log_probs(row, fed[t], t)[token]
    total = expected_tokens.sum(1)
    counted = np.array([2, 0, 4])  # lengths without the end token
    tokens, summed, normalised = (np.asarray(x) for x in score_ids(TeacherForced(model), source, targets))
    assert tokens.shape == targets.shape and summed.shape == normalised.shape == (3,)
    np.testing.assert_allclose(tokens, expected_tokens, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(summed, total, rtol=1e-5)
    np.testing.assert_allclose(normalised, total, rtol=1e-5)  # no length penalty unless asked for
    for alpha in (0.6, 1.0):
        normalised = np.asarray(score_ids(TeacherForced(model), source, targets, alpha)[2])
        np.testing.assert_allclose(normalised, total / _penalty(counted, alpha), rtol=1e-5)


@pytest.mark.backends
def test_the_search_and_forced_decoding_stay_in_float32_under_a_float16_floatx(float16_floatx):
    for kind in ("triple", "own_mask"):
        _check_a_covered_prefix(kind)
    test_forced_decoding_gives_each_target_token_s_log_probability_and_the_search_s_score()


class Wide:
    """A vocabulary of ids that float16 cannot all hold: each step's most probable token is the next id."""

    vocab = 4100

    def encode(self, inputs):
        return ops.zeros((ops.shape(inputs)[0], 1)), ops.zeros((ops.shape(inputs)[0],), "int32")

    def decode_step(self, ids, state, cache):
        return ops.one_hot(ids + 1, self.vocab) * 3.0 + cache, state, None


@pytest.mark.backends
def test_a_prefix_of_ids_beyond_float16_s_integers_is_forced_as_given_under_a_float16_floatx(float16_floatx):
    prefix = np.array([[4097, 2049], [2051, 0]], np.int32)
    ids = np.asarray(search(Wide(), INPUTS, dict(max_length=4), prefix=prefix)[0])
    np.testing.assert_array_equal(ids, [[4097, 2049, 2050, 2051], [2051, 2052, 2053, 2054]])


def _model(seed, attention="luong"):
    recipe = load_recipe("recipes/translation.yaml", [
        "model.embedding_dim=8", "model.encoder.units=8", "model.decoder.units=8",
        f"model.attention.type={attention}", "model.decoder.input_feeding=true",
    ])
    keras.utils.set_random_seed(seed)
    model = Seq2Seq.from_recipe(recipe.model, 11, 9, seed=seed)
    model((np.ones((1, 3), "int32"), np.ones((1, 2), "int32")))
    # A trained model never writes PAD_ID (no target holds it); this untrained one must not either.
    bias = np.array(model.output_dense.bias)
    bias[0] = -30.0
    model.output_dense.bias.assign(bias)
    return model


SOURCE = np.array([[5, 6, 7, 0], [8, 9, 10, 3], [4, 0, 0, 0]], "int32")


@pytest.mark.parametrize("attention", ["luong", "none"])
def test_the_searches_scores_are_the_scored_values_of_their_outputs(attention):
    model = _model(1, attention)
    for settings, lists in ((dict(beam_width=3, n_best=3), True), (dict(beam_width=1), False),
                            (dict(beam_width=1, n_best=2, num_samples=2, temperature=1.3, top_k=0, top_p=1.0, seed=5),
                             True)):
        ids, lengths, scores = search(model, SOURCE, {**settings, "max_length": 7, "length_penalty": 0.6}, lists=lists)
        ids, lengths, scores = (np.asarray(x) for x in (ids, lengths, scores))
        if ids.ndim == 2:
            ids, lengths, scores = ids[:, None], lengths[:, None], scores[:, None]
        for k in range(ids.shape[1]):
            tokens, total, normalised = (np.asarray(x) for x in score_ids(model, SOURCE, ids[:, k], 0.6))
            np.testing.assert_allclose(normalised, scores[:, k], atol=1e-4, err_msg=str(settings))
            np.testing.assert_allclose(total, tokens.sum(1), atol=1e-6)
            assert ((tokens != 0) == (np.arange(ids.shape[2]) < lengths[:, k, None])).all()


def test_scored_values_are_the_teacher_forced_log_probabilities_and_an_ensemble_scores_as_it_searches():
    model, other = _model(1), _model(2)
    target = np.array([[4, 5, 3, 0], [6, 3, 0, 0], [3, 0, 0, 0]], "int32")  # END_ID 3 closes each
    inputs = np.concatenate([np.full((3, 1), 2, "int32"), target[:, :-1]], axis=1)  # START_ID 2
    logits = np.asarray(model((SOURCE, inputs)), np.float64)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = np.where(target != 0, np.take_along_axis(log_probs, target[..., None], -1)[..., 0], 0.0)
    tokens, total, normalised = (np.asarray(x) for x in score_ids(model, SOURCE, target, 0.6))
    np.testing.assert_allclose(tokens, expected, atol=1e-5)
    lengths = np.array([2, 1, 0])  # without the end token
    np.testing.assert_allclose(normalised, expected.sum(1) / (((5 + lengths) / 6) ** 0.6), atol=1e-5)
    ensemble = Ensemble([model, other])
    settings = dict(beam_width=3, max_length=6, length_penalty=0.6, n_best=2)
    ids, _, scores = search(ensemble, SOURCE, settings, lists=True)
    for k in range(2):
        np.testing.assert_allclose(score_ids(ensemble, SOURCE, np.asarray(ids)[:, k], 0.6)[2], np.asarray(scores)[:, k],
                                   atol=1e-4)


def _prefix(ids, k):
    """The first k ids of each row, PAD after (k 0: none)."""
    out = np.zeros((ids.shape[0], max(k, 1)), "int32")
    out[:, :k] = ids[:, :k]
    return out


def test_a_prefix_of_the_greedy_output_gives_the_same_output_scored_without_it():
    model = _model(1)
    ids, lengths, scores = (np.asarray(x) for x in search(model, SOURCE, dict(beam_width=1, max_length=7)))
    tokens = np.asarray(score_ids(model, SOURCE, ids, 0.0)[0])
    for k in (0, 1, 2):
        forced_ids, forced_lengths, forced_scores = (
            np.asarray(x) for x in search(model, SOURCE, dict(beam_width=1, max_length=7), prefix=_prefix(ids, k))
        )
        np.testing.assert_array_equal(forced_ids, ids)
        np.testing.assert_array_equal(forced_lengths, lengths)
        np.testing.assert_allclose(forced_scores, scores - tokens[:, :k].sum(1), atol=1e-5)


def test_a_prefix_of_a_sample_gives_the_same_sample_and_any_prefix_is_written_first():
    model = _model(2)
    sampling = dict(beam_width=1, max_length=6, n_best=3, num_samples=3, temperature=1.5, top_k=0, top_p=1.0, seed=11)
    ids, _, _ = (np.asarray(x) for x in search(model, SOURCE, sampling, lists=True))
    # Samples come back best first: force the first two tokens of the best one and it comes back, unchanged.
    again = np.asarray(search(model, SOURCE, sampling, prefix=_prefix(ids[:, 0], 2), lists=True)[0])
    assert any((again[:, k] == ids[:, 0]).all() for k in range(3))
    # An unlikely prefix (tokens 7 then 8 on every row, padding on the last) starts every hypothesis.
    prefix = np.array([[7, 8], [7, 8], [7, 0]], "int32")
    for settings, lists in ((dict(beam_width=3, n_best=3, coverage_penalty=0.3, no_repeat_ngram_size=2), True),
                            (dict(beam_width=1), False), (dict(beam_width=1, n_best=2, num_samples=2), True)):
        out = np.asarray(search(model, SOURCE, {**settings, "max_length": 6}, prefix=prefix, lists=lists)[0])
        out = out if out.ndim == 3 else out[:, None]
        assert (out[:2, :, :2] == [7, 8]).all() and (out[2, :, 0] == 7).all(), settings
