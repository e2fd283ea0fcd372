"""The one search of the encoder-decoder tasks (`seq2seq_common.search`): evaluation, exports and requests alike.

A width of 1 is greedy search whether it comes as a Python number (the
recipe's, which runs `greedy_search`) or as a tensor (a request's, which runs
`beam_search`): the same ids, lengths and length-normalised scores. Settings
given as tensors search as the same numbers do.
"""

import keras
import numpy as np
import pytest

from seqtasks.decoding import length_penalty
from seqtasks.tasks.seq2seq_common import make_decode, search
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


class Decoding:
    def __init__(self, beam_width, max_length, length_penalty):
        self.beam_width, self.max_length, self.length_penalty = beam_width, max_length, length_penalty


INPUTS = np.array([[3, 1], [5, 2], [4, 4]], np.int32)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.5])
@pytest.mark.parametrize("end_weight", [0.0, -30.0])  # -30: no hypothesis ends, every one runs to max_length
def test_width_one_is_greedy_search_with_the_beam_s_scores(alpha, end_weight):
    model = BigramModel(1, end_weight)
    greedy = [np.asarray(x) for x in search(model, INPUTS, 1, 6, alpha)]
    beam = [np.asarray(x) for x in search(model, INPUTS, np.int32(1), 6, alpha)]  # not a Python int: beam search
    np.testing.assert_array_equal(greedy[0], beam[0])
    np.testing.assert_array_equal(greedy[1], beam[1])
    np.testing.assert_allclose(greedy[2], beam[2], rtol=1e-5)
    # The score is the summed log-probability over the length penalty of the tokens before the end token.
    raw = [np.asarray(x) for x in search(model, INPUTS, 1, 6, 0.0)][2]
    ended = np.array([row[length - 1] == END_ID for row, length in zip(greedy[0], greedy[1])])
    assert ended.any() if end_weight == 0.0 else not ended.any()  # both of the penalty's lengths are tried
    expected = raw / np.asarray(length_penalty(greedy[1] - ended, alpha))
    np.testing.assert_allclose(greedy[2], expected, rtol=1e-5)


def test_the_n_best_of_width_one_is_the_greedy_output_with_an_n_best_axis():
    model = BigramModel(2)
    ids, lengths, scores = (np.asarray(x) for x in search(model, INPUTS, 1, 5, 0.6, n_best=1))
    best = [np.asarray(x) for x in search(model, INPUTS, 1, 5, 0.6)]
    assert ids.shape == (3, 1, 5) and lengths.shape == scores.shape == (3, 1)
    np.testing.assert_array_equal(ids[:, 0], best[0])
    np.testing.assert_allclose(scores[:, 0], best[2])


def test_a_recipe_s_decode_is_the_search_with_its_settings():
    model = BigramModel(3)
    decode = make_decode(model, Decoding(3, 6, 0.6), n_best=2)
    for mine, theirs in zip(decode(INPUTS), search(model, INPUTS, 3, 6, 0.6, n_best=2)):
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
    traced = tf.function(lambda w, b, m, a: search(model, INPUTS, w, m, a, b), input_signature=specs)
    got = traced(width, n_best, 6, alpha)
    expected = make_decode(model, Decoding(width, 6, alpha), n_best)(INPUTS)
    assert got[0].shape == (3, n_best, 6)
    for mine, theirs in zip(got, expected):
        np.testing.assert_allclose(np.array(mine), np.array(theirs), rtol=1e-5)
