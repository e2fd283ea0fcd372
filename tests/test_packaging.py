"""The wheel holds everything a user needs: installed on its own, every built-in recipe with shipped data runs."""

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow  # builds a wheel

# Each recipe that ships its data, from the wheel: its run folder is made after its shipped files were checked and
# read whole, its vocabularies are learned from them and its first batch is built (what is under test is that the
# installed package finds and reads what it ships, not what it learns: training and evaluation read nothing
# shipped). Captioning, whose drawings were once left out of the wheel, runs whole on a tiny model and exports.
SHORT = ["--set", "training.epochs=1", "--set", "training.max_minutes=0.01", "--set", "export.enabled=false"]
TINY_SEQ2SEQ = ["--set", "model.embedding_dim=8", "--set", "model.encoder.units=8", "--set", "model.decoder.units=8",
                "--set", "model.decoding.beam_width=1"]
RUNS = {
    "toy": ["--set", "data.train_size=64", "--set", "data.validation_size=8", *TINY_SEQ2SEQ],
    "translation": ["--set", "data.validation_size=8", "--set", "data.max_length=10", *TINY_SEQ2SEQ],
    "sentiment": ["--set", "data.validation_size=8", "--set", "model.embedding_dim=8", "--set", "model.encoder.units=8"],
    "ner": ["--set", "model.word_embedding_dim=8", "--set", "model.encoder.units=8", "--set", "model.char_filters=4"],
    "captioning": ["--set", "model.decoder.units=8", "--set", "model.decoding.beam_width=1", "--set", "export.enabled=true"],
}

DRIVER = """
import json, sys
import seqtasks
from seqtasks.cli import main
from seqtasks.lifecycle.runner import Runner
from seqtasks.recipe import load_recipe
from seqtasks.cli import resolve_recipe

runs, output = json.loads(sys.argv[1]), sys.argv[2]
print("seqtasks from", seqtasks.__file__, flush=True)
for name, args in runs.items():
    if name == "captioning":
        main(["run", name, *args, "--output-dir", output], standalone_mode=False)
        continue
    runner = Runner.start(load_recipe(resolve_recipe(name), args), output, log=lambda line: None)
    train, validation = runner.task.read_splits()
    runner.task.prepare(train, validation, runner.run_dir)
    train_data, _ = runner.task.datasets(train, validation)
    inputs, targets = next(iter(train_data))
    print(json.dumps({"read": name, "train": len(train), "validation": len(validation), "batch": int(targets.shape[0])}))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
    )
    (path,) = out.glob("seqtasks-*.whl")
    return path


def test_the_wheel_holds_every_built_in_recipe_and_the_files_it_names(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    recipes = sorted((REPO / "recipes").glob("*.yaml"))
    assert recipes
    for recipe in recipes:
        assert f"seqtasks/recipes/{recipe.name}" in names
    shipped = [p for p in (REPO / "recipes" / "data").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert len(shipped) > 300  # the shapes drawings among them
    for path in shipped:
        assert f"seqtasks/recipes/{path.relative_to(REPO / 'recipes').as_posix()}" in names
    # `seqtasks serve`'s page, read with importlib.resources from the installed package.
    page = sorted(path.name for path in (REPO / "seqtasks" / "serving" / "static").iterdir())
    assert page == ["app.js", "index.html", "style.css"]
    assert all(f"seqtasks/serving/static/{name}" in names for name in page)


def test_installed_from_the_wheel_every_recipe_reads_its_shipped_data_from_another_folder(wheel, tmp_path):
    # A fresh environment whose only seqtasks is the wheel's; the dependencies come from this one
    # (a path entry, not a site folder, so the editable install of the checkout stays out).
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = Path(
        subprocess.run(
            [str(env / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    work = tmp_path / "elsewhere"
    work.mkdir()
    runs = {name: [*SHORT, *extra, "--set", f"export.directory={work / 'exports'}"] for name, extra in RUNS.items()}
    runs = {name: args if name == "captioning" else args[1::2] for name, args in runs.items()}  # `--set` flags or overrides
    # PYTHONPATH must not lead to a checkout's seqtasks either.
    path = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry and not (Path(entry) / "seqtasks").is_dir()]
    result = subprocess.run(
        [str(env / "bin" / "python"), "-c", DRIVER, json.dumps(runs), str(work / "runs")],
        cwd=work,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(path)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"seqtasks from {site / 'seqtasks' / '__init__.py'}" in result.stdout
    lines = [line for line in result.stdout.splitlines() if line.startswith('{"read": ')]
    read = {entry.pop("read"): entry for entry in map(json.loads, lines)}
    assert sorted(read) == sorted(name for name in RUNS if name != "captioning")
    for name, entry in read.items():
        assert entry["train"] > 0 and entry["validation"] > 0 and entry["batch"] > 0, (name, entry)
        (run_dir,) = (work / "runs" / name).iterdir()
        assert (run_dir / "recipe.yaml").is_file(), name
    (run_dir,) = (work / "runs" / "captioning").iterdir()
    assert (run_dir / "metrics.json").is_file()
    assert (work / "exports" / "captioning" / "1" / "saved_model.pb").is_file()
