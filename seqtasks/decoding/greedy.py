from keras import ops


def greedy_search(step_fn, state, start_ids, end_id, max_length, pad_id=0):
    """Decodes the most probable token at every step, for a whole batch at once.

    The loop is a `keras.ops.while_loop`, so inside a `tf.function` or
    `jax.jit` it is one graph loop, not per-token Python. It stops when every
    sequence has produced `end_id`, or after `max_length` steps.

    Args:
        step_fn: `step_fn(ids, state) -> (logits, state)`, with `ids` of shape
            `(batch,)`, logits `(batch, vocab)` and `state` any structure of
            tensors whose shapes do not change between steps.
        state: the initial state.
        start_ids: `(batch,)` int32, the first input of every sequence.
        end_id: int, the id that ends a sequence.
        max_length: int, most tokens to produce (including `end_id`).
        pad_id: int, the id written after a sequence has ended.

    Returns:
        `(ids, lengths, scores, state)`: `ids` `(batch, max_length)` int32
        holding the chosen tokens (ending with `end_id` where one was
        produced, `pad_id` after it); `lengths` `(batch,)` the number of
        tokens produced, `end_id` included; `scores` `(batch,)` float32, the
        sum of the chosen tokens' log-probabilities; `state` the last state
        (a step function can collect e.g. attention weights in it).
    """
    start_ids = ops.cast(start_ids, "int32")
    batch_size = ops.shape(start_ids)[0]
    positions = ops.arange(max_length, dtype="int32")

    def cond(step, ids, last, state, finished, lengths, scores):
        return ops.logical_and(step < max_length, ops.logical_not(ops.all(finished)))

    def body(step, ids, last, state, finished, lengths, scores):
        logits, state = step_fn(last, state)
        log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
        best = ops.cast(ops.argmax(log_probs, axis=-1), "int32")
        best_log_prob = ops.max(log_probs, axis=-1)
        token = ops.where(finished, pad_id, best)
        at_step = ops.cast(ops.equal(positions, step), "int32")
        ids = ids + ops.expand_dims(token, 1) * ops.expand_dims(at_step, 0)
        scores = scores + ops.where(finished, 0.0, best_log_prob)
        lengths = lengths + ops.cast(ops.logical_not(finished), "int32")
        finished = ops.logical_or(finished, ops.equal(best, end_id))
        return step + 1, ids, token, state, finished, lengths, scores

    loop_vars = (
        ops.convert_to_tensor(0, dtype="int32"),
        ops.zeros((batch_size, max_length), dtype="int32"),
        start_ids,
        state,
        ops.zeros((batch_size,), dtype="bool"),
        ops.zeros((batch_size,), dtype="int32"),
        ops.zeros((batch_size,), dtype="float32"),
    )
    _, ids, _, state, _, lengths, scores = ops.while_loop(cond, body, loop_vars)
    if pad_id != 0:
        ids = ops.where(positions[None, :] < lengths[:, None], ids, pad_id)
    return ids, lengths, scores, state
