"""What the converter tests share: the recorded fixtures, old-to-new id maps, and checkpoints written by hand."""

from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parent.parent / "data" / "migration"


def new_ids(run_dir, old_vocab, side, specials):
    """An array mapping each old id to its id in the converted run's vocabulary, from the two files alone.

    `specials` maps old tokens to the reserved token that replaces them; an
    old id past the file's lines (OpenNMT-tf's out-of-vocabulary id) is
    given as the key `len(lines)`.
    """
    old = Path(old_vocab).read_text(encoding="utf-8").splitlines()
    new = (Path(run_dir) / f"{side}_vocab.txt").read_text(encoding="utf-8").splitlines()
    position = {token: index for index, token in enumerate(new)}
    mapping = [position[specials.get(token, token)] for token in old]
    if len(old) in specials:
        mapping.append(position[specials[len(old)]])
    return np.array(mapping)


def write_checkpoint(prefix, arrays):
    """An object-based TensorFlow checkpoint holding `arrays` under their names (`a/b/kernel` -> `a.b.kernel`)."""
    import tensorflow as tf

    tree = {}
    for name, value in arrays.items():
        *parents, leaf = name.split("/")
        node = tree
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value

    def build(node):
        module = tf.Module()
        for key, child in node.items():
            setattr(module, key, build(child) if isinstance(child, dict) else tf.Variable(child))
        return module

    return tf.train.Checkpoint(**{key: build(child) if isinstance(child, dict) else tf.Variable(child)
                                  for key, child in tree.items()}).write(str(prefix))


def checkpoint_arrays(prefix):
    """The model variables of a checkpoint by their names, without the optimizer's."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(prefix))
    suffix = "/.ATTRIBUTES/VARIABLE_VALUE"
    return {
        name.removesuffix(suffix): reader.get_tensor(name)
        for name in reader.get_variable_to_shape_map()
        if name.endswith(suffix) and not name.startswith(("optimizer/", "save_counter")) and "OPTIMIZER_SLOT" not in name
    }
