import keras
import numpy as np
from keras import ops

from seqtasks.layers._validation import check_positive_int, clone_initializer

# The score of a forbidden transition or start in decoding: such a path can never be the best.
FORBIDDEN = float("-inf")


def iob2_constraints(tags):
    """The `CRF` arguments that allow only valid IOB2 paths over the tag names `tags`.

    An `I-X` may follow only `B-X` or `I-X`, and may not start a sentence;
    `O` and every `B-X` may go anywhere.

    Args:
        tags: list of str, the tag of each tag id: `"O"`, `"B-TYPE"` or
            `"I-TYPE"`.

    Returns:
        A dict with `allowed_transitions` (`num_tags` lists of `num_tags`
        bools, `[from][to]`) and `allowed_starts` (`num_tags` bools), to pass
        to `CRF` or `SequenceTagger` as keyword arguments.

    Example:

    >>> iob2_constraints(["O", "B-PER", "I-PER"])["allowed_starts"]
    [True, True, False]
    """
    for index, tag in enumerate(tags):
        if not isinstance(tag, str) or not (tag == "O" or (tag[:2] in ("B-", "I-") and len(tag) > 2)):
            raise ValueError(f"Expected IOB2 tags: 'O', 'B-TYPE' or 'I-TYPE'. Received: tags[{index}]={tag!r}")

    def allowed(previous, tag):
        return not tag.startswith("I-") or previous in ("B-" + tag[2:], tag)

    return {
        "allowed_transitions": [[allowed(previous, tag) for tag in tags] for previous in tags],
        "allowed_starts": [not tag.startswith("I-") for tag in tags],
    }


def _check_booleans(value, shape, name):
    """`value` as nested lists of Python bools, after checking it is `None` or booleans of `shape`."""
    if value is None:
        return None
    try:
        array = np.asarray(value)
    except ValueError:
        array = None
    if array is None or array.dtype != bool or array.shape != shape:
        received = "ragged" if array is None else f"{array.dtype} of shape {array.shape}"
        raise ValueError(f"Expected booleans of shape {shape}. Received: {name} {received}")
    return array.tolist()


def check_constraints(num_tags, allowed_transitions, allowed_starts):
    """`(allowed_transitions, allowed_starts)` as nested lists of bools (or `None`), checked as `CRF` needs them."""
    allowed_transitions = _check_booleans(allowed_transitions, (num_tags, num_tags), "allowed_transitions")
    allowed_starts = _check_booleans(allowed_starts, (num_tags,), "allowed_starts")
    if allowed_starts is not None and not any(allowed_starts):
        raise ValueError("Expected at least one tag that may start a sequence. Received: allowed_starts all False")
    if allowed_transitions is not None:
        # Then a path of every length exists from any allowed start.
        stuck = [tag for tag, row in enumerate(allowed_transitions) if not any(row)]
        if stuck:
            raise ValueError(
                "Expected every tag to have at least one allowed next tag. "
                f"Received: allowed_transitions[{stuck[0]}] all False"
            )
    return allowed_transitions, allowed_starts


def _time_major(potentials, mask):
    potentials = ops.cast(potentials, "float32")
    if mask is None:
        mask = ops.ones(ops.shape(potentials)[:2], dtype="bool")
    mask = ops.cast(mask, "bool")
    # One padded step more, so the scans over steps 1.. never run zero times
    # (TensorFlow cannot stack an empty list of unknown batch size).
    potentials = ops.pad(potentials, ((0, 0), (0, 1), (0, 0)))
    mask = ops.pad(mask, ((0, 0), (0, 1)), constant_values=False)
    return ops.transpose(potentials, (1, 0, 2)), ops.transpose(mask, (1, 0))


def _joined(steps, step_mask):
    # One scanned tensor: Keras' TensorFlow scan fails on several inputs
    # when the number of steps is unknown while tracing.
    return ops.concatenate([steps, ops.expand_dims(ops.cast(step_mask, steps.dtype), -1)], axis=-1)


def _split(inputs):
    return inputs[:, :-1], inputs[:, -1] > 0.5


