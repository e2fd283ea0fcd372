import keras
import numpy as np
import pytest
from keras import ops

from seqtasks.training.compiled import CompiledFunction, bucket_width, pad_batch

pytestmark = pytest.mark.backends


@pytest.mark.parametrize("length, width", [(0, 8), (1, 8), (8, 8), (9, 16), (16, 16), (17, 32), (100, 128)])
def test_bucket_widths_are_powers_of_two_from_eight(length, width):
    assert bucket_width(length) == width


def test_pad_batch_fills_rows_with_the_last_row_and_free_axes_with_the_value():
    array = np.arange(1, 16, dtype=np.int32).reshape(3, 5)
    padded = pad_batch(array, (None, None), 4, 0)
    assert padded.shape == (4, 8)
    np.testing.assert_array_equal(padded[:3, :5], array)
    np.testing.assert_array_equal(padded[3, :5], array[2])
    assert not padded[:, 5:].any()


def test_pad_batch_keeps_declared_axes_and_those_past_the_spec():
    array = np.ones((2, 3, 5), np.float32)
    assert pad_batch(array, (None, None), 2, 0).shape == (2, 8, 5)
    assert pad_batch(array, (None, 3, 5), 5, 0).shape == (5, 3, 5)
    assert pad_batch(array, (None, None, None), 2, -1.0)[0, 0, 7] == -1.0


def _model():
    inputs = keras.Input((None, 3))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    model.build((None, None, 3))
    return model


def test_a_compiled_function_gives_the_model_s_outputs_for_every_shape():
    model = _model()
    compiled = CompiledFunction(lambda x: {"y": ops.tanh(model(x))}, model, [((None, None, 3), "float32")])
    assert compiled.compiles_per_shape == (keras.backend.backend() == "jax")
    for shape in [(2, 4, 3), (5, 1, 3)]:
        x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
        out = compiled(x)
        assert isinstance(out["y"], np.ndarray)
        np.testing.assert_allclose(out["y"], np.tanh(np.asarray(model(x))), atol=1e-6)
    assert compiled.compile_seconds > 0


def test_a_compiled_function_reads_the_variables_when_called_not_when_compiled():
    model = _model()
    compiled = CompiledFunction(lambda x: model(x), model, [((None, None, 3), "float32")]).compile((1, 2, 3))
    x = np.ones((1, 2, 3), np.float32)
    before = compiled(x)
    kernel, bias = model.layers[-1].kernel, model.layers[-1].bias
    kernel.assign(np.zeros((3, 2), np.float32))
    bias.assign(np.array([1.5, -2.0], np.float32))
    np.testing.assert_allclose(compiled(x), np.broadcast_to([1.5, -2.0], (1, 2, 2)))
    assert not np.allclose(before, compiled(x))


def test_xla_compilations_count_each_new_shape_of_the_named_functions_under_jax():
    from seqtasks.training.compiled import xla_compilations

    if keras.backend.backend() != "jax":
        with xla_compilations() as found:
            keras.ops.add(np.ones(2), 1.0)
        assert found == {}
        return
    import jax

    def train_step(x):
        return (x * 2.0).sum()

    def other(x):
        return x + 1.0

    step, unrelated = jax.jit(train_step), jax.jit(other)
    with xla_compilations() as found:
        for length in (3, 3, 5, 3):
            step(np.ones(length, np.float32))
            unrelated(np.ones(length, np.float32))
    step(np.ones(7, np.float32))  # after the block: not counted
    assert found["train_step"]["compilations"] == 2 and set(found) == {"train_step"}
    assert found["train_step"]["seconds"] >= 0
    # A later block adds to the counts it is given, as `fit` does over its calls of `model.fit`.
    with xla_compilations(found) as again:
        step(np.ones(9, np.float32))
    assert again is found and found["train_step"]["compilations"] == 3
