"""Writes a `tf.Module`'s `serving_default` signature as a versioned SavedModel."""

from pathlib import Path

from seqtasks.io_utils import next_version_dir, publish_folder


def export_saved_model(module, signature, export_root, name):
    """Saves `module` to `export_root/name/<next version>/` atomically.

    `signature` is the module's `tf.function` with an input signature; it
    becomes `serving_default`. Returns the version folder. On a worker of a
    multi-worker run that is not the chief, the model is saved to a temporary
    folder that is then removed (every worker takes part in saving distributed
    variables) and the result is `None`.
    """
    import shutil
    import tempfile

    import tensorflow as tf

    from seqtasks.distribute import is_chief

    def write(folder):
        try:
            tf.saved_model.save(
                module, folder, signatures={"serving_default": signature.get_concrete_function()}
            )
        except tf.errors.OpError as error:  # TensorFlow's file errors (a full disk) are not OSErrors
            raise OSError(error.message.splitlines()[0]) from None

    if not is_chief():
        folder = tempfile.mkdtemp(prefix="seqtasks-worker-export-")
        try:
            write(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return None
    return publish_folder(write, next_version_dir(Path(export_root) / name))

