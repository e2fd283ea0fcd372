"""A task added in one file (`tests/support/char_tagging.py`) and one task-table row added here at run time.

It trains, evaluates, exports, serves through `seqtasks serve` and answers
through `seqtasks.load` without a line of it anywhere in the package: the
runner, the exports, the server and the Python client ask the task and its
row, never name it.
"""

import json
import os
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

import seqtasks
from seqtasks.cli import main
from tests.conftest import REPO, SAMPLE_PAIRS, run_recipe, serve_in_tensorflow_only
from tests.support import char_tagging
from tests.support.serving_support import free_port, post_json, request

pytestmark = pytest.mark.slow

RECIPE = """
task: char_tagging
name: chars
seed: 4
data: {path: chars.tsv, validation_size: 20, max_length: 40}
model: {embedding_dim: 16, units: 16}
training: {epochs: 6, batch_size: 16, learning_rate: 0.02}
"""
PROBE = "Tom has 3 cats, Ana 12."


def _serve_with_the_row(export, port):
    """`seqtasks serve EXPORT` in a fresh process whose task table got the row first, as this test's did."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from tests.support import char_tagging\n"
        "from seqtasks.tasks.table import TASKS\n"
        "TASKS[char_tagging.ROW.name] = char_tagging.ROW\n"
        "from seqtasks.cli import main\n"
        "main(['serve', sys.argv[2], '--port', sys.argv[3]])\n"
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.Popen([sys.executable, "-c", code, str(REPO), str(export), str(port)], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_task_in_one_file_and_one_row_trains_evaluates_exports_serves_and_loads(tmp_path, monkeypatch):
    from seqtasks.tasks.table import TASKS

    monkeypatch.setitem(TASKS, char_tagging.ROW.name, char_tagging.ROW)
    texts = [line.split("\t")[0] for line in SAMPLE_PAIRS.read_text(encoding="utf-8").splitlines()[:300]]
    texts += [f"Room {n} has {n * 7} seats." for n in range(1, 60)]
    (tmp_path / "chars.tsv").write_text("".join(f"{t}\t{char_tagging.char_tags(t)}\n" for t in texts))
    (tmp_path / "chars.yaml").write_text(RECIPE)

    run_dir, output = run_recipe(tmp_path / "chars.yaml", tmp_path / "runs", f"export.directory={tmp_path / 'exports'}")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["validation"]["char_accuracy"] > 0.9, metrics
    assert "validation char_accuracy:" in output
    expected = list(zip(PROBE, char_tagging.char_tags(PROBE)))

    # Evaluated again, exported again and run by `seqtasks predict`, as the other tasks are.
    cli = CliRunner()
    evaluated = cli.invoke(main, ["eval", str(run_dir), "--data", str(tmp_path / "chars.tsv")])
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads((run_dir / "eval" / "chars" / "metrics.json").read_text())["validation"]["char_accuracy"] > 0.9
    exported = cli.invoke(main, ["export", str(run_dir), "--force"])
    assert exported.exit_code == 0, exported.output
    export = tmp_path / "exports" / "chars" / "2"
    predicted = cli.invoke(main, ["predict", str(export), PROBE])
    assert predicted.exit_code == 0, predicted.output
    assert predicted.stdout.rstrip("\n") == " ".join(f"{c}/{t}" for c, t in expected)

    # TensorFlow alone serves the export; its card cites the task's own limits.
    served = serve_in_tensorflow_only(export, {"probe": [PROBE, ""]})["probe"]
    assert served["tags"]["value"][0][: len(PROBE)] == [tag for _, tag in expected]
    assert served["tokens"]["value"][1] == [""] * len(served["tokens"]["value"][1])
    card = (export / "assets.extra" / "MODEL_CARD.md").read_text()
    assert "Tag every character of a text" in card and "cut to its first 40 tokens" in card

    # The Python client, from the export and from the run folder.
    for path in (export, run_dir):
        model = seqtasks.load(path)
        assert model.task == "char_tagging"
        tagged = model.tag(PROBE)
        assert list(zip(tagged.tokens, tagged.tags)) == expected and tagged.entities is None

    # `seqtasks serve`, in a process of its own.
    port = free_port()
    server = _serve_with_the_row(tmp_path / "exports" / "chars", port)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            if server.poll() is not None:
                raise AssertionError(server.stdout.read())
            try:
                if request("GET", url + "/healthz", timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        status, answer = post_json(url + "/v1/models/chars:predict", {"instances": [PROBE]})
        assert status == 200, answer
        row = answer["predictions"][0]
        assert row["tags"][: len(PROBE)] == [tag for _, tag in expected] and row["tokens"][: len(PROBE)] == list(PROBE)
        assert request("GET", url + "/seqtasks/models")[1]["models"][0]["task"] == "char_tagging"
    finally:
        server.terminate()
        server.wait(60)
