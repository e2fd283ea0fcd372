"""The variables of a TensorFlow checkpoint, each taken once, with one-line errors for the rest."""

from seqtasks.errors import SeqtasksError

_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
# Bookkeeping, not model weights: the optimizer's slots and step, the save counter, the object graph.
_IGNORED_PREFIXES = ("optimizer/", "save_counter", "_CHECKPOINTABLE_OBJECT_GRAPH", "global_step")


class CheckpointVariables:
    """The model variables of the checkpoint at `path` (a prefix such as `ckpt-3`, or its folder).

    Names lose tf.train.Checkpoint's `/.ATTRIBUTES/VARIABLE_VALUE` suffix;
    optimizer slots (`.OPTIMIZER_SLOT`) and bookkeeping are left out.
    `take` hands out each variable once; `check_all_taken` names whatever no
    converter rule read, so an unexpected layer is an error, not a silent loss.
    """

    def __init__(self, path):
        import tensorflow as tf

        self.path = str(path)
        try:
            reader = tf.train.load_checkpoint(self.path)
        except (ValueError, tf.errors.OpError) as error:
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise SeqtasksError(f"{self.path}: not a TensorFlow checkpoint ({first})") from None
        self._reader = reader
        self._names = {}
        for full in reader.get_variable_to_shape_map():
            if ".OPTIMIZER_SLOT" in full or full.startswith(_IGNORED_PREFIXES):
                continue
            self._names[full[: -len(_SUFFIX)] if full.endswith(_SUFFIX) else full] = full
        self._taken = set()

    def names(self):
        return sorted(self._names)

    def has(self, name):
        return name in self._names

    def shape(self, name):
        return tuple(self._reader.get_variable_to_shape_map()[self._names[name]])

    def take(self, name, what, shape=None):
        """The variable `name` as a NumPy array; `what` says what it should be, for the errors."""
        if name not in self._names:
            raise SeqtasksError(f"{self.path}: no variable {name!r} ({what})")
        if name in self._taken:
            raise SeqtasksError(f"{self.path}: variable {name!r} read twice ({what})")
        value = self._reader.get_tensor(self._names[name])
        if shape is not None and tuple(value.shape) != tuple(shape):
            raise SeqtasksError(
                f"{self.path}: variable {name!r} ({what}) has shape {tuple(value.shape)}; expected {tuple(shape)}"
            )
        self._taken.add(name)
        return value

    def check_all_taken(self, model_kind):
        left = [name for name in self.names() if name not in self._taken]
        if left:
            shown = ", ".join(f"{name} {self.shape(name)}" for name in left[:5])
            more = f" and {len(left) - 5} more" if len(left) > 5 else ""
            raise SeqtasksError(
                f"{self.path}: {len(left)} variable(s) that a {model_kind} does not have: {shown}{more}"
            )
