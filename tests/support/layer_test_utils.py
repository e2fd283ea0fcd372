"""`run_layer_test`: the checks every seqtasks layer must pass."""


import keras
import numpy as np

# In `expected_output_dtypes`: the compute dtype of the policy under test.
COMPUTE_DTYPE = "compute"
# Policies checked with eager calls only, after the full checks under float32.
MIXED_POLICIES = ("mixed_float16", "mixed_bfloat16")


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


def _is_shape(value):
    return isinstance(value, tuple) and all(dim is None or isinstance(dim, int) for dim in value)


def _is_tensor(value):
    return not isinstance(value, (list, tuple, dict))


def _map(fn, tree, is_leaf=_is_tensor):
    """`fn` applied to every leaf, keeping the exact container types (a list stays a list)."""
    if is_leaf(tree):
        return fn(tree)
    if isinstance(tree, dict):
        return {key: _map(fn, value, is_leaf) for key, value in tree.items()}
    return type(tree)(_map(fn, value, is_leaf) for value in tree)


def _flatten(tree, is_leaf=_is_tensor):
    leaves = []
    _map(leaves.append, tree, is_leaf)
    return leaves


def _comparable(value):
    if hasattr(value, "get_config") and not isinstance(value, type):
        return type(value).__name__, value.get_config()
    return value


def _dtype(tensor):
    return keras.backend.standardize_dtype(tensor.dtype)


def _check_outputs(eager, symbolic, expected_output_shapes, expected_dtypes, policy):
    """Structure, shapes and dtypes of one eager and one symbolic call."""
    structure = _map(lambda _: None, eager)
    assert _map(lambda _: None, symbolic) == structure, "symbolic and eager outputs differ in structure"
    assert _map(lambda _: None, expected_output_shapes, _is_shape) == structure, (
        "expected_output_shapes is not nested like the outputs"
    )
    eager_shapes = _map(lambda x: tuple(int(dim) for dim in x.shape), eager)
    assert eager_shapes == expected_output_shapes, f"{policy}: {eager_shapes} != {expected_output_shapes}"
    for sym, expected in zip(_flatten(symbolic), _flatten(expected_output_shapes, _is_shape)):
        assert len(sym.shape) == len(expected), (sym.shape, expected)
        for sym_dim, dim in zip(sym.shape, expected):
            assert sym_dim is None or sym_dim == dim, f"{policy}: symbolic {sym.shape} vs {expected}"

    eager_dtypes = [_dtype(x) for x in _flatten(eager)]
    assert [_dtype(x) for x in _flatten(symbolic)] == eager_dtypes, f"{policy}: symbolic and eager dtypes differ"
    assert eager_dtypes == expected_dtypes, f"{policy}: output dtypes {eager_dtypes} != {expected_dtypes}"
    for value, dtype in zip(_as_numpy_list(eager), eager_dtypes):
        if "float" in dtype:
            assert np.all(np.isfinite(value.astype("float32"))), f"{policy}: non-finite outputs"


def _check_weights(layer, expected):
    trainable, non_trainable, params = expected
    assert len(layer.trainable_weights) == trainable, (
        f"{len(layer.trainable_weights)} trainable weights, expected {trainable}: "
        f"{[w.path for w in layer.trainable_weights]}"
    )
    assert len(layer.non_trainable_weights) == non_trainable, [w.path for w in layer.non_trainable_weights]
    if params is not None:
        count = sum(int(np.prod(w.shape)) for w in layer.weights)
        assert count == params, f"{count} parameters, expected {params}"
    variable_dtype = layer.dtype_policy.variable_dtype
    assert all(_dtype(w) == variable_dtype for w in layer.weights), "weights not in the variable dtype"


