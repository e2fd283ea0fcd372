"""`seqtasks average --last N` on a run that keeps more than N checkpoints: the mean of exactly the newest N.

The run is a toy run folder made here without training: its recipe and four
step checkpoints of a tiny model, each with weights of its own
(`save_weights`, no `fit`).
"""

import keras
import numpy as np
import pytest
from conftest import seqtasks_command

from seqtasks.lifecycle.runner import Runner
from seqtasks.recipe import dump_recipe, load_recipe
from seqtasks.training.checkpoints import step_file

STEPS = (10, 20, 30, 40)
TINY = ["model.embedding_dim=4", "model.encoder.units=4", "model.decoder.units=4", "data.num_symbols=3"]


def _floating(model):
    """The model's floating-point weights: what `average` averages (this model has no others)."""
    return [v for v in model.weights if np.issubdtype(np.dtype(v.dtype), np.floating)]


@pytest.fixture
def run_with_four_checkpoints(tmp_path):
    """`(run_dir, {step: [floating weights]})`, each checkpoint's weights drawn apart."""
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "recipe.yaml").write_text(dump_recipe(load_recipe("recipes/toy.yaml", TINY)))
    runner = Runner.open(run_dir, log=lambda line: None)
    model = runner.task.build_model()
    model.build()
    runner.task.compile_model(model)
    model.optimizer.build(model.trainable_variables)
    rng = np.random.default_rng(0)
    floating = {}
    for step in STEPS:
        for variable in _floating(model):
            variable.assign(rng.normal(size=variable.shape).astype(np.dtype(variable.dtype)))
        model.optimizer.iterations.assign(step)
        model.save_weights(run_dir / "checkpoints" / step_file(step))
        floating[step] = [np.array(v.numpy()) for v in _floating(model)]
    return run_dir, floating


def test_average_last_3_of_4_kept_checkpoints_is_the_mean_of_the_newest_3(run_with_four_checkpoints):
    run_dir, floating = run_with_four_checkpoints
    result = seqtasks_command("average", run_dir, "--last", 3)
    path = run_dir / "checkpoints" / "average-3-to-step-00000040.weights.h5"
    assert result.output.splitlines()[-2:] == ["Averaged the checkpoints of steps 20, 30, 40", f"Checkpoint: {path}"]
    averaged = Runner.open(run_dir, log=lambda line: None).load_model(str(path))
    weights = [np.array(v.numpy()) for v in _floating(averaged)]
    assert len(weights) == len(floating[40]) > 0
    newest = [np.mean([floating[step][index] for step in STEPS[1:]], axis=0) for index in range(len(weights))]
    every = [np.mean([floating[step][index] for step in STEPS], axis=0) for index in range(len(weights))]
    for found, expected in zip(weights, newest):
        np.testing.assert_allclose(found, expected, rtol=1e-6, atol=1e-7)
    # The oldest checkpoint is not in it: with it, the mean would be far from what was written.
    assert max(float(np.max(np.abs(found - wrong))) for found, wrong in zip(weights, every)) > 0.1
    # The optimizer's state is the newest checkpoint's.
    assert int(averaged.optimizer.iterations.numpy()) == STEPS[-1]


def test_average_last_2_names_and_averages_the_newest_2_only(run_with_four_checkpoints, tmp_path):
    run_dir, floating = run_with_four_checkpoints
    output = tmp_path / "newest.weights.h5"
    result = seqtasks_command("average", run_dir, "--last", 2, "--output", output)
    assert result.output.splitlines()[-2:] == ["Averaged the checkpoints of steps 30, 40", f"Checkpoint: {output}"]
    averaged = Runner.open(run_dir, log=lambda line: None).load_model(str(output))
    assert len(_floating(averaged)) == len(floating[40]) > 0
    for index, variable in enumerate(_floating(averaged)):
        expected = (floating[30][index] + floating[40][index]) / 2
        np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-6, atol=1e-7)
    assert keras.ops.convert_to_numpy(averaged.optimizer.iterations) == 40
