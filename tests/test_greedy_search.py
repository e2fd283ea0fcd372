import numpy as np
import pytest
from keras import ops

from seqtasks.decoding import greedy_search

pytestmark = pytest.mark.backends

END = 2
VOCAB = 8
# What each sequence is forced to produce, END included.
FORCED = [[5, 6, 7, END], [4, END], [3, 3, 3, 3, 3, 3]]


def _forcing_step(ids, state):
    """Fake model: at step t, row b puts log-probability mass on FORCED[b][t]."""
    step, calls = state
    table = np.full((len(FORCED), 10, VOCAB), 0.0, np.float32)
    for row, tokens in enumerate(FORCED):
        for t, token in enumerate(tokens):
            table[row, t, token] = 3.0
            table[row, t, (token + 1) % VOCAB] = 1.0
    logits = ops.take(ops.convert_to_tensor(table), step, axis=1)
    return logits, (step + 1, calls + 1)


def _log_prob_of_forced():
    logits = np.zeros(VOCAB, np.float32)
    logits[0], logits[1] = 3.0, 1.0
    return float(logits[0] - np.log(np.exp(logits).sum()))


def test_greedy_search_follows_the_forced_tokens_and_stops_at_end():
    state = (ops.convert_to_tensor(0, "int32"), ops.convert_to_tensor(0, "int32"))
    ids, lengths, scores, _ = greedy_search(_forcing_step, state, np.ones(3, np.int32), END, 5)
    ids = np.array(ids)
    np.testing.assert_array_equal(ids[0], [5, 6, 7, END, 0])
    np.testing.assert_array_equal(ids[1], [4, END, 0, 0, 0])
    np.testing.assert_array_equal(ids[2], [3, 3, 3, 3, 3])  # cut at max_length
    np.testing.assert_array_equal(np.array(lengths), [4, 2, 5])
    np.testing.assert_allclose(np.array(scores), np.array([4, 2, 5]) * _log_prob_of_forced(), rtol=1e-5)


def test_greedy_search_stops_when_every_sequence_has_ended():
    max_length = 9

    def step(ids, state):
        step, calls, seen = state
        logits, (step, calls) = _forcing_step(ids, (step, calls))
        at_step = ops.cast(ops.equal(ops.arange(max_length), step - 1), "int32")
        seen = seen + ops.expand_dims(ids, 1) * ops.expand_dims(at_step, 0)
        return logits[:2], (step, calls, seen)

    state = (
        ops.convert_to_tensor(0, "int32"),
        ops.convert_to_tensor(0, "int32"),
        ops.zeros((2, max_length), "int32"),
    )
    ids, lengths, _, (_, calls, seen) = greedy_search(step, state, np.ones(2, np.int32), END, max_length)
    assert np.array(ids).shape == (2, max_length)
    np.testing.assert_array_equal(np.array(lengths), [4, 2])
    assert int(calls) == 4  # not max_length: the loop ends once both rows ended
    # Each step is fed the previous token; an ended row is fed padding after its END.
    np.testing.assert_array_equal(np.array(seen)[:, :4], [[1, 5, 6, 7], [1, 4, END, 0]])