def run_layer_test(
    layer_cls,
    init_kwargs,
    call_inputs,
    call_kwargs=None,
    tmp_path=None,
    *,
    expected_output_shapes,
    expected_num_trainable_weights,
    expected_num_non_trainable_weights,
    expected_num_params=None,
    expected_output_dtypes=None,
    expected_weight_paths=None,
):
    """Checks a layer's contract and returns its eager outputs (float32 policy).

    - every constructor argument is a public attribute of the same value;
    - `get_config` -> `from_config` -> `get_config` is the identity;
    - an eager call gives exactly `expected_output_shapes` (nested like the
      outputs: a tuple of ints per tensor, in the same lists and tuples), and
      a symbolic (functional) call gives the same structure and dtypes, with
      the same shapes or `None` for dimensions unknown there;
    - the built layer has the expected numbers of trainable and
      non-trainable weights (and of parameters, when given);
    - a functional model using the layer saves to `.keras` and reloads (safe
      mode) with identical outputs;
    - one `fit` step runs, gives a finite loss and changes the weights;
    - under each of `MIXED_POLICIES` (passed as `dtype=`), an eager and a
      symbolic call give the same shapes, finite values, the expected dtypes,
      the same weight counts and weights in float32, and every sublayer
      has the layer's policy;
    - `from_config(get_config())` has the same value of every attribute the
      config names (initializers compared by their configs);
    - when `expected_weight_paths` is given, the weights' paths below the
      layer's own name, in order.

    `call_inputs` maps call argument names to NumPy arrays (or nested lists of
    them); `call_kwargs` holds the non-tensor call arguments.
    `expected_output_dtypes`, nested like the outputs, holds dtype names or
    `COMPUTE_DTYPE` for the policy's compute dtype; by default every output is
    in the compute dtype.
    """
    call_kwargs = call_kwargs or {}
    expected_weights = (
        expected_num_trainable_weights,
        expected_num_non_trainable_weights,
        expected_num_params,
    )

    def dtypes_for(policy):
        compute_dtype = keras.DTypePolicy(policy).compute_dtype
        if expected_output_dtypes is None:
            return [compute_dtype] * len(_flatten(expected_output_shapes, _is_shape))
        return [
            compute_dtype if dtype == COMPUTE_DTYPE else dtype
            for dtype in _flatten(expected_output_dtypes, lambda x: isinstance(x, str))
        ]

    layer = layer_cls(**init_kwargs, dtype="float32")
    for name, value in init_kwargs.items():
        assert hasattr(layer, name), f"constructor argument {name!r} is not an attribute"
        attribute = getattr(layer, name)
        if isinstance(attribute, (int, float, bool, str, type(None))):
            assert attribute == value, f"{name}: {attribute!r} != {value!r}"
    config = layer.get_config()
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config
    for name in config:
        if hasattr(layer, name) and name != "dtype":
            assert _comparable(getattr(clone, name)) == _comparable(getattr(layer, name)), (
                f"{name} differs after get_config -> from_config"
            )

    eager = layer(**call_inputs, **call_kwargs)
    eager_flat = _as_numpy_list(eager)
    _check_weights(layer, expected_weights)
    if expected_weight_paths is not None:
        # Saved models and checkpoints find weights by these paths.
        paths = [w.path.split("/", 1)[1] for w in layer.weights]
        assert paths == list(expected_weight_paths), paths

    symbolic_inputs = _symbolic_inputs(call_inputs)
    symbolic = layer(**symbolic_inputs, **call_kwargs)
    _check_outputs(eager, symbolic, expected_output_shapes, dtypes_for("float32"), "float32")
    symbolic_flat = keras.tree.flatten(symbolic)

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

    for policy in MIXED_POLICIES:
        mixed = layer_cls(**init_kwargs, dtype=policy)
        mixed_eager = mixed(**call_inputs, **call_kwargs)
        _check_weights(mixed, expected_weights)
        for sublayer in mixed._flatten_layers(include_self=False):
            assert sublayer.dtype_policy.name == policy, f"{sublayer.name} has {sublayer.dtype_policy.name}"
        mixed_symbolic = mixed(**_symbolic_inputs(call_inputs), **call_kwargs)
        _check_outputs(mixed_eager, mixed_symbolic, expected_output_shapes, dtypes_for(policy), policy)
    return eager


def tagger_inputs(rows, chars=4):
    """`SequenceTagger` inputs for rows of word ids (0 pads the shorter rows), with characters and casing
    derived from the ids."""
    width = max(len(row) for row in rows)
    words = np.zeros((len(rows), width), "int32")
    for index, row in enumerate(rows):
        words[index, : len(row)] = row
    characters = np.where(words[:, :, None] > 0, (words[:, :, None] + np.arange(chars)) % 9 + 1, 0).astype("int32")
    casing = np.where(words > 0, words % 5 + 1, 0).astype("int32")
    return {"words": words, "characters": characters, "casing": casing}


def check_replicas_reach_every_member(ensemble):
    """An in-run ensemble (`member_models`) passes `use_replicas` on to each member: every member's loss weighs
    its share of the step's tokens or sentences as the ensemble's does."""
    from seqtasks.training.losses import ONE_REPLICA

    class TwoReplicas:
        def count(self):
            return 2

    assert all(member.replicas is ONE_REPLICA for member in ensemble.member_models)
    replicas = TwoReplicas()
    ensemble.use_replicas(replicas)
    assert ensemble.replicas is replicas and all(member.replicas is replicas for member in ensemble.member_models)
