import subprocess
import sys

import pytest
from click.testing import CliRunner

from seqtasks import __version__
from seqtasks.cli import main
from seqtasks.utils import quiet
from tests.conftest import REPO


def seqtasks(*args, cwd=REPO):
    return subprocess.run(
        [sys.executable, "-m", "seqtasks", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.mark.slow
def test_help_does_not_import_tensorflow(fresh_python):
    result = fresh_python(
        "import sys\n"
        "from seqtasks.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit as done:\n"
        "    assert done.code == 0\n"
        "heavy = [m for m in ('tensorflow', 'keras', 'jax') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    assert result.returncode == 0, result.stderr
    assert "run" in result.stdout and "recipes" in result.stdout


def test_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"seqtasks, version {__version__}"


def test_recipes_lists_builtins_with_descriptions():
    result = CliRunner().invoke(main, ["recipes"])
    assert result.exit_code == 0
    line = next(line for line in result.output.splitlines() if line.startswith("toy "))
    assert "Reverse digit sequences" in line


@pytest.mark.slow
@pytest.mark.parametrize(
    "recipe_text, extra_args, expected",
    [
        (
            "task: toy\nmodel:\n  attention:\n    score: dott\n",
            [],
            "bad.yaml: model.attention.score: expected one of dot, general, concat; got 'dott' (line 4)",
        ),
        ("task: toy\n", ["--set", "training.epohcs=2"], "--set training.epohcs: unknown key training.epohcs"),
        (None, [], "missing.yaml: no such recipe file"),
    ],
)
def test_user_errors_exit_2_with_one_line_and_no_traceback(tmp_path, recipe_text, extra_args, expected):
    path = tmp_path / ("bad.yaml" if recipe_text else "missing.yaml")
    if recipe_text:
        path.write_text(recipe_text)
    result = seqtasks("run", str(path), *extra_args, "--output-dir", str(tmp_path / "runs"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    assert expected in lines[0]
    assert not (tmp_path / "runs").exists()


def test_unwritable_output_dir_exits_2(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = CliRunner().invoke(main, ["run", "toy", "--output-dir", str(blocker / "runs")])
    assert result.exit_code == 2
    assert "cannot create the run folder" in result.output


@pytest.mark.parametrize("args, quieted", [(["recipes"], 1), (["--verbose", "recipes"], 0)])
def test_every_command_is_quiet_unless_verbose(monkeypatch, args, quieted):
    calls = []
    monkeypatch.setattr(quiet, "quiet_tensorflow", lambda: calls.append(True))
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert len(calls) == quieted
