"""The one search of the encoder-decoder tasks (`seqtasks.decoding.search`): evaluation, exports and requests alike.

A width of 1 is greedy search whether it comes as a Python number (the
recipe's, which runs `greedy_search`) or as a tensor (a request's, which runs
`beam_search`): the same ids, lengths and length-normalised scores. Settings
given as tensors search as the same numbers do.
"""

import keras
import numpy as np
import pytest

from seqtasks.decoding import length_penalty, search
from seqtasks.encoder_decoder.decoding import make_decode
from seqtasks.text.special_ids import END_ID, START_ID

pytestmark = pytest.mark.backends
VOCAB = 7


class BigramModel:
    """`encode` gives each row a bias over the vocabulary; a step's logits are the last token's row of a
    table plus that bias (tiled with the beams)."""

    def __init__(self, seed, end_weight=0.0):
        rng = np.random.default_rng(seed)
        self.table = np.log(rng.dirichlet(np.full(VOCAB, 0.4), size=VOCAB)).astype("float32")
        self.table[:, END_ID] += end_weight

    def encode(self, inputs):
        from keras import ops

        bias = ops.one_hot(ops.cast(inputs[:, 0], "int32"), VOCAB) * 0.5
        return bias, ops.zeros((ops.shape(inputs)[0],))

    def decode_step(self, ids, state, cache):
        from keras import ops

        return ops.take(self.table, ids, axis=0) + cache, state, None


class AttendingModel(BigramModel):
    """`BigramModel` that attends over its input's positions: a step's weights are the fed token's row of a
    table, softmaxed over the input's non-padding positions (cache: `(bias, keys, mask)`, as a decoder's)."""

    def __init__(self, seed):
        super().__init__(seed)
        rng = np.random.default_rng(seed + 100)
        self.scores = rng.normal(0.0, 2.0, size=(VOCAB, INPUTS.shape[1])).astype("float32")

    def encode(self, inputs):
        from keras import ops

        bias, state = super().encode(inputs)
        return (bias, bias, ops.not_equal(inputs, 0)), state

    def decode_step(self, ids, state, cache):
        from keras import ops

        bias, _, mask = cache
        scores = ops.where(mask, ops.take(self.scores, ids, axis=0), -1e9)
        return ops.take(self.table, ids, axis=0) + bias, state, ops.softmax(scores, axis=-1) * ops.cast(mask, "float32")


INPUTS = np.array([[3, 1], [5, 2], [4, 4]], np.int32)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.5])
@pytest.mark.parametrize("end_weight", [0.0, -30.0])  # -30: no hypothesis ends, every one runs to max_length
def test_width_one_is_greedy_search_with_the_beam_s_scores(alpha, end_weight):
    model = BigramModel(1, end_weight)
    settings = dict(max_length=6, length_penalty=alpha)
    greedy = [np.asarray(x) for x in search(model, INPUTS, {**settings, "beam_width": 1})]
    # Not a Python int: beam search.
    beam = [np.asarray(x) for x in search(model, INPUTS, {**settings, "beam_width": np.int32(1)})]
    np.testing.assert_array_equal(greedy[0], beam[0])
    np.testing.assert_array_equal(greedy[1], beam[1])
    np.testing.assert_allclose(greedy[2], beam[2], rtol=1e-5)
    # The score is the summed log-probability over the length penalty of the tokens before the end token.
    raw = [np.asarray(x) for x in search(model, INPUTS, dict(beam_width=1, max_length=6, length_penalty=0.0))][2]
    ended = np.array([row[length - 1] == END_ID for row, length in zip(greedy[0], greedy[1])])
    assert ended.any() if end_weight == 0.0 else not ended.any()  # both of the penalty's lengths are tried
    expected = raw / np.asarray(length_penalty(greedy[1] - ended, alpha))
    np.testing.assert_allclose(greedy[2], expected, rtol=1e-5)


