from keras import ops

from seqtasks.decoding.settings import MAX_NGRAM_SIZE

_NEG = -1e9


def tile_beams(structure, beam_width):
    """Repeats every tensor's batch entries `beam_width` times: `(batch, ...)` -> `(batch * beam, ...)`.

    Entry `b * beam_width + k` is beam `k` of batch entry `b`, the layout
    `beam_search` expects of its state and of anything its step function
    closes over (such as the encoder outputs).
    """
    from keras import tree

    return tree.map_structure(lambda x: ops.repeat(x, beam_width, axis=0), structure)


def _row_top_k(rows, k, chunk=64):
    """`top_k` of each row of `rows` `(n, size)` through chunk maxima: exact, and faster here.

    Each row is cut into chunks of `chunk` entries. Any of a row's `k`
    largest entries lies in one of the `k` chunks with the largest maxima, so
    only those chunks are searched. Returns `(values, indices, row_max)`:
    `(n, k)`, `(n, k)` int32 and `(n, 1)`.
    """
    size = rows.shape[-1]
    count = -(-size // chunk)
    k_chunks = min(k, count)
    rows = ops.pad(rows, [(0, 0), (0, count * chunk - size)], constant_values=-1e30)
    chunks = ops.reshape(rows, (-1, chunk))
    maxima = ops.reshape(ops.max(chunks, axis=-1), (-1, count))
    chunk_max, chunk_index = ops.top_k(maxima, k=k_chunks)
    chunk_index = ops.cast(chunk_index, "int32")
    row_offsets = ops.expand_dims(ops.arange(ops.shape(maxima)[0], dtype="int32") * count, 1)
    candidates = ops.take(chunks, ops.reshape(chunk_index + row_offsets, (-1,)), axis=0)
    values, within = ops.top_k(ops.reshape(candidates, (-1, k_chunks * chunk)), k=k)
    within = ops.cast(within, "int32")
    indices = ops.take_along_axis(chunk_index, within // chunk, axis=-1) * chunk + within % chunk
    return values, indices, chunk_max[:, :1]


def _float32(value):
    # Scores stay float32 whatever the global floatx: -1e9 is -inf in float16.
    return ops.convert_to_tensor(value, dtype="float32")


def length_penalty(lengths, alpha):
    """GNMT length penalty `((5 + length) / 6) ** alpha` (Wu et al., 2016)."""
    return ops.power((5.0 + ops.cast(lengths, "float32")) / 6.0, alpha)


def coverage_penalty(accumulated_attention, beta):
    """GNMT coverage penalty `beta * sum_i log(min(sum_j p_ij, 1))` over source positions i.

    `accumulated_attention` `(..., source_length)` holds each source
    position's attention weights summed over the decoded steps j. Positions
    with a sum of exactly 0 (padding, which attention masks) count as fully
    covered, as tfa.seq2seq counts them. The penalty is 0 or negative for
    `beta >= 0`. Returns float32 `(...)`.
    """
    covered = ops.cast(accumulated_attention, "float32")
    covered = ops.where(ops.equal(covered, 0.0), _float32(1.0), ops.minimum(covered, 1.0))
    return ops.cast(beta, "float32") * ops.sum(ops.log(covered), axis=-1)


# The largest n a tensor `no_repeat_ngram_size` may be: one graph serves every n up to it.
NGRAM_LIMIT = MAX_NGRAM_SIZE


def repeated_ngram_bans(ids, step, ngram_size, vocab_size):
    """Which next tokens would repeat an n-gram of each row: bool `(rows, vocab_size)`.

    `ids` `(rows, max_length)` holds the tokens produced so far at positions
    `0 .. step - 1`; the next token goes at `step`. Token w is banned where
    the last `ngram_size - 1` tokens followed by w already occur in the row
    (with `ngram_size=1`, every token already produced is banned; with 0,
    none). `ngram_size` is an int, or an int scalar tensor of at most
    `NGRAM_LIMIT`.
    """
    ids = ops.cast(ids, "int32")
    step = ops.convert_to_tensor(step, dtype="int32")
    rows, max_length = ops.shape(ids)[0], ops.shape(ids)[1]
    static = isinstance(ngram_size, int)
    prefix = ngram_size - 1
    longest_prefix = prefix if static else NGRAM_LIMIT - 1
    padded = ops.pad(ids, [(0, 0), (0, max(longest_prefix, 0))], constant_values=-1)
    starts = ops.arange(max_length, dtype="int32")
    # An earlier n-gram starts at s with s + ngram_size - 1 <= step - 1.
    matches = ops.expand_dims(ops.logical_and(starts <= step - ngram_size, ops.greater(ngram_size, 0)), 0)
    for offset in range(longest_prefix):
        suffix_token = ops.take(ids, ops.clip(step - prefix + offset, 0, max_length - 1), axis=1)
        same = ops.equal(padded[:, offset : offset + max_length], ops.expand_dims(suffix_token, 1))
        if not static:
            same = ops.logical_or(same, offset >= prefix)  # past this n's prefix
        matches = ops.logical_and(matches, same)
    following = ops.take(padded, ops.maximum(starts + prefix, 0), axis=1)
    matches = ops.logical_and(matches, following >= 0)
    row_index = ops.repeat(ops.expand_dims(ops.arange(rows, dtype="int32"), 1), max_length, axis=1)
    indices = ops.stack([ops.reshape(row_index, (-1,)), ops.reshape(ops.maximum(following, 0), (-1,))], axis=1)
    counts = ops.scatter(indices, ops.reshape(ops.cast(matches, "float32"), (-1,)), (rows, vocab_size))
    return counts > 0


def _check_preferences(coverage_penalty_weight, coverage_fn, no_repeat_ngram_size):
    if isinstance(coverage_penalty_weight, (int, float)):
        if not coverage_penalty_weight >= 0:
            raise ValueError(
                f"Expected coverage_penalty_weight >= 0. Received: coverage_penalty_weight={coverage_penalty_weight}"
            )
        if coverage_penalty_weight > 0 and coverage_fn is None:
            raise ValueError(
                "A coverage penalty needs `coverage_fn(state)`, the attention weights summed over the "
                f"decoded steps. Received: coverage_penalty_weight={coverage_penalty_weight}, coverage_fn=None"
            )
    if isinstance(no_repeat_ngram_size, (bool, float)) or (
        isinstance(no_repeat_ngram_size, int) and no_repeat_ngram_size < 0
    ):
        raise ValueError(
            "Expected no_repeat_ngram_size to be an int >= 0 (0: no blocking). "
            f"Received: no_repeat_ngram_size={no_repeat_ngram_size!r}"
        )


def beam_search(
    step_fn,
    state,
    start_ids,
    end_id,
    max_length,
    beam_width,
    alpha=0.0,
    pad_id=0,
    n_best=None,
    coverage_penalty_weight=0.0,
    coverage_fn=None,
    no_repeat_ngram_size=0,
):
    """Beam search for a whole batch in one graph loop (`keras.ops.while_loop`).

    Every step expands each live hypothesis by every token, scores the
    candidates by their summed log-probability divided by the GNMT length
    penalty of their length without the end token (Wu et al. and
    tfa.seq2seq count it so), and keeps the best `beam_width` per batch
    entry. A hypothesis
    that produced `end_id` keeps its score and length. The loop stops after
    `max_length` steps, or once every batch entry's best hypothesis has ended
    and no live one could still overtake it (which returns what searching on
    would). With `beam_width=1` it returns what `greedy_search` returns.
    With `n_best=K`, it returns the K best hypotheses of each batch entry,
    best first, and waits until none of them can still be passed.

    Args:
        step_fn: `step_fn(ids, state) -> (logits, state)` on `batch * beam`
            rows: `ids` `(batch * beam,)`, logits `(batch * beam, vocab)`.
        state: the initial state, already tiled with `tile_beams`.
        start_ids: `(batch,)` int, the first input of every sequence.
        end_id: int, the id that ends a hypothesis.
        max_length: int, most tokens to produce (including `end_id`).
        beam_width: int >= 1.
        alpha: float >= 0, the length penalty's exponent (0: none; larger
            favours longer outputs).
        pad_id: int, written after a hypothesis has ended.
        n_best: None, or an int in 1..beam_width: return that many
            hypotheses per batch entry (an axis of size `n_best` after the
            batch axis of `ids`, `lengths` and `scores`).
        coverage_penalty_weight: float >= 0, GNMT's beta: a hypothesis that
            ends adds `coverage_penalty(coverage_fn(state), beta)` to its
            score, with the state of the step that produced `end_id`, so
            outputs that leave source words unattended rank lower (0: none).
        coverage_fn: `coverage_fn(state) -> (batch * beam, source_length)`,
            the attention weights summed over the decoded steps so far
            (the step function accumulates them in its state). Needed when
            the coverage penalty is not 0.
        no_repeat_ngram_size: int >= 0; N > 0 gives any token that would
            repeat an N-gram already in its hypothesis a log-probability of
            -1e9, so it is never chosen while another token can be (0: none;
            a tensor: at most `NGRAM_LIMIT`).

    Under TensorFlow, `max_length`, `beam_width`, `alpha`, `n_best`,
    `coverage_penalty_weight` and `no_repeat_ngram_size` may also be scalar
    tensors (one graph for any setting, as an export's
    `with_settings` signature takes them); they are then not checked here.

    Returns:
        `(ids, lengths, scores, state)` of the best hypothesis of each batch
        entry (of its `n_best` best, but the state of the best alone): `ids` `(batch, max_length)` int32 (`end_id` then `pad_id`
        after the end), `lengths` `(batch,)` tokens produced, `end_id`
        included, `scores` `(batch,)` float32 log-probability divided by the
        length penalty of the length without `end_id` (plus the coverage
        penalty of a hypothesis that ended), and that hypothesis' last state
        `(batch, ...)`.

    Reference:
        Wu et al., "Google's Neural Machine Translation System", 2016, §7.
    """
    from keras import tree

    # Tensors (an export's per-request settings) are checked by whoever made them.
    static = isinstance(beam_width, int) and (n_best is None or isinstance(n_best, int))
    if static and beam_width < 1:
        raise ValueError(f"Expected beam_width >= 1. Received: beam_width={beam_width}")
    if static and n_best is not None and not 1 <= n_best <= beam_width:
        raise ValueError(f"Expected n_best in 1..beam_width={beam_width}. Received: n_best={n_best}")
    _check_preferences(coverage_penalty_weight, coverage_fn, no_repeat_ngram_size)
    covers = coverage_fn is not None and not (
        isinstance(coverage_penalty_weight, (int, float)) and coverage_penalty_weight == 0
    )
    blocks = not (isinstance(no_repeat_ngram_size, int) and no_repeat_ngram_size == 0)
    width = beam_width
    kept = 1 if n_best is None else n_best
    start_ids = ops.cast(start_ids, "int32")
    batch_size = ops.shape(start_ids)[0]
    positions = ops.arange(max_length, dtype="int32")
    batch_offsets = ops.expand_dims(ops.arange(batch_size, dtype="int32") * width, 1)

    def gather(x, flat_index):
        return ops.take(x, flat_index, axis=0)

    def cond(step, ids, last, state, finished, lengths, scores, penalties):
        # Log-probabilities only fall and the penalty is largest at `max_length`,
        # so `score / penalty(max_length)` bounds what a live hypothesis can
        # still reach. An entry is done once its `kept` best hypotheses have ended
        # and no live one can pass the last of them: stopping then changes no result.
        # A coverage penalty is never positive, so it only lowers what a live one can reach.
        last_kept = scores[:, kept - 1] / length_penalty(lengths[:, kept - 1] - 1, alpha)  # read once ended
        last_kept = last_kept + penalties[:, kept - 1]
        reachable = ops.where(finished, _float32(-float("inf")), scores / length_penalty(max_length, alpha))
        done = ops.logical_and(ops.all(finished[:, :kept], axis=1), last_kept >= ops.max(reachable, axis=1))
        return ops.logical_and(step < max_length, ops.logical_not(ops.all(done)))

    def body(step, ids, last, state, finished, lengths, scores, penalties):
        logits, state = step_fn(ops.reshape(last, (-1,)), state)
        logits = ops.cast(logits, "float32")
        model_logits = logits
        if blocks:
            flat_ids = ops.reshape(ids, (batch_size * width, -1))
            bans = repeated_ngram_bans(flat_ids, step, no_repeat_ngram_size, ops.shape(logits)[-1])
            logits = ops.where(bans, _float32(_NEG), logits)
        # Each hypothesis' best `width` tokens hold the batch entry's best
        # `width` extensions, so only those candidates (not the whole
        # vocabulary) are normalised, scored and ranked.
        if logits.shape[-1] is None or not isinstance(width, int):
            # The vocabulary may be smaller than the beam: `width` columns more, that no real token
            # can lose to, let top_k take `width`; picked, they are `end_id` with a score of _NEG.
            vocab_size = ops.shape(logits)[-1]
            per_row = width
            row_top, row_tokens = ops.top_k(ops.pad(logits, [[0, 0], [0, width]], constant_values=_NEG), k=per_row)
            row_tokens = ops.where(row_tokens < vocab_size, row_tokens, end_id)
            row_max = row_top[:, :1]
        else:
            per_row = min(width, logits.shape[-1])
            row_top, row_tokens, row_max = _row_top_k(logits, per_row)
        if blocks:
            # A banned token is ruled out, not taken out of the model's distribution.
            row_max = ops.max(model_logits, axis=-1, keepdims=True)
        log_normalizer = row_max + ops.log(ops.sum(ops.exp(model_logits - row_max), axis=-1, keepdims=True))
        row_log_probs = ops.reshape(row_top - log_normalizer, (batch_size, width, per_row))
        row_tokens = ops.reshape(ops.cast(row_tokens, "int32"), (batch_size, width, per_row))
        # An ended hypothesis has one candidate: `end_id`, at no cost.
        first = ops.arange(per_row, dtype="int32") == 0
        ended = ops.where(first, _float32(0.0), _float32(_NEG))
        row_log_probs = ops.where(ops.expand_dims(finished, -1), ended, row_log_probs)
        row_tokens = ops.where(ops.expand_dims(finished, -1), end_id, row_tokens)
        totals = ops.expand_dims(scores, -1) + row_log_probs
        new_lengths = lengths + ops.cast(ops.logical_not(finished), "int32")
        # GNMT's |Y| leaves out the end token (as tfa.seq2seq): a candidate that ends is scored
        # by the length before it, also on the step it is chosen.
        scored_lengths = ops.expand_dims(new_lengths, -1) - ops.cast(ops.equal(row_tokens, end_id), "int32")
        normalized = totals / length_penalty(scored_lengths, alpha)
        if covers:
            # Scored once, on the step a hypothesis ends; an ended one keeps its penalty.
            ending = coverage_penalty(coverage_fn(state), coverage_penalty_weight)
            ending = ops.where(ops.equal(row_tokens, end_id), ops.reshape(ending, (batch_size, width, 1)), 0.0)
            candidate_penalties = ops.where(ops.expand_dims(finished, -1), ops.expand_dims(penalties, -1), ending)
            normalized = normalized + candidate_penalties
        _, top_indices = ops.top_k(ops.reshape(normalized, (batch_size, -1)), k=width)
        top_indices = ops.cast(top_indices, "int32")
        origin = top_indices // per_row
        token = ops.take_along_axis(ops.reshape(row_tokens, (batch_size, -1)), top_indices, axis=1)
        flat_origin = ops.reshape(origin + batch_offsets, (-1,))

        was_finished = ops.take_along_axis(finished, origin, axis=1)
        scores = ops.take_along_axis(ops.reshape(totals, (batch_size, -1)), top_indices, axis=1)
        lengths = ops.take_along_axis(new_lengths, origin, axis=1)
        written = ops.where(was_finished, pad_id, token)
        ids = ops.take_along_axis(ids, ops.expand_dims(origin, -1), axis=1)
        at_step = ops.cast(ops.equal(positions, step), "int32")
        ids = ids + ops.expand_dims(written, -1) * at_step
        finished = ops.logical_or(was_finished, ops.equal(token, end_id))
        if covers:
            penalties = ops.take_along_axis(ops.reshape(candidate_penalties, (batch_size, -1)), top_indices, axis=1)
        state = tree.map_structure(lambda x: gather(x, flat_origin), state)
        return step + 1, ids, written, state, finished, lengths, scores, penalties

    initial_scores = ops.tile(
        ops.expand_dims(ops.where(ops.arange(width, dtype="int32") == 0, _float32(0.0), _float32(_NEG)), 0),
        (batch_size, 1),
    )
    loop_vars = (
        ops.convert_to_tensor(0, dtype="int32"),
        ops.zeros((batch_size, width, max_length), dtype="int32"),
        ops.repeat(ops.expand_dims(start_ids, 1), width, axis=1),
        state,
        ops.zeros((batch_size, width), dtype="bool"),
        ops.zeros((batch_size, width), dtype="int32"),
        initial_scores,
        ops.zeros((batch_size, width), dtype="float32"),
    )
    _, ids, _, state, finished, lengths, scores, penalties = ops.while_loop(cond, body, loop_vars)
    # Hypotheses are kept sorted by normalized score: beam 0 is the best.
    best = ops.reshape(batch_offsets, (-1,))
    ids, lengths, finished = ids[:, :kept], lengths[:, :kept], finished[:, :kept]
    if pad_id != 0:
        ids = ops.where(positions < ops.expand_dims(lengths, -1), ids, pad_id)
    normalized = scores[:, :kept] / length_penalty(lengths - ops.cast(finished, "int32"), alpha) + penalties[:, :kept]
    if n_best is None:
        ids, lengths, normalized = ids[:, 0], lengths[:, 0], normalized[:, 0]
    return ids, lengths, normalized, tree.map_structure(lambda x: gather(x, best), state)