def viterbi_decode(potentials, mask, transitions, start_scores, end_scores):
    """The best tag path and its score, by Viterbi decoding (`keras.ops` only).

    Args:
        potentials: `(batch, time, num_tags)` float tag scores.
        mask: `(batch, time)` bool, `False` at padding (at the end), or `None`.
        transitions: `(num_tags, num_tags)` float32 scores, `[from, to]`;
            `FORBIDDEN` (-inf) where a transition may never be taken.
        start_scores, end_scores: `(num_tags,)` float32 scores of the first and
            last tag; `FORBIDDEN` where a tag may not start (or end) a path.

    Returns:
        `(tags, score)`: `(batch, time)` int32, 0 at padding, and `(batch,)`
        float32. As long as some path avoids every forbidden score, the best
        path does: a forbidden candidate never wins a maximum.
    """
    num_tags = ops.shape(transitions)[0]
    steps, step_mask = _time_major(potentials, mask)
    identity = ops.expand_dims(ops.arange(num_tags, dtype="int32"), 0)

    def forward(best, inputs):
        emission, keep = _split(inputs)
        scores = ops.expand_dims(best, 2) + transitions
        pointers = ops.cast(ops.argmax(scores, axis=1), "int32")
        keep = ops.expand_dims(keep, 1)
        # Padded steps carry the scores through and point every tag at itself.
        best = ops.where(keep, ops.max(scores, axis=1) + emission, best)
        # Keras' TensorFlow scan gives the outputs the carry's dtype, so the
        # pointers (small integers, exact in float32) travel as floats.
        return best, ops.cast(ops.where(keep, pointers, identity), "float32")

    best, pointers = ops.scan(forward, start_scores + steps[0], _joined(steps[1:], step_mask[1:]))
    pointers = ops.cast(pointers, "int32")
    final = best + end_scores
    score = ops.max(final, axis=1)
    last = ops.cast(ops.argmax(final, axis=1), "int32")

    def backward(tag, step_pointers):
        previous = ops.take_along_axis(step_pointers, ops.expand_dims(tag, 1), axis=1)[:, 0]
        return previous, previous

    _, earlier = ops.scan(backward, last, pointers, reverse=True)
    tags = ops.transpose(ops.concatenate([earlier, ops.expand_dims(last, 0)], axis=0), (1, 0))
    tags = ops.where(ops.transpose(step_mask, (1, 0)), tags, ops.zeros_like(tags))
    return tags[:, :-1], score


def _forward_log_alphas(steps, step_mask, transitions, start_scores, end_scores):
    """`(first, later, log_partition)`: the forward log-sums of time-major `steps` (`_time_major`), at the
    first step `(batch, num_tags)` and at each later one `(time, batch, num_tags)` (padding carries them
    on), and log Z `(batch,)`."""

    def forward(log_alpha, inputs):
        emission, keep = _split(inputs)
        scores = ops.logsumexp(ops.expand_dims(log_alpha, 2) + transitions, axis=1) + emission
        log_alpha = ops.where(ops.expand_dims(keep, 1), scores, log_alpha)
        return log_alpha, log_alpha

    first = start_scores + steps[0]
    log_alpha, later = ops.scan(forward, first, _joined(steps[1:], step_mask[1:]))
    return first, later, ops.logsumexp(log_alpha + end_scores, axis=1)


