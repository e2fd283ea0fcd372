"""A model's inference function compiled for the Keras backend in use, called with and returning NumPy arrays.

Under TensorFlow a `tf.function` traced once for inputs whose `None` axes take
any size; under JAX `jax.jit`, with the model's variables passed as arguments
(not folded into the program as constants) and one compilation per input
shape, so callers pad their batches to a few shapes (`bucket_width`); under
other backends the function runs as it is.
"""

import contextlib
import time

import numpy as np

_BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


class CompiledFunction:
    """`fn(*inputs)` over `model`'s variables, compiled.

    Args:
        fn: a function of tensors that calls `model` (or its methods).
        model: the Keras model whose variables `fn` reads.
        input_specs: `(shape, dtype)` per input; `None` in a shape is any size.

    Call arguments: NumPy arrays matching `input_specs`. Returns what `fn`
    returns, every tensor as a NumPy array.
    """

    def __init__(self, fn, model, input_specs):
        import keras

        self.backend = keras.backend.backend()
        self.compile_seconds = 0.0
        self._traced = False
        self.input_specs = [(tuple(shape), np.dtype(dtype)) for shape, dtype in input_specs]
        if self.backend == "tensorflow":
            import tensorflow as tf

            # AutoGraph off: the searches' loops are already `while_loop`s, and converting the call tree
            # costs tracing time (BENCHMARKS.md, "Graph costs").
            self._run = tf.function(
                fn, input_signature=[tf.TensorSpec(s, d) for s, d in self.input_specs], autograph=False
            )
        elif self.backend == "jax":
            import jax

            variables = list(model.variables)

            def pure(values, *inputs):
                with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                    return fn(*inputs)

            self._variables = variables
            self._jitted = jax.jit(pure)
            self._compiled = {}
            self._run = self._run_compiled
        else:
            self._run = fn

    @property
    def compiles_per_shape(self):
        """Whether each new input shape compiles the function again (JAX): callers should pad to few shapes."""
        return self.backend == "jax"

    def compile(self, *shapes):
        """Traces (TensorFlow: once, for the input specs) or compiles for these input shapes (JAX) ahead of
        the first call; the time taken adds to `compile_seconds`. Returns self."""
        if self.backend == "tensorflow" and not self._traced:
            started = time.perf_counter()
            self._run.get_concrete_function()
            self.compile_seconds += time.perf_counter() - started
            self._traced = True
        elif self.backend == "jax":
            self._executable(tuple(tuple(shape) for shape in shapes))
        return self

    def _executable(self, shapes):
        import jax

        if shapes not in self._compiled:
            values = [v.value for v in self._variables]
            specs = [jax.ShapeDtypeStruct(shape, dtype) for shape, (_, dtype) in zip(shapes, self.input_specs)]
            started = time.perf_counter()
            self._compiled[shapes] = self._jitted.lower(values, *specs).compile()
            self.compile_seconds += time.perf_counter() - started
        return self._compiled[shapes]

    def _run_compiled(self, *inputs):
        inputs = [np.asarray(array, dtype) for array, (_, dtype) in zip(inputs, self.input_specs)]
        executable = self._executable(tuple(array.shape for array in inputs))
        return executable([v.value for v in self._variables], *inputs)

    def __call__(self, *inputs):
        import keras

        if self.backend == "tensorflow":
            self.compile()

        return keras.tree.map_structure(np.asarray, self._run(*inputs))


def bucket_width(length):
    """The length an axis of `length` is padded to where each shape compiles anew: a power of two, at least 8."""
    width = 8
    while width < length:
        width *= 2
    return width


def pad_batch(array, spec_shape, batch_size, value):
    """`array` grown to `batch_size` rows (copies of its last row) and, along each later axis `spec_shape`
    leaves `None`, to `bucket_width` with `value`: few shapes, so few compilations."""
    rows = np.concatenate([array, np.repeat(array[-1:], max(0, batch_size - len(array)), axis=0)])
    declared = tuple(spec_shape[1:]) + (0,) * rows.ndim  # axes past the spec keep their size
    pads = [(0, 0)] + [(0, bucket_width(size) - size if fixed is None else 0) for size, fixed in zip(rows.shape[1:], declared)]
    return np.pad(rows, pads, constant_values=value)


@contextlib.contextmanager
def xla_compilations(found=None, names=("train_step", "test_step")):
    """Counts JAX's XLA compilations of the functions `names` while the block runs.

    Yields `found` (a new dict if None) with the counts added as they happen:
    `{name: {"compilations": n, "seconds": s}}` for each name compiled at
    least once (a hit in JAX's persistent compilation cache counts, with the
    time it took to load). Unchanged under other backends. Each new batch
    shape of a step compiles it again, which is what padding to bucket
    boundaries keeps few.
    """
    import keras

    found = {} if found is None else found
    if keras.backend.backend() != "jax":
        yield found
        return
    import jax

    wanted = {f"jit({name})": name for name in names}

    def listener(event, duration, **kwargs):
        name = wanted.get(kwargs.get("fun_name"))
        if event == _BACKEND_COMPILE_EVENT and name is not None:
            entry = found.setdefault(name, {"compilations": 0, "seconds": 0.0})
            entry["compilations"] += 1
            entry["seconds"] = round(entry["seconds"] + duration, 2)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield found
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
