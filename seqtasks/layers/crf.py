import keras
from keras import ops

from seqtasks.layers._validation import check_positive_int, clone_initializer


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

    Args:
        num_tags: int, the number of tags.
        transitions_initializer: initializer of the transition, start and
            end scores, each with its own copy. Defaults to `"zeros"` (no
            preference before training).
        **kwargs: other keyword arguments of `keras.layers.Layer`.

    Call arguments:
        potentials: `(batch, time, num_tags)` float tag scores, e.g. a `Dense`
            layer over a bidirectional RNN's outputs.
        mask: optional `(batch, time)` boolean, `False` at padding (taken
            from the Keras mask of `potentials`). Padding must be at the end;
            every sequence needs at least one real token.

    Returns:
        A tuple `(tags, score)`: `tags` is `(batch, time)` int32, the best
        path, 0 at padding; `score` is `(batch,)` float32 (whatever the
        dtype policy), the unnormalised score of that path.

    `log_likelihood(potentials, tags, mask=None)` returns the `(batch,)` log
    probability of the given int `(batch, time)` tag paths (tags at padding
    are ignored but must be valid ids, e.g. 0). Train with its negative mean.

    Example:

    >>> crf = CRF(num_tags=3)
    >>> potentials = np.zeros((2, 4, 3), "float32")
    >>> tags, score = crf(potentials)
    >>> tuple(tags.shape), tuple(score.shape)
    ((2, 4), (2,))

    Reference:
        Lafferty, McCallum & Pereira, "Conditional Random Fields", ICML 2001;
        Lample et al., "Neural Architectures for Named Entity Recognition",
        NAACL 2016. https://arxiv.org/abs/1603.01360
    """

    def __init__(self, num_tags, transitions_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        check_positive_int(num_tags, "num_tags")
        self.num_tags = num_tags
        self.transitions_initializer = keras.initializers.get(transitions_initializer)
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

    def _time_major(self, potentials, mask):
        potentials = ops.cast(potentials, "float32")
        if mask is None:
            mask = ops.ones(ops.shape(potentials)[:2], dtype="bool")
        mask = ops.cast(mask, "bool")
        # One padded step more, so the scans over steps 1.. never run zero times
        # (TensorFlow cannot stack an empty list of unknown batch size).
        potentials = ops.pad(potentials, ((0, 0), (0, 1), (0, 0)))
        mask = ops.pad(mask, ((0, 0), (0, 1)), constant_values=False)
        return ops.transpose(potentials, (1, 0, 2)), ops.transpose(mask, (1, 0))

    @staticmethod
    def _joined(steps, step_mask):
        # One scanned tensor: Keras' TensorFlow scan fails on several inputs
        # when the number of steps is unknown while tracing.
        return ops.concatenate([steps, ops.expand_dims(ops.cast(step_mask, steps.dtype), -1)], axis=-1)

    @staticmethod
    def _split(inputs):
        return inputs[:, :-1], inputs[:, -1] > 0.5

    def call(self, potentials, mask=None):
        steps, step_mask = self._time_major(potentials, mask)
        transitions = ops.cast(self.transitions, "float32")
        identity = ops.expand_dims(ops.arange(self.num_tags, dtype="int32"), 0)

        def forward(best, inputs):
            emission, keep = self._split(inputs)
            scores = ops.expand_dims(best, 2) + transitions
            pointers = ops.cast(ops.argmax(scores, axis=1), "int32")
            keep = ops.expand_dims(keep, 1)
            # Padded steps carry the scores through and point every tag at itself.
            best = ops.where(keep, ops.max(scores, axis=1) + emission, best)
            # Keras' TensorFlow scan gives the outputs the carry's dtype, so the
            # pointers (small integers, exact in float32) travel as floats.
            return best, ops.cast(ops.where(keep, pointers, identity), "float32")

        first = ops.cast(self.start_transitions, "float32") + steps[0]
        best, pointers = ops.scan(forward, first, self._joined(steps[1:], step_mask[1:]))
        pointers = ops.cast(pointers, "int32")
        final = best + ops.cast(self.end_transitions, "float32")
        score = ops.max(final, axis=1)
        last = ops.cast(ops.argmax(final, axis=1), "int32")

        def backward(tag, step_pointers):
            previous = ops.take_along_axis(step_pointers, ops.expand_dims(tag, 1), axis=1)[:, 0]
            return previous, previous

        _, earlier = ops.scan(backward, last, pointers, reverse=True)
        tags = ops.transpose(ops.concatenate([earlier, ops.expand_dims(last, 0)], axis=0), (1, 0))
        tags = ops.where(ops.transpose(step_mask, (1, 0)), tags, ops.zeros_like(tags))
        return tags[:, :-1], score

    def log_likelihood(self, potentials, tags, mask=None):
        """Log probability `(batch,)` of the paths `tags` `(batch, time)`."""
        steps, step_mask = self._time_major(potentials, mask)
        transitions = ops.cast(self.transitions, "float32")

        def forward(log_alpha, inputs):
            emission, keep = self._split(inputs)
            scores = ops.logsumexp(ops.expand_dims(log_alpha, 2) + transitions, axis=1) + emission
            log_alpha = ops.where(ops.expand_dims(keep, 1), scores, log_alpha)
            return log_alpha, log_alpha

        first = ops.cast(self.start_transitions, "float32") + steps[0]
        log_alpha, _ = ops.scan(forward, first, self._joined(steps[1:], step_mask[1:]))
        log_partition = ops.logsumexp(log_alpha + ops.cast(self.end_transitions, "float32"), axis=1)
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
            }
        )
        return config
