"""A functional model built from the layers reloads in a fresh process, identically."""

import json

import keras
import numpy as np
import pytest

from seqtasks.layers import AttentionDecoder, BahdanauAttention, LuongAttention, StackedRNN

SOURCE = np.array([[3, 4, 5, 6, 0], [7, 8, 0, 0, 0]])
TARGET = np.array([[1, 3, 4, 5], [1, 7, 0, 0]])


def build_model():
    source = keras.Input((None,), dtype="int32", name="source")
    target = keras.Input((None,), dtype="int32", name="target")
    memory, states = StackedRNN(units=8, num_layers=2, name="encoder")(
        keras.layers.Embedding(12, 6, mask_zero=True)(source)
    )
    embedded_target = keras.layers.Embedding(12, 6, mask_zero=True)(target)
    decoded, weights = AttentionDecoder(units=8, num_layers=2, attention="bahdanau", name="decoder")(
        embedded_target, memory, initial_state=states, return_attention=True
    )
    luong_context, _ = LuongAttention(score="general", name="luong")(decoded, memory)
    bahdanau_context, _ = BahdanauAttention(units=5, name="bahdanau")(decoded, memory)
    logits = keras.layers.Dense(12)(
        keras.layers.Concatenate()([decoded, luong_context, bahdanau_context])
    )
    return keras.Model([source, target], [logits, weights])


# A fresh Python with TensorFlow takes ten seconds: the whole suite runs it, the fast tier does not.
@pytest.mark.slow
def test_functional_model_reloads_in_a_fresh_process(tmp_path, fresh_python):
    model = build_model()
    expected = [np.asarray(x) for x in model.predict([SOURCE, TARGET], verbose=0)]
    path = tmp_path / "model.keras"
    model.save(path)
    (tmp_path / "inputs.json").write_text(json.dumps([SOURCE.tolist(), TARGET.tolist()]))
    result = fresh_python(
        f"""
import json, sys
import numpy as np, keras
import seqtasks.layers
source, target = [np.array(x) for x in json.load(open({str(tmp_path / "inputs.json")!r}))]
model = keras.models.load_model({str(path)!r}, safe_mode=True)
logits, weights = model.predict([source, target], verbose=0)
np.save({str(tmp_path / "logits.npy")!r}, logits)
np.save({str(tmp_path / "weights.npy")!r}, weights)
assert "tensorflow" in sys.modules  # the default backend
"""
    )
    assert result.returncode == 0, result.stderr[-3000:]
    np.testing.assert_array_equal(np.load(tmp_path / "logits.npy"), expected[0])
    np.testing.assert_array_equal(np.load(tmp_path / "weights.npy"), expected[1])
    # Padded source positions of the second sentence get no attention.
    assert np.all(expected[1][1, :, 2:] == 0.0)
