"""The search of an encoder-decoder model, and its forced decoding: the entry point every task decodes through."""

from seqtasks.text.special_ids import END_ID, PAD_ID, START_ID


def search(model, inputs, settings, prefix=None, lists=False):
    """The one search of every encoder-decoder evaluation and export: encode, tile the beams, step, search.

    `model` gives `encode(inputs) -> (cache, state)` and
    `decode_step(ids, state, cache) -> (logits, state, weights)`.
    `settings` holds the decoding settings (`seqtasks.decoding.settings`):
    a recipe's `model.decoding` (Python numbers), or a mapping of some of
    them (the rest take their defaults), Python numbers or scalar tensors
    (a request's, read by `seqtasks.encoder_decoder.settings_inputs`).

    A beam width of 1 is greedy search: a Python 1 runs `greedy_search`, a
    tensor runs `beam_search`, which at width 1 returns the same ids,
    lengths and scores. Scores are log-probabilities divided by the GNMT
    length penalty of the length without the end token, for both searches;
    beam search adds GNMT's coverage penalty (the attention weights summed
    over the decoded steps) to a hypothesis that ends, and blocks repeated
    n-grams (greedy search runs as a beam of width 1 when either is asked
    for). `num_samples` K > 0 draws K samples per input instead of
    searching (`seqtasks.decoding.sampling_search`), scored as the search
    scores its hypotheses, best first; K 0 searches.

    `prefix` `(batch, P)` ids (`PAD_ID` after each row's tokens), when
    given, are forced: every output starts with its row's prefix and the
    search (or sampling) continues it. The forced tokens count in an
    output's length but not in its score, the log-probability of the rest
    given the prefix (the same for every hypothesis of an input).

    A `length_factor` above 0 ends each output of a model that reads token
    ids (`inputs` integer, `PAD_ID` after each row's tokens) after at most
    `ceil(length_factor * (source tokens + 1))` tokens, its end token
    included (and its prefix's tokens, which it never cuts): the end token is
    forced there, with the log-probability 0. Under TensorFlow the loop then
    runs no longer than the longest row's bound.

    Returns `(ids, lengths, scores)`: the best hypothesis, `ids`
    `(batch, time)`; with `lists`, the `n_best` best, best first, `ids`
    `(batch, n_best, time)`, `lengths` and `scores` `(batch, n_best)`.
    """
    import keras
    from keras import ops

    from seqtasks.decoding.settings import values_of

    v = values_of(settings)
    n_best = v["n_best"] if lists else None

    # Encoded once, before any branch: a graph that may search or sample holds one encoder, not two.
    encoded = model.encode(inputs)
    caps = output_caps(inputs, v["length_factor"], v["max_length"], prefix)
    max_length = v["max_length"]
    if caps is not None and keras.config.backend() == "tensorflow":
        max_length = ops.minimum(max_length, ops.max(caps))

    def searched():
        return _search(model, inputs, encoded, v["beam_width"], max_length, v["length_penalty"], n_best,
                       v["coverage_penalty"], v["no_repeat_ngram_size"], prefix, caps)

    def sampled():
        return _sample(model, inputs, encoded, {**v, "max_length": max_length}, n_best, prefix, caps)

    samples = v["num_samples"]
    if isinstance(samples, int):
        return sampled() if samples > 0 else searched()
    return ops.cond(samples > 0, sampled, searched)


def _is(value, number):
    return isinstance(value, (int, float)) and value == number


def output_caps(inputs, length_factor, max_length, prefix=None):
    """Each row's most output tokens, `(batch,)` int32: `ceil(length_factor * (source tokens + 1))`, at least the
    prefix's tokens + 1; `max_length + 1` (no bound: the search stops at `max_length` without an end token) where
    that is more, or where a tensor factor is 0. None where `length_factor` is a Python 0 or `inputs` are not
    token ids."""
    import keras
    from keras import ops

    if _is(length_factor, 0) or "int" not in keras.backend.standardize_dtype(inputs.dtype) or len(inputs.shape) != 2:
        return None
    lengths = ops.sum(ops.cast(ops.not_equal(inputs, PAD_ID), "float32"), axis=1)
    factor = ops.cast(length_factor, "float32")
    caps = ops.cast(ops.ceil(factor * (lengths + 1.0)), "int32")
    unbounded = ops.cast(max_length, "int32") + 1
    caps = ops.where(factor > 0, caps, unbounded)
    if prefix is not None:
        caps = ops.maximum(caps, ops.sum(ops.cast(ops.not_equal(prefix, PAD_ID), "int32"), axis=1) + 1)
    return ops.minimum(caps, unbounded)


