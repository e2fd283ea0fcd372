"""The Keras backend a run trains on, and exports made under TensorFlow whatever the backend.

`seqtasks run` sets `KERAS_BACKEND` from the recipe's `backend` before Keras
is imported (`select_backend`); the run then checks that Keras took it and
records its name in the run folder's recipe (`resolve_backend`). A SavedModel
is a TensorFlow graph, so a run trained under JAX exports from a TensorFlow
process that rebuilds the model from the backend-neutral `.keras` file or
checkpoint (`export_in_tensorflow`).
"""

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from seqtasks.errors import SeqtasksError

BACKENDS = ("tensorflow", "jax")


def select_backend(recipe):
    """Sets `KERAS_BACKEND` to the recipe's `backend` (unless `auto`) while Keras is not imported yet."""
    if recipe.backend != "auto" and "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = recipe.backend


def resolve_backend(recipe):
    """The recipe with `backend` set to the Keras backend of this process; an error where they differ."""
    import keras

    name = keras.backend.backend()
    if recipe.backend not in ("auto", name):
        raise SeqtasksError(
            f"backend: the recipe asks for {recipe.backend!r}, but Keras already runs on {name!r} in this process "
            f"(start it with KERAS_BACKEND={recipe.backend}, as `seqtasks run` does)"
        )
    if name not in BACKENDS:
        raise SeqtasksError(
            f"backend: Keras runs on {name!r}; seqtasks trains on one of {', '.join(BACKENDS)} (set KERAS_BACKEND)"
        )
    return dataclasses.replace(recipe, backend=name)


def set_matmul_precision(name):
    """Makes float32 matrix products of this process `name` ("default" or "highest"; the recipe's
    `training.matmul_precision`) under the Keras backend in use.

    "default" is each backend's own default: TensorFloat-32 on NVIDIA GPUs that
    have it, for JAX and TensorFlow alike. The setting holds for the whole
    process, as both backends keep it.
    """
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        jax.config.update("jax_default_matmul_precision", "highest" if name == "highest" else None)
    elif backend == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(name != "highest")


def matmul_precision():
    """The precision of float32 matrix products in force in this process: "highest" or "default"."""
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return "highest" if jax.config.jax_default_matmul_precision in ("highest", "float32") else "default"
    if backend == "tensorflow":
        import tensorflow as tf

        return "default" if tf.config.experimental.tensor_float_32_execution_enabled() else "highest"
    return "highest"  # PyTorch keeps float32 matmuls unless told otherwise


def export_in_tensorflow(runner, checkpoint=None, metrics=None, force=False, ensemble=(), notes=(), run_metrics=True):
    """`runner._export(...)` done by a TensorFlow process: the new (or unchanged) version's folder, or None.

    The child gets the runner's recipe (overrides included), reloads the
    run's tokenizers and the weights `checkpoint` names (with `ensemble`,
    those of the other runs too, as `Runner.ensemble`), and logs through
    this process's output. It sees no GPU: an export needs none, and the
    training process may hold the GPU's memory.
    """
    from seqtasks.recipe import dump_recipe

    with tempfile.TemporaryDirectory(prefix="seqtasks-export-") as folder:
        request = Path(folder) / "request.json"
        result = Path(folder) / "result.json"
        recipe_file = Path(folder) / "recipe.yaml"
        recipe_file.write_text(dump_recipe(runner.recipe), encoding="utf-8")
        request.write_text(
            json.dumps(
                {
                    "run_dir": str(Path(runner.run_dir).resolve()),
                    "recipe_file": str(recipe_file),
                    "checkpoint": checkpoint,
                    "metrics": metrics,
                    "force": force,
                    "ensemble": [str(Path(other).resolve()) for other in ensemble],
                    "notes": list(notes),
                    "run_metrics": run_metrics,
                    "result": str(result),
                }
            ),
            encoding="utf-8",
        )
        env = dict(os.environ, KERAS_BACKEND="tensorflow", CUDA_VISIBLE_DEVICES="-1")
        env.pop("SEQTASKS_EXPECT_BACKEND", None)
        process = subprocess.run(
            [sys.executable, "-m", "seqtasks.lifecycle.tensorflow_export", str(request)], env=env, capture_output=True, text=True
        )
        for line in process.stdout.splitlines():
            runner.log(line)
        if not result.exists():
            tail = "\n".join(process.stderr.strip().splitlines()[-5:])
            raise SeqtasksError(f"the export under TensorFlow failed (exit {process.returncode}):\n{tail}")
        answer = json.loads(result.read_text(encoding="utf-8"))
    if answer.get("error"):
        raise SeqtasksError(answer["error"])
    return None if answer["exported"] is None else Path(answer["exported"])
