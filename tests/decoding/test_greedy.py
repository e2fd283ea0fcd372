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


def _assert_padded(ids, lengths, pad_id):
    """Every returned sequence: tokens, END last unless cut at max_length, then only `pad_id`."""
    max_length = ids.shape[1]
    for row, length in zip(ids, lengths):
        assert END not in row[: length - 1], row
        if length < max_length:
            assert row[length - 1] == END, row
        np.testing.assert_array_equal(row[length:], np.full(max_length - length, pad_id))


@pytest.mark.parametrize("pad_id", [0, 1])
def test_an_early_stop_pads_every_sequence_with_pad_id(pad_id):
    # Rows 0 and 1 of FORCED end at steps 4 and 2 of 7; 1 is neither forced nor runner-up anywhere.
    def step(ids, state):
        logits, state = _forcing_step(ids, state)
        return logits[:2], state

    state = (ops.convert_to_tensor(0, "int32"), ops.convert_to_tensor(0, "int32"))
    ids, lengths, scores, (_, calls) = greedy_search(step, state, np.ones(2, np.int32), END, 7, pad_id=pad_id)
    ids = np.array(ids)
    assert int(calls) == 4  # stopped early: positions 4 to 6 were never written by the loop
    np.testing.assert_array_equal(ids, [[5, 6, 7, END] + [pad_id] * 3, [4, END] + [pad_id] * 5])
    np.testing.assert_array_equal(np.array(lengths), [4, 2])
    np.testing.assert_allclose(np.array(scores), np.array([4, 2]) * _log_prob_of_forced(), rtol=1e-5)
    _assert_padded(ids, np.array(lengths), pad_id)


def test_pad_id_does_not_touch_a_sequence_cut_at_max_length():
    state = (ops.convert_to_tensor(0, "int32"), ops.convert_to_tensor(0, "int32"))
    ids, lengths, _, _ = greedy_search(_forcing_step, state, np.ones(3, np.int32), END, 4, pad_id=1)
    # Row 0 ends exactly at max_length, row 2 is cut there: neither is padded.
    np.testing.assert_array_equal(np.array(ids), [[5, 6, 7, END], [4, END, 1, 1], [3, 3, 3, 3]])
    np.testing.assert_array_equal(np.array(lengths), [4, 2, 4])
    _assert_padded(np.array(ids), np.array(lengths), 1)


def test_an_ended_sequence_is_padded_and_fed_padding_even_where_the_model_wants_more():
    # Row 0: 4, END, then the model keeps asking for 6; row 1 never ends. pad_id 0 is the default.
    max_length = 5

    def step(ids, state):
        t, seen = state
        logits = np.zeros((max_length, 2, VOCAB), np.float32)
        logits[:, 0, 6] = logits[:, 1, 3] = 5.0
        logits[0, 0, 4] = logits[1, 0, END] = 9.0
        at_step = ops.cast(ops.equal(ops.arange(max_length), t), "int32")
        seen = seen + ops.expand_dims(ids, 1) * ops.expand_dims(at_step, 0)
        return ops.take(ops.convert_to_tensor(logits), t, axis=0), (t + 1, seen)

    state = (ops.convert_to_tensor(0, "int32"), ops.zeros((2, max_length), "int32") - 1)
    ids, lengths, _, (_, seen) = greedy_search(step, state, np.ones(2, np.int32), END, max_length)
    np.testing.assert_array_equal(np.array(ids), [[4, END, 0, 0, 0], [3, 3, 3, 3, 3]])
    np.testing.assert_array_equal(np.array(lengths), [2, 5])
    _assert_padded(np.array(ids), np.array(lengths), 0)
    # What the model was fed (offset by the -1 start of `seen`): start id, then the ids, padding after END.
    np.testing.assert_array_equal(np.array(seen) + 1, [[1, 4, END, 0, 0], [1, 3, 3, 3, 3]])


def _compiled(fn):
    """`fn` as one graph (`tf.function` / `jax.jit`), as a model's `predict` runs it."""
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.function(fn)
    if keras.backend.backend() == "jax":
        import jax

        return jax.jit(fn)
    return fn


def _constant_step(logits):
    """Fake model: every step, row b gets `logits[b]` whatever it was fed."""

    def step(ids, state):
        return ops.convert_to_tensor(logits), state

    return step


@pytest.mark.parametrize("compile", [False, True], ids=["eager", "graph"])
def test_each_row_scores_its_own_best_log_probability(compile):
    # Row 0 always picks 1 (logit 1 against three 0s), row 1 always 2 (logit 3); END (3) never
    # wins, so both run the 4 steps. Scores by hand: 4 * (best logit - log sum exp).
    logits = np.array([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 3.0, 0.0]], np.float32)

    def decode(start):
        return greedy_search(_constant_step(logits), (), start, 3, 4)[:3]

    run = _compiled(decode) if compile else decode
    ids, lengths, scores = run(np.array([0, 0], np.int64))  # int64 start ids are accepted
    assert ops.convert_to_numpy(ids).dtype == np.int32
    assert ops.convert_to_numpy(scores).dtype == np.float32
    np.testing.assert_array_equal(np.array(ids), [[1] * 4, [2] * 4])
    np.testing.assert_array_equal(np.array(lengths), [4, 4])
    expected = [4 * (1.0 - np.log(np.e + 3.0)), 4 * (3.0 - np.log(np.e**3 + 3.0))]
    np.testing.assert_allclose(np.array(scores), expected, rtol=1e-6)


def test_greedy_search_runs_as_one_graph():
    # As the first test, inside `tf.function` / `jax.jit`: the loop variables keep their dtypes.
    def decode(start):
        state = (ops.convert_to_tensor(0, "int32"), ops.convert_to_tensor(0, "int32"))
        return greedy_search(_forcing_step, state, start, END, 5)

    ids, lengths, scores, (_, calls) = _compiled(decode)(np.ones(3, np.int32))
    np.testing.assert_array_equal(np.array(ids), [[5, 6, 7, END, 0], [4, END, 0, 0, 0], [3, 3, 3, 3, 3]])
    np.testing.assert_array_equal(np.array(lengths), [4, 2, 5])
    np.testing.assert_allclose(np.array(scores), np.array([4, 2, 5]) * _log_prob_of_forced(), rtol=1e-5)
    assert int(calls) == 5


@pytest.mark.parametrize("compile", [False, True], ids=["eager", "graph"])
def test_search_is_in_float32_whatever_the_global_floatx(float16_floatx, compile):
    # 2048 and 2049 are one float16 step apart at most: in float16 they tie (and the first wins).
    logits = np.array([[2048.0, 2049.0, 0.0, 0.0]], np.float32)

    def decode(start):
        return greedy_search(_constant_step(logits), (), start, 3, 2)[:3]

    run = _compiled(decode) if compile else decode
    ids, _, scores = run(np.zeros(1, np.int32))
    np.testing.assert_array_equal(np.array(ids), [[1, 1]])
    assert ops.convert_to_numpy(scores).dtype == np.float32
    np.testing.assert_allclose(np.array(scores), [-2 * np.log1p(np.exp(-1.0))], rtol=1e-5)
