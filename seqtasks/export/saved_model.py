"""Writes a `tf.Module`'s `serving_default` signature as a versioned SavedModel, with files that say what it is."""

from pathlib import Path

from seqtasks.errors import SeqtasksError
from seqtasks.utils.io_utils import publish_version, versions

# Where a version's own files go: TensorFlow Serving reads only its warm-up file there.
AUDIT_FOLDER = "assets.extra"
# Two exports are the same when these files of their audit folders are: the
# same weights served with the same recipe (decoding settings included).
IDENTITY_FILES = ("weights.sha256", "recipe.yaml")


def export_saved_model(module, signature, export_root, name, extras=None, force=False, log=None):
    """Saves `module` as a new version `export_root/name/<n>/`; returns the version folder.

    `signature` is the module's `tf.function` with an input signature, which
    becomes `serving_default`, or a dict of such functions by signature name
    (`module_signatures`). `extras` maps file names to the texts written
    into the version's `assets.extra/`; a callable value is called with the
    version's final folder (a model card that names it). The version number
    is reserved atomically (`seqtasks.utils.io_utils.publish_version`): concurrent
    exports get distinct versions and no version is ever replaced.

    Unless `force`, when the newest version has the same `IDENTITY_FILES` as
    `extras`, nothing is written: `log` says so and the newest version's
    folder is returned (`unchanged_export`). This is checked again when the
    version number is taken, for an export that finished meanwhile; never in
    a multi-worker cluster, whose workers all take part in saving.

    On a worker of a multi-worker run that is not the chief, the model is
    saved to a temporary folder that is then removed (every worker takes
    part in saving distributed variables) and the result is `None`.
    """
    import shutil
    import tempfile

    import tensorflow as tf

    from seqtasks.training.distribute import cluster_workers, is_chief

    extras = dict(extras or {})
    functions = signature if isinstance(signature, dict) else {"serving_default": signature}

    def write(folder):
        try:
            tf.saved_model.save(
                module, folder, signatures={name: traced_for_saving(fn) for name, fn in functions.items()}
            )
        except tf.errors.OpError as error:  # TensorFlow's file errors (a full disk) are not OSErrors
            raise OSError(error.message.splitlines()[0]) from None
        _write_extras(folder, {key: text for key, text in extras.items() if not callable(text)})

    def finish(folder, version):
        _write_extras(folder, {key: make(version) for key, make in extras.items() if callable(make)})

    if not is_chief():
        folder = tempfile.mkdtemp(prefix="seqtasks-worker-export-")
        try:
            write(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return None

    def unchanged(newest):
        return _same_export(newest, extras)

    identified = all(isinstance(extras.get(key), str) for key in IDENTITY_FILES)
    comparable = identified and not force and cluster_workers() <= 1
    if comparable and (newest := unchanged_export(export_root, name, extras, log)) is not None:
        return newest
    version, new = publish_version(write, Path(export_root) / name, unchanged if comparable else None, finish)
    return version if new else _report_unchanged(version, log)


def module_signatures(module):
    """A task's serving module's signatures by name: its `serving_signatures()`, or `serve` as `serving_default`."""
    if hasattr(module, "serving_signatures"):
        return module.serving_signatures()
    return {"serving_default": module.serve}


def unchanged_export(export_root, name, files, log=None):
    """The newest version of `export_root/name` if its `assets.extra/` has these `IDENTITY_FILES`, else None.

    `files` maps the `IDENTITY_FILES` to their texts. A found version is
    reported through `log`. In a multi-worker cluster the answer is always
    None: every worker takes part in saving, so none may skip it alone.
    """
    from seqtasks.training.distribute import cluster_workers

    numbers = versions(Path(export_root) / name)
    if not numbers or cluster_workers() > 1 or not _same_export(numbers[max(numbers)], files):
        return None
    return _report_unchanged(numbers[max(numbers)], log)


def _write_extras(folder, files):
    if not files:
        return
    extra = Path(folder) / AUDIT_FOLDER
    extra.mkdir(exist_ok=True)
    for file_name, text in files.items():
        (extra / file_name).write_text(text, encoding="utf-8")


def _same_export(version, files):
    try:
        return all((version / AUDIT_FOLDER / key).read_text(encoding="utf-8") == files[key] for key in IDENTITY_FILES)
    except (OSError, UnicodeDecodeError, KeyError):  # an export without these files (an older one) differs
        return False


def _report_unchanged(version, log):
    if log is not None:
        log(
            f"{version} has these weights and this recipe already: nothing exported "
            "(--force exports a new version anyway)"
        )
    return version


def weights_sha256(weights):
    """The SHA-256 of `weights` (variables or arrays) in their order: dtype, shape and bytes of each."""
    import hashlib

    import numpy as np

    digest = hashlib.sha256()
    for weight in weights:
        value = np.ascontiguousarray(weight.numpy() if hasattr(weight, "numpy") else weight)
        digest.update(f"{value.dtype.str}{value.shape};".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def traced_for_saving(function):
    """The concrete function of `function` (a `tf.function` with an input signature) that saving it uses.

    `tf.saved_model.save` traces a module's functions anew, for its variable
    policy is part of TensorFlow's cache key: a trace made outside it would be
    made, and saved, twice. Traced here inside the same save context, the
    trace is made once and the save reuses it (BENCHMARKS.md, "Graph costs").
    """
    import tensorflow as tf
    from tensorflow.python.saved_model import save_context

    with save_context.save_context(tf.saved_model.SaveOptions()):
        return function.get_concrete_function()


def describe_signature(signature):
    """What a caller of `signature` (a `tf.function` with an input signature) needs to know.

    A dict: `inputs` and `outputs` map names to `{"dtype", "shape"}` (None
    for a dimension of any size), and `custom_ops` lists the graph's
    operations that core TensorFlow lacks (a serving process must import
    the library that registers them, `tensorflow_text` for the tokenizers).
    """
    import tensorflow as tf

    concrete = traced_for_saving(signature)

    def spec(tensor):
        return {"dtype": tensor.dtype.name, "shape": tensor.shape.as_list()}

    graph = concrete.graph.as_graph_def()
    functions = {function.signature.name for function in graph.library.function}
    types = {node.op for node in graph.node}
    types.update(node.op for function in graph.library.function for node in function.node_def)
    return {
        "inputs": {tensor.name: spec(tensor) for tensor in concrete.structured_input_signature[0]},
        "outputs": {key: spec(value) for key, value in sorted(concrete.structured_outputs.items())},
        "custom_ops": sorted(t for t in types - functions if not hasattr(tf.raw_ops, t)),
    }


def saved_model_folder(path):
    """The SavedModel folder `path` names: itself when it holds `saved_model.pb`, else its newest version.

    A base path (`saved_models/translation`, as TensorFlow Serving is given)
    names its highest integer sub-folder that holds a `saved_model.pb`.
    """
    path = Path(path)
    if (path / "saved_model.pb").is_file():
        return path
    complete = [number for number, folder in versions(path).items() if (folder / "saved_model.pb").is_file()]
    if not complete:
        raise SeqtasksError(f"{path}: not a SavedModel folder (no saved_model.pb)")
    return path / str(max(complete))
