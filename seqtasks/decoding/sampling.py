from keras import ops

# Multipliers of the "lowbias32" integer hash (C. Wellons, "Prospecting for hash functions", 2018).
_MULTIPLIERS = (0x7FEB352D, 0x846CA68B)


def _u32(value):
    return ops.convert_to_tensor(value, dtype="uint32")


def _mix(x):
    """A 32-bit integer hash: every input bit changes about half the output bits."""
    x = ops.bitwise_xor(x, ops.right_shift(x, _u32(16)))
    x = ops.multiply(x, _u32(_MULTIPLIERS[0]))
    x = ops.bitwise_xor(x, ops.right_shift(x, _u32(15)))
    x = ops.multiply(x, _u32(_MULTIPLIERS[1]))
    return ops.bitwise_xor(x, ops.right_shift(x, _u32(16)))


def _as_seed(seed):
    if isinstance(seed, int):
        return _u32(seed & 0xFFFFFFFF)
    # A tensor seed (an export's per-request setting): a negative value wraps to its uint32 bits.
    return ops.cast(seed, "uint32")


def uniforms(seed, sample_index, step):
    """Uniform floats in [0, 1) that depend only on `seed`, each sample's index and `step`.

    A counter-based generator: `(seed, sample, step)` is hashed to 24
    random bits, so the numbers need no random state inside the decoding loop,
    come out the same on every backend, and do not depend on which batch
    entry a sample belongs to.

    Args:
        seed: int or int scalar tensor.
        sample_index: int tensor `(rows,)`.
        step: int scalar tensor.

    Returns:
        float32 `(rows,)`.
    """
    x = _mix(_as_seed(seed))
    x = _mix(ops.bitwise_xor(x, ops.cast(sample_index, "uint32")))
    x = _mix(ops.bitwise_xor(x, ops.cast(step, "uint32")))
    # 24 bits are exactly representable in float32, so the value stays below 1.
    return ops.cast(ops.right_shift(x, _u32(8)), "float32") / float(1 << 24)


def truncated_distribution(logits, temperature=1.0, top_k=0, top_p=1.0):
    """The distribution sampling draws from: temperature, then top-k, then nucleus (top-p).

    Logits are divided by `temperature`; only the `top_k` most probable
    tokens are kept (0: all); of those, renormalised, the smallest set of
    most probable tokens whose probabilities sum to at least `top_p` is kept
    (Holtzman et al., 2020), and what is kept is renormalised: the order and
    conventions of Hugging Face's `generate` warpers.

    Args:
        logits: float `(rows, vocab)`.
        temperature: float > 0 (or a float scalar tensor).
        top_k: int >= 0 (or an int scalar tensor); 0 keeps every token.
        top_p: float in (0, 1] (or a float scalar tensor).

    Returns:
        `(probabilities, order)`: float32 `(rows, vocab)` probabilities of the
        tokens sorted from most to least probable (zero for tokens cut
        off), and int32 `(rows, vocab)` the token id at each sorted position.
    """
    scaled = ops.cast(logits, "float32") / ops.cast(temperature, "float32")
    order = ops.cast(ops.argsort(-scaled, axis=-1), "int32")
    probabilities = ops.softmax(ops.take_along_axis(scaled, order, axis=-1), axis=-1)
    rank = ops.expand_dims(ops.arange(ops.shape(scaled)[-1], dtype="int32"), 0)
    top_k = ops.cast(top_k, "int32")
    in_top_k = ops.logical_or(ops.equal(top_k, 0), rank < top_k)
    probabilities = ops.where(in_top_k, probabilities, 0.0)
    probabilities = probabilities / ops.sum(probabilities, axis=-1, keepdims=True)
    mass_before = ops.cumsum(probabilities, axis=-1) - probabilities
    top_p = ops.cast(top_p, "float32")
    # The most probable token always stays, whatever top_p; top_p 1 keeps every token, even those whose
    # probability float32 sums cannot register (as Hugging Face's warper is skipped at 1).
    in_nucleus = ops.logical_or(ops.logical_or(rank == 0, mass_before < top_p), top_p >= 1.0)
    probabilities = ops.where(in_nucleus, probabilities, 0.0)
    return probabilities / ops.sum(probabilities, axis=-1, keepdims=True), order


def _check(num_samples, temperature, top_k, top_p):
    if isinstance(num_samples, int) and num_samples < 1:
        raise ValueError(f"Expected num_samples >= 1. Received: num_samples={num_samples}")
    if isinstance(temperature, (int, float)) and not temperature > 0:
        raise ValueError(f"Expected temperature > 0. Received: temperature={temperature}")
    if isinstance(top_k, int) and top_k < 0:
        raise ValueError(f"Expected top_k >= 0 (0 keeps every token). Received: top_k={top_k}")
    if isinstance(top_p, (int, float)) and not 0 < top_p <= 1:
        raise ValueError(f"Expected top_p in (0, 1]. Received: top_p={top_p}")