def test_the_n_best_of_width_one_is_the_greedy_output_with_an_n_best_axis():
    model = BigramModel(2)
    settings = dict(beam_width=1, max_length=5, length_penalty=0.6)
    ids, lengths, scores = (np.asarray(x) for x in search(model, INPUTS, {**settings, "n_best": 1}, lists=True))
    best = [np.asarray(x) for x in search(model, INPUTS, settings)]
    assert ids.shape == (3, 1, 5) and lengths.shape == scores.shape == (3, 1)
    np.testing.assert_array_equal(ids[:, 0], best[0])
    np.testing.assert_allclose(scores[:, 0], best[2])


def test_a_recipe_s_decode_is_the_search_with_its_settings():
    model = BigramModel(3)
    settings = dict(beam_width=3, max_length=6, length_penalty=0.6, n_best=2)
    decode = make_decode(model, settings, lists=True)
    for mine, theirs in zip(decode(INPUTS), search(model, INPUTS, settings, lists=True)):
        np.testing.assert_allclose(np.asarray(mine), np.asarray(theirs))
    ids = np.asarray(decode(INPUTS)[0])
    assert ids.shape == (3, 2, 6) and (ids[:, :, 0] != START_ID).all()


@pytest.mark.parametrize("width, n_best, alpha", [(1, 1, 0.6), (3, 2, 0.0), (4, 4, 1.0)])
def test_settings_as_tensors_in_a_graph_search_as_the_recipe_s_numbers_do(width, n_best, alpha):
    # What an export's `with_settings` signature runs, against what evaluation and `serving_default` run.
    if keras.backend.backend() != "tensorflow":
        pytest.skip("settings as tensors: TensorFlow graphs only")
    import tensorflow as tf

    model = BigramModel(width)
    specs = [tf.TensorSpec([], tf.int32)] * 3 + [tf.TensorSpec([], tf.float32)]
    traced = tf.function(
        lambda w, b, m, a: search(model, INPUTS, dict(beam_width=w, n_best=b, max_length=m, length_penalty=a),
                                  lists=True),
        input_signature=specs,
    )
    got = traced(width, n_best, 6, alpha)
    expected = make_decode(model, dict(beam_width=width, max_length=6, length_penalty=alpha, n_best=n_best),
                           lists=True)(INPUTS)
    assert got[0].shape == (3, n_best, 6)
    for mine, theirs in zip(got, expected):
        np.testing.assert_allclose(np.array(mine), np.array(theirs), rtol=1e-5)


def _log_probs(model, row):
    table = model.table + np.eye(VOCAB, dtype="float32")[row[0]] * 0.5
    return table - np.log(np.exp(table).sum(-1, keepdims=True))


def _exhaustive_best(model, row, max_length, alpha, beta=0.0, ngram=0):
    """The best output of one input by brute force, with the search's scoring (coverage on ended outputs)."""
    import itertools

    log_probs = _log_probs(model, row)
    mask = np.asarray(row) != 0
    best = (-np.inf, None)
    for length in range(1, max_length + 1):
        for tokens in itertools.product(range(VOCAB), repeat=length):
            if END_ID in tokens[:-1] or (length < max_length and tokens[-1] != END_ID):
                continue
            grams = [tokens[i : i + ngram] for i in range(len(tokens) - ngram + 1)] if ngram else []
            if len(grams) != len(set(grams)):
                continue
            fed = (START_ID,) + tokens[:-1]
            total = sum(log_probs[a, b] for a, b in zip(fed, tokens))
            ended = tokens[-1] == END_ID
            score = total / ((5.0 + length - ended) / 6.0) ** alpha
            if ended and beta:
                covered = np.zeros(len(row))
                for a in fed:
                    weights = np.where(mask, np.exp(model.scores[a] - model.scores[a][mask].max()), 0.0)
                    covered += weights / weights.sum()
                covered = np.where(covered == 0.0, 1.0, np.minimum(covered, 1.0))
                score += beta * np.log(covered).sum()
            best = max(best, (score, tokens))
    return best


