"""Tolerances for float32 results that matrix products feed, from the matmul precision in force.

On a CPU, and wherever float32 products stay float32 (`training.matmul_precision:
highest`), a layer matches its float64 NumPy formula, or another path through
the same computation, to about 1e-6. NVIDIA GPUs from Ampere on compute float32
products in TensorFloat-32 by default under JAX and TensorFlow: inputs rounded to
10 mantissa bits, so results agree to about 1e-3 of their size. A test states
the tolerance it needs in float32; `tolerance` widens it only where that
rounding is in force, so a test passes on a GPU for the reason it passes here.
"""

TENSORFLOAT32 = {"atol": 1e-2, "rtol": 1e-2}


def accelerated():
    """Whether this process's Keras backend computes on a GPU (or another accelerator) rather than the CPU."""
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.default_backend() != "cpu"
    if backend == "tensorflow":
        import tensorflow as tf

        return bool(tf.config.list_logical_devices("GPU"))
    if backend == "torch":
        import torch

        return torch.cuda.is_available()
    return False


def tensorfloat32_in_force():
    """Whether float32 matrix products of this process may run in TensorFloat-32: an accelerator, default precision."""
    import keras

    if keras.backend.backend() == "torch":
        import torch

        return accelerated() and torch.get_float32_matmul_precision() != "highest"
    from seqtasks.lifecycle.backends import matmul_precision

    return accelerated() and matmul_precision() == "default"


def tolerance(atol=0.0, rtol=1e-7):
    """`atol`/`rtol` for `np.testing.assert_allclose` as given, or TensorFloat-32's where it is in force."""
    if tensorfloat32_in_force():
        return {"atol": max(atol, TENSORFLOAT32["atol"]), "rtol": max(rtol, TENSORFLOAT32["rtol"])}
    return {"atol": atol, "rtol": rtol}