def sampling_search(
    step_fn,
    state,
    start_ids,
    end_id,
    max_length,
    num_samples=None,
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    seed=0,
    pad_id=0,
):
    """Random sampling for a whole batch in one graph loop (`keras.ops.while_loop`).

    At every step each sequence draws its next token from the model's
    distribution after `truncated_distribution` (temperature, top-k,
    nucleus), until it draws `end_id` or reaches `max_length`. With
    `num_samples=K`, every batch entry is sampled K times independently.

    Randomness comes from `uniforms(seed, k, step)`: a sample's draws depend
    only on the seed, its index k among the entry's samples and the step, not
    on the batch it was decoded in or its place there. The same seed
    therefore gives the same samples for the same input, alone or batched
    with others (up to the float rounding of the model's logits in a
    differently padded batch), and entries of one batch share their
    uniforms, which is harmless because each entry's samples are still
    drawn from its own distribution. Different seeds, or different k, give
    independent samples.

    Args:
        step_fn: `step_fn(ids, state) -> (logits, state)` on `batch * K`
            rows (K = `num_samples`, or 1).
        state: the initial state, already tiled with `tile_beams(state, K)`
            (row `b * K + k` is sample k of batch entry b).
        start_ids: `(batch,)` int, the first input of every sequence.
        end_id: int, the id that ends a sequence.
        max_length: int, most tokens to produce (including `end_id`).
        num_samples: None (one sample per entry), or an int K >= 1.
        temperature: float > 0; below 1 sharpens the distribution, above 1
            flattens it.
        top_k: int >= 0, sample among the k most probable tokens (0: all;
            1: greedy).
        top_p: float in (0, 1], nucleus sampling's probability mass.
        seed: int (or int scalar tensor).
        pad_id: int, written after a sequence has ended.

    Under TensorFlow, `max_length`, `num_samples`, `temperature`, `top_k`,
    `top_p` and `seed` may also be scalar tensors; they are then not checked
    here.

    Returns:
        `(ids, lengths, scores, state)`: `ids` `(batch, max_length)` int32
        (`(batch, K, max_length)` with `num_samples`), `end_id` then `pad_id`
        after the end; `lengths` `(batch,)` (or `(batch, K)`) tokens produced,
        `end_id` included; `scores` float32, the sum of the drawn tokens'
        log-probabilities under the model (temperature 1, nothing cut
        off), as scoring the output would give; `state` the last state of
        every row `(batch * K, ...)`.

    Reference:
        Holtzman et al., "The Curious Case of Neural Text Degeneration", 2020.
    """
    _check(num_samples, temperature, top_k, top_p)
    samples = 1 if num_samples is None else num_samples
    start_ids = ops.repeat(ops.cast(start_ids, "int32"), samples, axis=0)
    rows = ops.shape(start_ids)[0]
    sample_index = ops.arange(rows, dtype="int32") % samples
    positions = ops.arange(max_length, dtype="int32")

    def cond(step, ids, last, state, finished, lengths, scores):
        return ops.logical_and(step < max_length, ops.logical_not(ops.all(finished)))

    def body(step, ids, last, state, finished, lengths, scores):
        logits, state = step_fn(last, state)
        logits = ops.cast(logits, "float32")
        probabilities, order = truncated_distribution(logits, temperature, top_k, top_p)
        threshold = uniforms(seed, sample_index, step)
        # Inverse transform: the first sorted position whose cumulative probability exceeds u. Where float32
        # sums fall short of 1 and u is above them, the last token kept (never one truncation cut).
        below = ops.cumsum(probabilities, axis=-1) <= ops.expand_dims(threshold, -1)
        last_kept = ops.sum(ops.cast(probabilities > 0.0, "int32"), axis=-1) - 1
        position = ops.minimum(ops.sum(ops.cast(below, "int32"), axis=-1), last_kept)
        drawn = ops.take_along_axis(order, ops.expand_dims(position, -1), axis=-1)[:, 0]
        log_probs = ops.log_softmax(logits, axis=-1)
        drawn_log_prob = ops.take_along_axis(log_probs, ops.expand_dims(drawn, -1), axis=-1)[:, 0]
        token = ops.where(finished, pad_id, drawn)
        ids = ids + ops.expand_dims(token, 1) * ops.expand_dims(ops.cast(positions == step, "int32"), 0)
        scores = scores + ops.where(finished, 0.0, drawn_log_prob)
        lengths = lengths + ops.cast(ops.logical_not(finished), "int32")
        finished = ops.logical_or(finished, ops.equal(drawn, end_id))
        return step + 1, ids, token, state, finished, lengths, scores

    loop_vars = (
        ops.convert_to_tensor(0, dtype="int32"),
        ops.zeros((rows, max_length), dtype="int32"),
        start_ids,
        state,
        ops.zeros((rows,), dtype="bool"),
        ops.zeros((rows,), dtype="int32"),
        ops.zeros((rows,), dtype="float32"),
    )
    _, ids, _, state, _, lengths, scores = ops.while_loop(cond, body, loop_vars)
    if pad_id != 0:
        ids = ops.where(positions[None, :] < lengths[:, None], ids, pad_id)
    if num_samples is not None:
        ids = ops.reshape(ids, (-1, samples, max_length))
        lengths = ops.reshape(lengths, (-1, samples))
        scores = ops.reshape(scores, (-1, samples))
    return ids, lengths, scores, state
