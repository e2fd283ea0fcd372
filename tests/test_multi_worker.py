"""Two worker processes on localhost train one model with MultiWorkerMirroredStrategy."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO

pytestmark = pytest.mark.slow


def _free_port():
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def test_two_workers_train_in_step_and_only_the_chief_exports(tmp_path):
    cluster = {"worker": [f"localhost:{_free_port()}" for _ in range(2)]}
    processes = []
    for index in range(2):
        folder = tmp_path / f"worker{index}"
        env = {
            **os.environ,
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}),
        }
        command = [sys.executable, "-m", "seqtasks", "run", "toy", "--output-dir", str(folder / "runs")]
        for override in [
            "distribute.strategy=auto",  # TF_CONFIG with two workers: MultiWorkerMirroredStrategy
            "training.epochs=2",
            "data.train_size=512",
            "data.validation_size=64",
            f"export.directory={folder / 'saved_models'}",
        ]:
            command += ["--set", override]
        processes.append(
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO)
        )
    outputs = []
    try:
        outputs = [process.communicate(timeout=420)[0] for process in processes]
    finally:
        for process in processes:
            process.kill()
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output[-3000:]
    histories = []
    for index in range(2):
        (metrics,) = (tmp_path / f"worker{index}" / "runs").glob("toy/*/metrics.json")
        histories.append(json.loads(metrics.read_text())["history"])
    # Losses are reduced over both workers' replicas, so both report the same numbers.
    np.testing.assert_allclose(histories[0]["loss"], histories[1]["loss"], rtol=1e-5)
    np.testing.assert_allclose(histories[0]["val_loss"], histories[1]["val_loss"], rtol=1e-5)
    # Mirrored variables: both workers end with the same weights.
    import keras

    import seqtasks.training.losses  # noqa: F401 - registers the classes the saved models name
    import seqtasks.models  # noqa: F401

    models = [
        keras.models.load_model(
            next((tmp_path / f"worker{index}" / "runs").glob("toy/*/model/model.keras")), safe_mode=True, compile=False
        )
        for index in range(2)
    ]
    for first, second in zip(models[0].weights, models[1].weights):
        np.testing.assert_allclose(first.numpy(), second.numpy(), rtol=1e-6, atol=1e-7)
    assert histories[0]["loss"][-1] < histories[0]["loss"][0]
    assert (tmp_path / "worker0" / "saved_models" / "toy" / "1" / "saved_model.pb").is_file()
    assert not (tmp_path / "worker1" / "saved_models").exists()
    assert "SavedModel:" in outputs[0] and "SavedModel:" not in outputs[1]