@pytest.mark.parametrize("beta, ngram", [(0.0, 1), (1.5, 0), (0.8, 2)])
def test_the_preferences_reach_the_search_through_the_recipe(beta, ngram):
    # Padding (0) in the second input: a position never attended counts as covered.
    model, alpha, max_length = AttendingModel(4), 0.6, 4
    decode = make_decode(model, dict(beam_width=VOCAB**max_length, max_length=max_length, length_penalty=alpha,
                                     coverage_penalty=beta, no_repeat_ngram_size=ngram))
    ids, lengths, scores = (np.asarray(x) for x in decode(np.array([[3, 1], [5, 0], [4, 4]], np.int32)))
    for b, row in enumerate([[3, 1], [5, 0], [4, 4]]):
        score, tokens = _exhaustive_best(model, row, max_length, alpha, beta, ngram)
        assert list(ids[b, : lengths[b]]) == list(tokens), b
        np.testing.assert_allclose(scores[b], score, rtol=1e-5)


def test_a_model_without_attention_searches_without_coverage():
    # A request's coverage penalty (a tensor) reaches a decoder that has no weights to sum: nothing to weigh.
    model = BigramModel(5)
    settings = dict(beam_width=3, max_length=5, length_penalty=0.6)
    plain = [np.asarray(x) for x in search(model, INPUTS, settings)]
    weighed = [np.asarray(x) for x in search(model, INPUTS, {**settings, "coverage_penalty": np.float32(2.0)})]
    for mine, theirs in zip(weighed, plain):
        np.testing.assert_allclose(mine, theirs, rtol=1e-6)


def test_samples_come_back_best_first_with_the_search_s_scores():
    model, alpha = BigramModel(6), 0.6
    settings = dict(beam_width=1, max_length=6, length_penalty=alpha, num_samples=8, top_p=0.95, seed=3)
    decode = make_decode(model, {**settings, "n_best": 8}, lists=True)
    ids, lengths, scores = (np.asarray(x) for x in decode(INPUTS))
    assert ids.shape == (3, 8, 6) and lengths.shape == scores.shape == (3, 8)
    for b, row in enumerate(INPUTS):
        log_probs = _log_probs(model, row)
        assert list(scores[b]) == sorted(scores[b], reverse=True)
        for k in range(8):
            tokens = list(ids[b, k, : lengths[b, k]])
            fed = [START_ID] + tokens[:-1]
            ended = tokens[-1] == END_ID
            expected = sum(log_probs[a, t] for a, t in zip(fed, tokens)) / ((5.0 + len(tokens) - ended) / 6.0) ** alpha
            np.testing.assert_allclose(scores[b, k], expected, rtol=1e-5)
    best = [np.asarray(x) for x in search(model, INPUTS, settings)]
    np.testing.assert_array_equal(best[0], ids[:, 0])
    np.testing.assert_allclose(best[2], scores[:, 0])
    other = np.asarray(search(model, INPUTS, {**settings, "n_best": 8, "seed": 4}, lists=True)[0])
    assert not np.array_equal(other, ids)


def test_a_sample_count_given_as_a_tensor_samples_or_searches_as_the_numbers_do():
    if keras.backend.backend() != "tensorflow":
        pytest.skip("settings as tensors: TensorFlow graphs only")
    import tensorflow as tf

    model = BigramModel(7)
    specs = [tf.TensorSpec([], tf.int32)] * 3 + [tf.TensorSpec([], tf.float32)]

    def run(samples, n_best, seed, temperature):
        settings = dict(beam_width=2, max_length=6, length_penalty=0.6, n_best=n_best, num_samples=samples,
                        temperature=temperature, seed=seed)
        return search(model, INPUTS, settings, lists=True)

    traced = tf.function(run, input_signature=specs)
    for samples, n_best, seed, temperature in [(0, 2, 1, 1.0), (3, 2, 1, 1.3), (4, 4, 9, 0.7)]:
        expected = run(samples, n_best, seed, temperature)
        got = traced(samples, n_best, seed, temperature)
        assert got[0].shape == (3, n_best, 6)
        for mine, theirs in zip(got, expected):
            np.testing.assert_allclose(np.array(mine), np.array(theirs), rtol=1e-5)
