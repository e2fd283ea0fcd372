"""Writes a `tf.Module`'s `serving_default` signature as a versioned SavedModel."""

from pathlib import Path

from seqtasks.io_utils import next_version_dir, publish_folder


def export_saved_model(module, signature, export_root, name):
    """Saves `module` to `export_root/name/<next version>/` atomically.

    `signature` is the module's `tf.function` with an input signature; it
    becomes `serving_default`. Returns the version folder.
    """
    import tensorflow as tf

    def write(folder):
        tf.saved_model.save(
            module, folder, signatures={"serving_default": signature.get_concrete_function()}
        )

    return publish_folder(write, next_version_dir(Path(export_root) / name))