def segment_log_probs(potentials, mask, transitions, start_scores, end_scores, tags, starts, continuation):
    """The log probability of each segment of a tag path, ending where it does (`keras.ops` only).

    The distribution is the CRF's over the paths of finite score: a path's
    probability is `exp(score) / Z`, `Z` summed over those paths only, so
    forbidden moves have probability 0. At each real position `t`, with `s`
    the latest position `<= t` where `starts` is true (0 if none), the
    result is `log P(y[s..t] == tags[s..t] and y[t+1] != continuation[tags[t]])`;
    at the last real position the path ends, and only the first condition
    remains. Read at a segment's last position, it is the log probability
    that the segment (an entity span) is exactly right, computed from
    forward and backward log-sums like `Z`.

    Args:
        potentials: `(batch, time, num_tags)` float tag scores.
        mask: `(batch, time)` bool, `False` at padding (at the end), or `None`.
        transitions: `(num_tags, num_tags)` float32 scores, `[from, to]`, as
            `viterbi_decode` takes them; `FORBIDDEN` (-inf) rules a move out.
        start_scores, end_scores: `(num_tags,)` float32 scores of the first
            and last tag; `FORBIDDEN` where a tag may not start (or end) a path.
        tags: `(batch, time)` int tag path (e.g. the Viterbi one), ids in
            `[0, num_tags)` at real positions; ignored at padding.
        starts: `(batch, time)` bool, `True` where a segment begins.
        continuation: `(num_tags,)` int, for each tag the tag that would
            continue its segment (IOB2: `I-X` for `B-X` and `I-X`), or -1 for
            a tag no tag continues (`O`).

    Returns:
        `(batch, time)` float32 log probabilities, 0 at padding. `-inf` where
        no path of finite score agrees, and everywhere in a sequence that
        has no path of finite score at all (never NaN).
    """
    steps, step_mask = _time_major(potentials, mask)
    num_tags = ops.shape(steps)[2]
    tags = ops.swapaxes(ops.pad(tags, ((0, 0), (0, 1))), 0, 1)
    tags = ops.where(step_mask, tags, ops.zeros_like(tags))
    starts = ops.swapaxes(ops.pad(starts, ((0, 0), (0, 1))), 0, 1)

    first, later, log_partition = _forward_log_alphas(steps, step_mask, transitions, start_scores, end_scores)
    log_alphas = ops.concatenate([ops.expand_dims(first, 0), later])
    at_tags = ops.take_along_axis(log_alphas, ops.expand_dims(tags, 2), axis=2)[..., 0]
    emissions = ops.take_along_axis(steps, ops.expand_dims(tags, 2), axis=2)[..., 0]
    rows = ops.take(transitions, tags[:-1], axis=0)
    moves = ops.take_along_axis(rows, ops.expand_dims(tags[1:], 2), axis=2)[..., 0]

    # Carried by a scan, not a difference of running sums, where -inf - -inf would be NaN.
    # Of each step's two candidates one is -inf, so the maximum picks the other.
    def segment(score, inputs):
        score = ops.maximum(inputs[:, 0], score + inputs[:, 1])
        return score, score

    restart = ops.where(starts[1:], at_tags[1:], FORBIDDEN)
    extend = ops.where(starts[1:], FORBIDDEN, moves + emissions[1:])
    _, segments = ops.scan(segment, at_tags[0], ops.stack([restart, extend], axis=-1))
    segments = ops.concatenate([at_tags[:1], segments])

    def backward(log_beta, inputs):
        emission, keep = _split(inputs)
        ahead = emission + log_beta
        scores = ops.logsumexp(ops.expand_dims(ahead, 1) + transitions, axis=2)
        return ops.where(ops.expand_dims(keep, 1), scores, end_scores), ahead

    # What the first carry feeds is replaced: by the end scores at the last real step, by 0 at padding.
    _, ahead = ops.scan(backward, ops.zeros_like(first), _joined(steps[1:], step_mask[1:]), reverse=True)
    stops = ops.not_equal(ops.arange(num_tags), ops.expand_dims(ops.take(continuation, tags[:-1]), 2))
    leave = ops.logsumexp(ops.where(stops, rows + ahead, FORBIDDEN), axis=2)
    leave = ops.where(step_mask[1:], leave, ops.take(end_scores, tags[:-1]))

    joint = segments[:-1] + leave
    # Where no path has a finite score, log Z is -inf too: -inf, not NaN.
    log_probs = ops.where(joint > FORBIDDEN, joint - log_partition, FORBIDDEN)
    return ops.swapaxes(ops.where(step_mask[:-1], log_probs, ops.zeros_like(log_probs)), 0, 1)


def constraint_scores(allowed, shape):
    """float32 scores for `viterbi_decode`: 0 where `allowed` (nested bools, or `None`: all) is true, else `FORBIDDEN`."""
    if allowed is None:
        return ops.zeros(shape, "float32")
    return ops.cast(ops.where(ops.convert_to_tensor(allowed, "bool"), 0.0, FORBIDDEN), "float32")


