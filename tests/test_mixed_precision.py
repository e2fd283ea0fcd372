"""Mixed precision: 16-bit compute, float32 where the numbers need it, and an export that serves."""

import json

import keras
import numpy as np
import pytest
from conftest import run_recipe, seqtasks_command, serve_in_tensorflow_only

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("precision, compute", [("mixed_bfloat16", "bfloat16"), ("mixed_float16", "float16")])
def test_toy_trains_and_exports_under_a_mixed_policy(precision, compute, tmp_path):
    run_dir, _ = run_recipe(
        "toy",
        tmp_path / "runs",
        f"training.precision={precision}",
        "training.epochs=2",
        "data.train_size=600",
        "data.validation_size=50",
        f"export.directory={tmp_path / 'saved_models'}",
    )
    assert keras.config.dtype_policy().name == "float32"  # the global policy is back
    losses = json.loads((run_dir / "metrics.json").read_text())["history"]["loss"]
    assert np.all(np.isfinite(losses)) and losses[1] < losses[0]
    model = keras.models.load_model(run_dir / "model" / "model.keras", safe_mode=True)
    assert model.decoder_layer.compute_dtype == compute and model.decoder_layer.variable_dtype == "float32"
    assert model.output_dense.compute_dtype == "float32"
    logits = model((np.array([[4, 5, 6]]), np.array([[1, 4]])))
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    if precision == "mixed_float16":
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    out = serve_in_tensorflow_only(tmp_path / "saved_models" / "toy" / "1", {"digits": ["1 2 3", ""]})
    assert out["digits"]["output"]["shape"] == [2] and out["digits"]["score"]["dtype"] == "float32"
    # A checkpoint (weights and the optimizer's state, loss scale included) exports like the final model.
    result = seqtasks_command("export", run_dir, "--checkpoint", "best", "--force")  # the final model holds these weights
    assert result.stdout.strip().splitlines()[-1] == f"SavedModel: {tmp_path / 'saved_models' / 'toy' / '2'}"
    again = serve_in_tensorflow_only(tmp_path / "saved_models" / "toy" / "2", {"digits": ["1 2 3", ""]})
    assert again["digits"]["output"]["value"] == out["digits"]["output"]["value"]
