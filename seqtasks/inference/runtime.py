"""TensorFlow as running an export needs it: the runtime and TensorFlow Text's kernels, not Keras.

`import tensorflow` imports Keras' optimizers eagerly (for SavedModels that
hold Keras optimizers, which seqtasks' exports do not), and `import
tensorflow_text` builds Keras layers: together about half of a cold
`seqtasks predict` (BENCHMARKS.md, "Graph costs"). `serving_tensorflow()`
imports TensorFlow without that eager import, in a process that has not
imported it yet, and registers TensorFlow Text's ops by loading its kernel
libraries, as a model server links them. Keras still imports as usual
later, when something asks for it.
"""

import importlib.util
import os
import sys
from pathlib import Path

# TensorFlow reads it while it is imported, and `tf.keras` on first use: set only around the import.
_LEGACY_KERAS = "TF_USE_LEGACY_KERAS"


def serving_tensorflow():
    """The `tensorflow` module, with TensorFlow Text's ops registered when it is installed."""
    if "tensorflow" not in sys.modules and importlib.util.find_spec("tf_keras") is None:
        previous = os.environ.get(_LEGACY_KERAS)
        # With no tf_keras to import, TensorFlow skips its eager import of Keras.
        os.environ[_LEGACY_KERAS] = "1"
        try:
            import tensorflow as tf
        finally:
            if previous is None:
                del os.environ[_LEGACY_KERAS]
            else:
                os.environ[_LEGACY_KERAS] = previous
    import tensorflow as tf

    for library in text_op_libraries():
        tf.load_op_library(str(library))
    return tf


def text_op_libraries():
    """TensorFlow Text's kernel libraries (`python/ops/_*.so`), found without importing the package; [] without it."""
    if "tensorflow_text" in sys.modules:
        return []  # imported: its ops are registered
    spec = importlib.util.find_spec("tensorflow_text")
    if spec is None or not spec.submodule_search_locations:
        return []
    return sorted(Path(next(iter(spec.submodule_search_locations)), "python", "ops").glob("_*.so"))
