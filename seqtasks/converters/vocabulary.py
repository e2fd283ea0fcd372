"""Another library's vocabulary with the reserved tokens of seqtasks first, and the row order that goes with it."""

import numpy as np

from seqtasks.errors import SeqtasksError
from seqtasks.text.special_ids import RESERVED_TOKENS
from seqtasks.utils.regular_files import MAX_DATA_FILE_BYTES, MAX_LINE_BYTES, open_regular_file, reading_errors

# The logit a converted output layer gives a reserved token the old model did not have (its [UNK]): far
# below any real logit, so searches never pick it and log-probabilities move by less than 1e-12, yet
# finite, so fine-tuning with label smoothing stays sane.
ABSENT_LOGIT = -30.0


def read_vocabulary(path, what):
    """The lines of a vocabulary file (line N is the token of id N)."""
    with reading_errors(path, what, f"a {what} file"):
        with open_regular_file(path, MAX_DATA_FILE_BYTES, f"a {what} file") as handle:
            data = handle.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SeqtasksError(f"{path}: the {what} is not UTF-8 text (byte {error.start})") from None
    tokens = text.split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()
    seen = {}
    for number, token in enumerate(tokens, 1):
        if not token or len(token.encode("utf-8")) > MAX_LINE_BYTES or any(c.isspace() for c in token):
            raise SeqtasksError(f"{path}, line {number}: expected one token (no spaces, not empty); got {token!r}")
        if token in seen:
            raise SeqtasksError(f"{path}, line {number}: {token!r} again (line {seen[token]}); expected each token once")
        seen[token] = number
    return tokens


class Reordered:
    """`tokens`: the seqtasks vocabulary; `old_ids[i]`: the old id of new id `i`, or -1 where the old had none.

    `specials` maps each reserved token (`[PAD]`, `[UNK]`, `[START]`,
    `[END]`) to its old id, or None where the old vocabulary had no such
    token. The other tokens keep their old order after the reserved ones.
    `old_size` is the number of old ids (default: one per token).
    """

    def __init__(self, tokens, specials, path, old_size=None):
        for token in RESERVED_TOKENS:
            if token in tokens:
                raise SeqtasksError(f"{path}: holds {token!r}, a token seqtasks reserves for itself")
        self.old_size = len(tokens) if old_size is None else old_size
        special_ids = {old for old in specials.values() if old is not None}
        self.old_ids = np.array(
            [-1 if specials[token] is None else specials[token] for token in RESERVED_TOKENS]
            + [old for old in range(len(tokens)) if old not in special_ids],
            dtype="int64",
        )
        self.tokens = list(RESERVED_TOKENS) + [tokens[old] for old in self.old_ids[len(RESERVED_TOKENS):]]

    def __len__(self):
        return len(self.old_ids)

    def new_ids(self, old_ids):
        """Maps an array of old ids to new ids."""
        lookup = np.full(int(self.old_ids.max()) + 1, -1, "int64")
        present = self.old_ids >= 0
        lookup[self.old_ids[present]] = np.flatnonzero(present)
        return lookup[np.asarray(old_ids)]

    def rows(self, matrix):
        """An embedding `(old vocab, dim)` reordered; rows the old vocabulary lacked are zeros."""
        out = matrix[np.maximum(self.old_ids, 0)].copy()
        out[self.old_ids < 0] = 0.0
        return out

    def output_layer(self, kernel, bias):
        """An output projection `(dim, old vocab)`, `(old vocab,)` reordered; absent tokens get `ABSENT_LOGIT`."""
        kernel = kernel[:, np.maximum(self.old_ids, 0)].copy()
        bias = bias[np.maximum(self.old_ids, 0)].copy()
        kernel[:, self.old_ids < 0] = 0.0
        bias[self.old_ids < 0] = ABSENT_LOGIT
        return kernel, bias