def capped(step, caps, copies):
    """`step(ids, state) -> (logits, state)` that writes `END_ID` as each row's `caps`-th token, and its state's
    extra part: pass `(state, counts)`, with `counts` the returned zeros. `caps` `(batch,)` is repeated `copies`
    times per row (`tile_beams`' layout)."""
    from keras import ops

    from seqtasks.decoding import tile_beams

    caps = tile_beams(ops.cast(caps, "int32"), copies)

    def step_capped(ids, state):
        inner, counts = state
        logits, inner = step(ids, inner)
        logits = ops.cast(logits, "float32")
        others = ops.not_equal(ops.arange(ops.shape(logits)[-1], dtype="int32"), END_ID)
        ending = ops.expand_dims(counts + 1 >= caps, 1)
        return ops.where(ops.logical_and(ending, ops.expand_dims(others, 0)), -1e9, logits), (inner, counts + 1)

    return step_capped, ops.zeros_like(caps)


def forced(step, prefix, copies):
    """`step(ids, state) -> (logits, state)` whose first tokens are `prefix`'s, and its state's extra part.

    `prefix` `(batch, P)` is repeated `copies` times per row (the beams or
    samples, `tile_beams`' layout); while a row's prefix lasts, every other
    token's logit is -1e9, so any search writes the prefix token (with the
    log-probability 0 after the searches' log-softmax). The wrapped step
    keeps the step count per row in its state: pass `(state, counts)`, with
    `counts` the returned zeros.
    """
    from keras import ops

    from seqtasks.decoding import tile_beams

    prefix = ops.cast(prefix, "int32")
    prefix = ops.pad(prefix, [[0, 0], [0, 1]], constant_values=PAD_ID)  # at least one column
    prefix = tile_beams(prefix, copies)
    lengths = ops.sum(ops.cast(ops.not_equal(prefix, PAD_ID), "int32"), axis=1)
    last = ops.shape(prefix)[1] - 1

    def step_forced(ids, state):
        inner, counts = state
        logits, inner = step(ids, inner)
        logits = ops.cast(logits, "float32")
        wanted = ops.take_along_axis(prefix, ops.expand_dims(ops.minimum(counts, last), 1), axis=1)[:, 0]
        others = ops.not_equal(ops.expand_dims(ops.arange(ops.shape(logits)[-1], dtype="int32"), 0),
                               ops.expand_dims(wanted, 1))
        forcing = ops.expand_dims(counts < lengths, 1)
        return ops.where(ops.logical_and(forcing, others), -1e9, logits), (inner, counts + 1)

    return step_forced, ops.zeros_like(lengths)


def _search(model, inputs, encoded, beam_width, max_length, length_penalty, n_best, coverage_penalty,
            no_repeat_ngram_size, prefix=None, caps=None):
    from keras import ops

    from seqtasks.decoding import beam_search, greedy_search, tile_beams

    cache, state = encoded
    start = ops.full((ops.shape(inputs)[0],), START_ID, dtype="int32")
    # A decoder without attention has no weights to sum (its settings reader refuses a coverage penalty).
    mask = model.memory_mask(cache) if hasattr(model, "memory_mask") else _memory_mask(cache)
    covers = not _is(coverage_penalty, 0) and mask is not None
    greedy = _is(beam_width, 1) and not covers and _is(no_repeat_ngram_size, 0)
    if covers:
        # The attention weights summed over the decoded steps ride along in the state; padding stays 0.
        state = (state, ops.zeros_like(ops.cast(mask, "float32")))
    if not greedy:
        cache, state = tile_beams((cache, state), beam_width)

    def step(ids, state):
        if not covers:
            logits, state, _ = model.decode_step(ids, state, cache)
            return logits, state
        inner, covered = state
        logits, inner, weights = model.decode_step(ids, inner, cache)
        return logits, (inner, covered + ops.cast(weights, "float32"))

    coverage_fn = (lambda state: state[1]) if covers else None
    if prefix is not None:
        step, counts = forced(step, prefix, 1 if greedy else beam_width)
        state = (state, counts)
        coverage_fn = (lambda state: state[0][1]) if covers else None
    if caps is not None:
        step, counts = capped(step, caps, 1 if greedy else beam_width)
        state = (state, counts)
        if covers:
            inner_coverage = coverage_fn
            coverage_fn = lambda state: inner_coverage(state[0])  # noqa: E731
    if not greedy:
        return beam_search(
            step, state, start, END_ID, max_length, beam_width, alpha=length_penalty, n_best=n_best,
            coverage_penalty_weight=coverage_penalty, coverage_fn=coverage_fn,
            no_repeat_ngram_size=no_repeat_ngram_size,
        )[:3]
    ids, lengths, scores = greedy_search(step, state, start, END_ID, max_length)[:3]
    scores = _length_normalised(ids, lengths, scores, length_penalty)
    if n_best is None:
        return ids, lengths, scores
    return ops.expand_dims(ids, 1), ops.expand_dims(lengths, 1), ops.expand_dims(scores, 1)


