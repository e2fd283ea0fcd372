"""A training run killed with SIGKILL resumes from its last checkpoint when the same command is run again."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import REPO

pytestmark = pytest.mark.slow

_EVERY = 25
_OVERRIDES = [
    "training.epochs=2",
    "data.train_size=1200",  # 150 steps an epoch
    "data.validation_size=100",
    "training.batch_size=8",
    f"training.checkpoint_every_steps={_EVERY}",
    "export.enabled=false",
    # A small model: what is under test is where training resumes, not what it learns.
    "model.embedding_dim=8",
    "model.encoder.units=8",
    "model.decoder.units=16",
]


def _command(output_dir):
    command = [sys.executable, "-m", "seqtasks", "run", "toy", "--output-dir", str(output_dir)]
    for override in _OVERRIDES:
        command += ["--set", override]
    return command


def _start(output_dir):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.Popen(
        _command(output_dir), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO
    )


def _state(output_dir):
    paths = list(output_dir.glob("toy/*/checkpoints/state.json"))
    return json.loads(paths[0].read_text()) if paths else None


def test_a_run_killed_mid_epoch_resumes_from_its_last_checkpoint_and_ends_as_if_never_stopped(tmp_path):
    reference = _start(tmp_path / "reference")
    killed = _start(tmp_path / "killed")
    try:
        deadline = time.monotonic() + 300
        seen = None
        # Wait for a checkpoint in the second epoch, then kill without warning.
        while time.monotonic() < deadline and killed.poll() is None:
            seen = _state(tmp_path / "killed")  # renamed into place whole: never half written
            if seen and seen["epoch"] == 1 and seen["batches_done"] >= 2 * _EVERY:
                os.kill(killed.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
        output = killed.communicate(timeout=60)[0]
        assert killed.returncode == -signal.SIGKILL, output[-3000:]
        reference_output = reference.communicate(timeout=300)[0]
        assert reference.returncode == 0, reference_output[-3000:]
    finally:
        for process in (reference, killed):
            process.kill()
    assert not list((tmp_path / "killed").glob("toy/*/metrics.json"))
    at_kill = _state(tmp_path / "killed")
    assert at_kill["steps"] >= seen["steps"] and at_kill["steps"] % _EVERY == 0 and not at_kill["done"]

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    resumed = subprocess.run(_command(tmp_path / "killed"), capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    (run_dir,) = (tmp_path / "killed").glob("toy/*")  # the same folder, no new one
    assert f"Resuming the unfinished run in {run_dir}" in resumed.stdout
    assert f"Resuming from step {at_kill['steps']} (epoch 2, batch {at_kill['batches_done']})" in resumed.stdout

    final, expected = _state(tmp_path / "killed"), _state(tmp_path / "reference")
    assert final["done"] and final["steps"] == expected["steps"] == 300
    assert final["optimizer_iterations"] == expected["optimizer_iterations"]
    # Same weights, optimizer state and data order as the run that was never stopped.
    np.testing.assert_allclose(final["history"]["val_loss"], expected["history"]["val_loss"], rtol=1e-5)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    reference_metrics = json.loads(next((tmp_path / "reference").glob("toy/*/metrics.json")).read_text())
    assert metrics["validation"] == reference_metrics["validation"]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == [
        "best.weights.h5",
        "state.json",
        "step-00000275.weights.h5",
        "step-00000300.weights.h5",
    ]
