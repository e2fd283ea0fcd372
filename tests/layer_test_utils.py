"""`run_layer_test`: the checks every seqtasks layer must pass."""


import keras
import numpy as np


def _symbolic_inputs(call_inputs):
    symbolic = {}
    for name, value in call_inputs.items():
        flat = keras.tree.flatten(value)
        tensors = [
            keras.Input(
                shape=array.shape[1:],
                dtype=str(array.dtype),
                name=name if len(flat) == 1 else f"{name}_{index}",
            )
            for index, array in enumerate(flat)
        ]
        symbolic[name] = keras.tree.pack_sequence_as(value, tensors)
    return symbolic


def _as_numpy_list(outputs):
    return [np.asarray(keras.ops.convert_to_numpy(x)) for x in keras.tree.flatten(outputs)]


def run_layer_test(layer_cls, init_kwargs, call_inputs, call_kwargs=None, tmp_path=None):
    """Checks a layer's contract and returns its eager outputs.

    - every constructor argument is a public attribute of the same value;
    - `get_config` -> `from_config` -> `get_config` is the identity;
    - an eager call and a symbolic (functional) call give the same structure
      and compatible shapes;
    - a functional model using the layer saves to `.keras` and reloads (safe
      mode) with identical outputs;
    - one `fit` step runs, gives a finite loss and changes the weights.

    `call_inputs` maps call argument names to NumPy arrays (or nested lists of
    them); `call_kwargs` holds the non-tensor call arguments.
    """
    call_kwargs = call_kwargs or {}
    layer = layer_cls(**init_kwargs)
    for name, value in init_kwargs.items():
        assert hasattr(layer, name), f"constructor argument {name!r} is not an attribute"
        attribute = getattr(layer, name)
        if isinstance(attribute, (int, float, bool, str, type(None))):
            assert attribute == value, f"{name}: {attribute!r} != {value!r}"
    config = layer.get_config()
    assert layer_cls.from_config(config).get_config() == config

    eager = layer(**call_inputs, **call_kwargs)
    eager_flat = _as_numpy_list(eager)

    symbolic_inputs = _symbolic_inputs(call_inputs)
    symbolic = layer(**symbolic_inputs, **call_kwargs)
    assert keras.tree.is_nested(symbolic) == keras.tree.is_nested(eager)
    symbolic_flat = keras.tree.flatten(symbolic)
    assert len(symbolic_flat) == len(eager_flat)
    for sym, value in zip(symbolic_flat, eager_flat):
        assert len(sym.shape) == value.ndim
        for expected, actual in zip(sym.shape, value.shape):
            assert expected is None or expected == actual, (sym.shape, value.shape)

    model = keras.Model(symbolic_inputs, symbolic_flat)
    model_outputs = _as_numpy_list(model(call_inputs))
    for expected, actual in zip(eager_flat, model_outputs):
        np.testing.assert_allclose(actual, expected, atol=1e-6)

    if tmp_path is not None:
        path = tmp_path / f"{layer_cls.__name__}.keras"
        model.save(path)
        restored = keras.models.load_model(path, safe_mode=True)
        for expected, actual in zip(model_outputs, _as_numpy_list(restored(call_inputs))):
            np.testing.assert_allclose(actual, expected, atol=1e-6)

    float_outputs = [i for i, out in enumerate(symbolic_flat) if "float" in str(out.dtype)]
    trainer = keras.Model(symbolic_inputs, [symbolic_flat[i] for i in float_outputs])
    trainer.compile(optimizer=keras.optimizers.SGD(0.1), loss=["mse"] * len(float_outputs))
    before = [keras.ops.convert_to_numpy(w) for w in trainer.trainable_weights]
    assert before, "the layer has no trainable weights"
    targets = [np.ones_like(eager_flat[i]) for i in float_outputs]
    history = trainer.fit(call_inputs, targets, epochs=1, batch_size=len(eager_flat[0]), verbose=0)
    assert np.isfinite(history.history["loss"][0])
    after = [keras.ops.convert_to_numpy(w) for w in trainer.trainable_weights]
    assert any(not np.allclose(b, a) for b, a in zip(before, after)), "fit did not change any weight"
    return eager