def _memory_mask(cache):
    """The source mask of an attention decoder's cache `(keys, values, mask)`; None for one without attention."""
    return cache[2] if isinstance(cache, (tuple, list)) and len(cache) == 3 else None


def _sample(model, inputs, encoded, v, n_best, prefix=None, caps=None):
    from keras import ops

    from seqtasks.decoding import sampling_search, tile_beams

    samples, max_length, length_penalty = v["num_samples"], v["max_length"], v["length_penalty"]
    cache, state = tile_beams(encoded, samples)
    start = ops.full((ops.shape(inputs)[0],), START_ID, dtype="int32")

    def step(ids, state):
        logits, state, _ = model.decode_step(ids, state, cache)
        return logits, state

    if prefix is not None:
        step, counts = forced(step, prefix, samples)
        state = (state, counts)
    if caps is not None:
        step, counts = capped(step, caps, samples)
        state = (state, counts)
    ids, lengths, scores, _ = sampling_search(
        step, state, start, END_ID, max_length, num_samples=samples, temperature=v["temperature"],
        top_k=v["top_k"], top_p=v["top_p"], seed=v["seed"],
    )
    width = ops.shape(ids)[2]
    scores = _length_normalised(ops.reshape(ids, (-1, width)), ops.reshape(lengths, (-1,)), ops.reshape(scores, (-1,)),
                                length_penalty)
    scores = ops.reshape(scores, ops.shape(lengths))
    # Best first, as the n-best of a search.
    order = ops.cast(ops.argsort(-scores, axis=1), "int32")
    scores = ops.take_along_axis(scores, order, axis=1)
    lengths = ops.take_along_axis(lengths, order, axis=1)
    ids = ops.take_along_axis(ids, ops.broadcast_to(ops.expand_dims(order, -1), ops.shape(ids)), axis=1)
    if n_best is None:
        return ids[:, 0], lengths[:, 0], scores[:, 0]
    return ids[:, :n_best], lengths[:, :n_best], scores[:, :n_best]


def score_ids(model, inputs, target_ids, length_penalty=0.0):
    """Forced decoding: the log-probabilities `model` gives the targets `target_ids` of `inputs`.

    `target_ids` `(batch, T)`: each row the output tokens then `END_ID`,
    `PAD_ID` after (as the searches return them). The model reads each row
    from `START_ID` (teacher forcing, inference mode). Returns
    `(token_log_probs, log_prob, score)`: `(batch, T)` float32, 0 on padding;
    their sum `(batch,)`; and that sum divided by the GNMT length penalty of
    the length without the end token, the score `search` gives a hypothesis
    (without a coverage penalty).
    """
    from keras import ops

    target_ids = ops.cast(target_ids, "int32")
    start = ops.full((ops.shape(target_ids)[0], 1), START_ID, dtype="int32")
    target_in = ops.concatenate([start, target_ids[:, :-1]], axis=1)
    log_probs = token_log_probs(model, (inputs, target_in), training=False)
    tokens = ops.take_along_axis(log_probs, ops.expand_dims(target_ids, -1), axis=-1)[..., 0]
    kept = ops.not_equal(target_ids, PAD_ID)
    tokens = ops.where(kept, tokens, 0.0)
    total = ops.sum(tokens, axis=1)
    lengths = ops.sum(ops.cast(kept, "int32"), axis=1)
    return tokens, total, _length_normalised(target_ids, lengths, total, length_penalty)


def token_log_probs(model, inputs, training=None):
    """`(batch, T, vocab)` float32 log-probabilities a decoding model gives each target token (teacher forcing):
    the log-softmax of its logits, or of an ensemble's `log_probs` (the geometric mean of its members'
    distributions, renormalised; its call may stack the members' logits instead)."""
    from keras import ops

    scores = model.log_probs(inputs, training=training) if hasattr(model, "log_probs") else model(inputs, training=training)
    return ops.log_softmax(ops.cast(scores, "float32"), axis=-1)


def _length_normalised(ids, lengths, scores, alpha):
    """Greedy scores as beam search scores them: divided by the length penalty of the length without `END_ID`."""
    from keras import ops

    from seqtasks.decoding import length_penalty

    if isinstance(alpha, (int, float)) and alpha == 0:
        return scores
    last = ops.take_along_axis(ids, ops.expand_dims(ops.maximum(lengths - 1, 0), 1), axis=1)[:, 0]
    counted = lengths - ops.cast(ops.equal(last, END_ID), "int32")
    return scores / length_penalty(counted, alpha)
