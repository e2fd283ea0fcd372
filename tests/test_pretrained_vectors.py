"""Pretrained word vectors in the NER and sentiment tasks: frozen, fine-tuned, fine-tuned after N epochs."""

import keras
import numpy as np
import pytest

from seqtasks.training.optimizers import Adam, AdamW

pytestmark = pytest.mark.backends


def _model_and_data(seed=0):
    keras.utils.set_random_seed(seed)
    ids = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(20, 4, name="embedding")(ids)
    pooled = keras.layers.GlobalAveragePooling1D()(embedded)
    model = keras.Model(ids, keras.layers.Dense(2, name="dense")(pooled))
    rng = np.random.default_rng(seed)
    return model, rng.integers(1, 20, (32, 5)).astype("int32"), rng.integers(0, 2, 32).astype("int32")


@pytest.mark.slow
@pytest.mark.parametrize("optimizer_class", [Adam, AdamW])
def test_frozen_variables_stay_as_they_are_for_their_epochs_then_train(optimizer_class):
    model, x, y = _model_and_data()
    optimizer = optimizer_class(0.05, **({"weight_decay": 0.5} if optimizer_class is AdamW else {}))
    embedding = model.get_layer("embedding").embeddings
    optimizer.freeze([embedding], epochs=2)
    optimizer.steps_per_epoch = 4
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    start, dense = np.array(embedding), np.array(model.get_layer("dense").kernel)
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)  # 8 steps: two frozen epochs of 4
    assert int(optimizer.iterations) == 8
    np.testing.assert_array_equal(np.array(embedding), start)  # neither the gradient nor the weight decay moved it
    assert not np.allclose(np.array(model.get_layer("dense").kernel), dense)
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    assert not np.allclose(np.array(embedding), start)


@pytest.mark.slow
def test_frozen_variables_need_the_steps_of_an_epoch():
    model, x, y = _model_and_data()
    optimizer = Adam(0.01)
    optimizer.freeze([model.get_layer("embedding").embeddings], epochs=1)
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(ValueError, match="frozen variables need steps_per_epoch"):
        model.fit(x, y, batch_size=4, epochs=1, verbose=0)


def test_the_vectors_start_the_embeddings_and_never_keeps_them_frozen():
    from types import SimpleNamespace

    from seqtasks.models.pretrained_vectors import apply_vectors, freeze_for_epochs

    matrix = np.arange(80, dtype="float32").reshape(20, 4)
    for mode, trainable in (("always", True), ("never", False), ("after", True)):
        model, _, _ = _model_and_data()
        layer = model.get_layer("embedding")
        config = SimpleNamespace(path="v.txt", fine_tune=mode, fine_tune_after=3)
        apply_vectors(config, [layer], matrix)
        np.testing.assert_array_equal(np.array(layer.embeddings), matrix)
        assert layer.trainable is trainable
        optimizer = Adam(0.01)
        freeze_for_epochs(config, [layer], optimizer)
        assert optimizer.frozen_paths == ((layer.embeddings.path,) if mode == "after" else ())
        assert optimizer.frozen_epochs == (3 if mode == "after" else 0)
    model, _, _ = _model_and_data()
    before = np.array(model.get_layer("embedding").embeddings)
    apply_vectors(SimpleNamespace(path="", fine_tune="never", fine_tune_after=1), [model.get_layer("embedding")], None)
    np.testing.assert_array_equal(np.array(model.get_layer("embedding").embeddings), before)
    assert model.get_layer("embedding").trainable
