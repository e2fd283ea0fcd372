"""The README's promises: its layer example runs, its Quickstart matches `.ci/run`."""

import re

import pytest
from conftest import REPO

README = (REPO / "README.md").read_text()


def _section(title):
    return README.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


# A fresh Python with TensorFlow takes ten seconds: the whole suite runs it, the fast tier does not.
@pytest.mark.slow
def test_layer_example_runs(fresh_python):
    (code,) = re.findall(r"```python\n(.*?)```", _section("Using the layers in your own Keras model"), re.S)
    result = fresh_python(code)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "(2, 4, 1000)"


def test_quickstart_has_two_commands_and_ci_runs_the_test_one():
    commands = [
        line
        for block in re.findall(r"```bash\n(.*?)```", _section("Quickstart"), re.S)
        for line in block.splitlines()
        if line and not line.startswith("#")
    ]
    assert len(commands) == 2
    assert "seqtasks run recipes/" in commands[0]
    # CI runs the same steps in the same order (it starts the JAX run between two of them).
    ci = (REPO / ".ci" / "run").read_text()
    positions = [ci.find(step) for step in commands[1].split(" && ")]
    assert -1 not in positions and positions == sorted(positions), (commands[1], positions)
