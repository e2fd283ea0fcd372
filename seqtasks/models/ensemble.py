import keras
from keras import ops

from seqtasks.decoding.model_search import token_log_probs


class EnsembleDecoding:
    """Model mixin: `member_models`, encoder-decoders of one vocabulary, decode as one.

    Each step's log-probabilities are the mean of the members'
    log-probabilities (the log of their probabilities' geometric mean; the
    searches renormalise it). The attention weights of a step, which the
    coverage penalty sums, are the mean of the members that attend. A
    member may itself be an ensemble. List it before `keras.Model` among the
    bases.
    """

    @property
    def decoder_layer(self):
        """The first attending member's decoder (the first member's if none attends): what serving asks."""
        return (self._attending() or self.member_models)[0].decoder_layer

    def _attending(self):
        return [member for member in self.member_models if _attends(member)]

    def log_probs(self, inputs, training=None):
        """The mean of the members' log-probabilities of each target token `(batch, T, vocab)` (teacher forcing)."""
        return _mean([token_log_probs(member, inputs, training) for member in self.member_models])

    def attention(self, inputs, target_input_ids):
        """The mean of the attending members' attention weights; `ValueError` when none attends."""
        attending = self._attending()
        if not attending:
            raise ValueError("No member of this ensemble has attention.")
        return _mean([ops.cast(member.attention(inputs, target_input_ids), "float32") for member in attending])

    def encode(self, inputs):
        """`(caches, states)`: the members', in order."""
        encoded = [member.encode(inputs) for member in self.member_models]
        return tuple(cache for cache, _ in encoded), tuple(state for _, state in encoded)

    def memory_mask(self, caches):
        """The source mask the attending members read `(batch, source)`, or None when none attends."""
        for member, cache in zip(self.member_models, caches):
            if _attends(member):
                return member.memory_mask(cache) if hasattr(member, "memory_mask") else cache[2]
        return None

    def decode_step(self, ids, states, caches):
        """One step of every member: `(mean log-probabilities, states, mean attention weights)`."""
        log_probs, new_states, weights = [], [], []
        for member, state, cache in zip(self.member_models, states, caches):
            logits, state, step_weights = member.decode_step(ids, state, cache)
            log_probs.append(ops.log_softmax(ops.cast(logits, "float32"), axis=-1))
            new_states.append(state)
            if _attends(member):
                weights.append(ops.cast(step_weights, "float32"))
        return _mean(log_probs), tuple(new_states), _mean(weights) if weights else step_weights


class Ensemble(EnsembleDecoding, keras.Model):
    """Encoder-decoders that read the same inputs and write the same vocabulary, decoding as one.

    Members decode as `EnsembleDecoding` says: each step's log-probabilities
    are the mean of theirs, the attention weights the mean of the attending
    members'. Members may differ in size and architecture; their inputs and
    output vocabulary must be the same (`seqtasks.lifecycle.runner.Runner.ensemble`
    checks the runs' vocabularies).

    Args:
        members: the models (`Seq2Seq` or `ImageCaptioner`), at least two.

    Call arguments:
        inputs: the members' training inputs, `(source_ids, target_ids)`.

    Returns:
        The mean of the members' log-softmax outputs, `(batch, Tt, vocab)`.

    Example:

    >>> import numpy as np
    >>> from seqtasks.models import Seq2Seq
    >>> from seqtasks.decoding import search
    >>> first, second = (Seq2Seq(12, 10, embedding_dim=8, encoder={"units": 8}, decoder={"units": 8})
    ...                  for _ in range(2))
    >>> source, target = np.array([[4, 5, 6]]), np.array([[2, 7]])
    >>> ensemble = Ensemble([first, second])
    >>> tuple(ensemble((source, target)).shape)  # builds the members
    (1, 2, 10)
    >>> ids, lengths, scores = search(ensemble, source, {"beam_width": 3, "max_length": 5})
    >>> tuple(ids.shape), tuple(scores.shape)
    ((1, 5), (1,))

    Reference: Sutskever et al., 2014, "Sequence to Sequence Learning with
    Neural Networks" (an ensemble of LSTMs decoding together).
    """

    def __init__(self, members, **kwargs):
        super().__init__(**kwargs)
        if len(members) < 2:
            raise ValueError(f"An ensemble needs at least two members. Received: {len(members)}")
        self.members = list(members)

    @property
    def member_models(self):
        """The members, as `EnsembleDecoding` reads them."""
        return self.members

    def call(self, inputs, training=None):
        return self.log_probs(inputs, training=training)


def check_member_count(members):
    """The `members` argument of an ensemble trained in one run: an int of at least 2, else `ValueError`."""
    if not isinstance(members, int) or isinstance(members, bool) or members < 2:
        raise ValueError(f"Expected an int of at least 2. Received: members={members!r}")


def _attends(model):
    return getattr(model.decoder_layer, "attention", "none") != "none"


def _mean(tensors):
    return ops.mean(ops.stack(tensors), axis=0)