@keras.saving.register_keras_serializable(package="seqtasks")
class CRF(keras.layers.Layer):
    """A linear-chain conditional random field over per-token tag scores.

    The score of a tag path `y` for scores `x` (the "potentials", one row of
    `num_tags` scores per token) is
    `start[y_0] + Σ_t x[t, y_t] + Σ_t transitions[y_{t-1}, y_t] + end[y_last]`,
    and its probability is `exp(score) / Z`, with `Z` summed over every path.
    Calling the layer finds the best path (Viterbi decoding);
    `log_likelihood` gives the training objective for gold paths. Both run
    in float32 with `keras.ops.scan` over time.

    A tag scheme's rules (`iob2_constraints`: no `I-PER` after `O`) can be
    given as `allowed_transitions` and `allowed_starts`: decoding then only
    returns paths that keep them, whatever the scores. Training is left
    unconstrained on purpose: `log_likelihood` normalises over every path, so
    a gold path that breaks the rules (a slip in hand-made data) still has a
    finite loss, and the learned transition scores already make rule-breaking
    paths unlikely.

    Args:
        num_tags: int, the number of tags.
        transitions_initializer: initializer of the transition, start and
            end scores, each with its own copy. Defaults to `"zeros"` (no
            preference before training).
        allowed_transitions: optional `(num_tags, num_tags)` booleans (nested
            lists or a NumPy array), `[from][to]`: `False` where a tag may
            never follow another. Defaults to `None`, every transition.
        allowed_starts: optional `(num_tags,)` booleans: `False` for tags
            that may not begin a sequence. Defaults to `None`, every tag.
        **kwargs: other keyword arguments of `keras.layers.Layer`.

    Call arguments:
        potentials: `(batch, time, num_tags)` float tag scores, e.g. a `Dense`
            layer over a bidirectional RNN's outputs.
        mask: optional `(batch, time)` boolean, `False` at padding (taken
            from the Keras mask of `potentials`). Padding must be at the end;
            every sequence needs at least one real token.

    Returns:
        A tuple `(tags, score)`: `tags` is `(batch, time)` int32, the best
        allowed path, 0 at padding; `score` is `(batch,)` float32 (whatever
        the dtype policy), the unnormalised score of that path.

    `log_likelihood(potentials, tags, mask=None)` returns the `(batch,)` log
    probability of the given int `(batch, time)` tag paths (tags at padding
    are ignored but must be valid ids, e.g. 0). Train with its negative mean.

    `segment_log_probs(potentials, tags, starts, continuation, mask=None)`
    gives the confidence of each segment (e.g. entity span) of a path, under
    the constrained distribution decoding uses (forbidden paths have
    probability 0). Its arguments: `potentials` as for a call, `tags`
    `(batch, time)` int, the path (e.g. the decoded one); `starts`
    `(batch, time)` bool, `True` where a segment begins; `continuation`
    `(num_tags,)` int, the tag that would continue a segment ending in each
    tag (IOB2: `I-X` for `B-X` and `I-X`), -1 for none (`O`); `mask` as for a
    call. It returns `(batch, time)` float32, 0 at padding: at each position
    `t`, the log probability that the tags from the segment's start through
    `t` are those of `tags` and that the next tag does not continue them
    (see the function `segment_log_probs`). Read at a segment's last
    position, it is the log probability that the segment is exactly right.

    Example:

    >>> crf = CRF(num_tags=3)
    >>> potentials = np.zeros((2, 4, 3), "float32")
    >>> tags, score = crf(potentials)
    >>> tuple(tags.shape), tuple(score.shape)
    ((2, 4), (2,))
    >>> iob2 = CRF(num_tags=3, **iob2_constraints(["O", "B-PER", "I-PER"]))
    >>> potentials = np.array([[[1.0, 0.0, 0.0], [0.0, 0.0, 2.0]]], "float32")
    >>> keras.ops.convert_to_numpy(iob2(potentials)[0]).tolist()  # O I-PER is not IOB2
    [[1, 2]]
    >>> tags, starts, continuation = np.array([[1, 2]]), np.array([[True, False]]), np.array([-1, 2, 2])
    >>> log_probs = iob2.segment_log_probs(np.zeros((1, 2, 3), "float32"), tags, starts, continuation)
    >>> np.exp(keras.ops.convert_to_numpy(log_probs)).round(3)  # B-PER I-PER: 1 of the 5 IOB2 paths
    array([[0.4, 0.2]], dtype=float32)

    Reference:
        Lafferty, McCallum & Pereira, "Conditional Random Fields", ICML 2001;
        Lample et al., "Neural Architectures for Named Entity Recognition",
        NAACL 2016. https://arxiv.org/abs/1603.01360
    """

    def __init__(
        self, num_tags, transitions_initializer="zeros", allowed_transitions=None, allowed_starts=None, **kwargs
    ):
        super().__init__(**kwargs)
        check_positive_int(num_tags, "num_tags")
        self.num_tags = num_tags
        self.transitions_initializer = keras.initializers.get(transitions_initializer)
        self.allowed_transitions, self.allowed_starts = check_constraints(num_tags, allowed_transitions, allowed_starts)
        self.supports_masking = True

    def build(self, potentials_shape):
        if potentials_shape[-1] is not None and potentials_shape[-1] != self.num_tags:
            raise ValueError(
                f"Expected potentials of shape (batch, time, {self.num_tags}). "
                f"Received: potentials.shape={potentials_shape}"
            )
        self.transitions = self.add_weight(
            name="transitions",
            shape=(self.num_tags, self.num_tags),
            initializer=clone_initializer(self.transitions_initializer),
        )
        self.start_transitions = self.add_weight(
            name="start_transitions",
            shape=(self.num_tags,),
            initializer=clone_initializer(self.transitions_initializer),
        )
        self.end_transitions = self.add_weight(
            name="end_transitions",
            shape=(self.num_tags,),
            initializer=clone_initializer(self.transitions_initializer),
        )
        self.built = True

    def call(self, potentials, mask=None):
        return viterbi_decode(potentials, mask, *self.constrained_scores())

    def segment_log_probs(self, potentials, tags, starts, continuation, mask=None):
        """`segment_log_probs` under the constrained scores that calling the layer decodes with."""
        transitions, start_scores, end_scores = self.constrained_scores()
        return segment_log_probs(potentials, mask, transitions, start_scores, end_scores, tags, starts, continuation)

    def constrained_scores(self):
        """`(transitions, start_scores, end_scores)` float32 as decoding uses them: `FORBIDDEN` added where the
        constraints forbid a move."""
        n = self.num_tags
        return (
            ops.cast(self.transitions, "float32") + constraint_scores(self.allowed_transitions, (n, n)),
            ops.cast(self.start_transitions, "float32") + constraint_scores(self.allowed_starts, (n,)),
            ops.cast(self.end_transitions, "float32"),
        )

    def log_likelihood(self, potentials, tags, mask=None):
        """Log probability `(batch,)` of the paths `tags` `(batch, time)`, over every path (constraints aside)."""
        steps, step_mask = _time_major(potentials, mask)
        _, _, log_partition = _forward_log_alphas(
            steps,
            step_mask,
            ops.cast(self.transitions, "float32"),
            ops.cast(self.start_transitions, "float32"),
            ops.cast(self.end_transitions, "float32"),
        )
        tags = ops.pad(ops.cast(tags, "int32"), ((0, 0), (0, 1)))
        return self._path_score(steps, step_mask, tags) - log_partition

    def _path_score(self, steps, step_mask, tags):
        tags = ops.transpose(tags, (1, 0))
        weights = ops.cast(step_mask, "float32")
        emissions = ops.take_along_axis(steps, ops.expand_dims(tags, 2), axis=2)[..., 0]
        flat = ops.reshape(ops.cast(self.transitions, "float32"), (-1,))
        moves = ops.take(flat, tags[:-1] * self.num_tags + tags[1:])
        lengths = ops.cast(ops.sum(ops.cast(step_mask, "int32"), axis=0), "int32")
        last = ops.take_along_axis(tags, ops.expand_dims(ops.maximum(lengths - 1, 0), 0), axis=0)[0]
        return (
            ops.sum(emissions * weights, axis=0)
            + ops.sum(moves * weights[1:], axis=0)
            + ops.take(ops.cast(self.start_transitions, "float32"), tags[0])
            + ops.take(ops.cast(self.end_transitions, "float32"), last)
        )

    def compute_output_spec(self, potentials, mask=None):
        batch, time = potentials.shape[0], potentials.shape[1]
        return (
            keras.KerasTensor((batch, time), dtype="int32"),
            keras.KerasTensor((batch,), dtype="float32"),
        )

    def compute_mask(self, potentials, previous_mask=None):
        if previous_mask is None:
            return None
        return previous_mask, None

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_tags": self.num_tags,
                "transitions_initializer": keras.initializers.serialize(self.transitions_initializer),
                "allowed_transitions": self.allowed_transitions,
                "allowed_starts": self.allowed_starts,
            }
        )
        return config
