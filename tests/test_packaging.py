"""The wheel holds everything a user needs: installed on its own, every built-in recipe with shipped data runs,
and every command of `seqtasks` works."""

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import types
import zipfile
from pathlib import Path

import pytest

from tests.support.serving_support import free_port, get_json, post_json
from tests.test_commands_page import command_paths

REPO = Path(__file__).resolve().parent.parent
MIGRATION = REPO / "tests" / "data" / "migration"

pytestmark = pytest.mark.slow  # builds a wheel, starts processes

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
def source(tmp_path_factory):
    """A copy of the checkout as a fresh clone would have it, with the new files git does not ignore: the wheel
    is built from it, so that an old build/ folder of the checkout (which setuptools would reuse, modules
    since deleted or moved included) or its egg-info cannot change what the wheel holds."""
    root = tmp_path_factory.mktemp("source")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.decode("utf-8")
    for name in filter(None, listed.split("\0")):
        if (REPO / name).is_file():  # a file deleted (or renamed) since it was staged is listed too
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
    return root


@pytest.fixture(scope="module")
def wheel(source, tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    (path,) = out.glob("seqtasks-*.whl")
    return path


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """A fresh virtual environment whose only seqtasks is the wheel's, installed by pip (so its `seqtasks` script
    runs the environment's Python); the dependencies come from this one (a path entry, not a site folder, so
    the editable install of the checkout stays out). `environ`: the variables its processes run with."""
    env = tmp_path_factory.mktemp("env")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # Before the dependencies are on its path: pip sees no other seqtasks there to replace.
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        check=True,
        capture_output=True,
    )
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    # PYTHONPATH must not lead to a checkout's seqtasks either.
    path = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry and not (Path(entry) / "seqtasks").is_dir()]
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    return types.SimpleNamespace(python=python, script=env / "bin" / "seqtasks", site=site, environ=environ)


def test_the_wheel_holds_every_built_in_recipe_and_the_files_it_names(wheel, source):
    names = set(zipfile.ZipFile(wheel).namelist())
    recipes = sorted((source / "recipes").glob("*.yaml"))
    assert recipes
    for recipe in recipes:
        assert f"seqtasks/recipes/{recipe.name}" in names
    shipped = [p for p in (source / "recipes" / "data").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert len(shipped) > 300  # the shapes drawings among them
    for path in shipped:
        assert f"seqtasks/recipes/{path.relative_to(source / 'recipes').as_posix()}" in names
    # `seqtasks serve`'s page, read with importlib.resources from the installed package.
    page = sorted(path.name for path in (source / "seqtasks" / "serving" / "static").iterdir())
    assert page == ["app.js", "index.html", "style.css"]
    assert all(f"seqtasks/serving/static/{name}" in names for name in page)


def test_the_wheel_holds_every_package_and_module_of_the_source_and_nothing_else(wheel, source):
    names = set(zipfile.ZipFile(wheel).namelist())
    # Every folder of seqtasks/ with an __init__.py is a package of the wheel (pyproject.toml's list of packages
    # once left out the checkpoint converters: `seqtasks convert` failed from an installed wheel).
    packages = sorted(path.parent.relative_to(source).as_posix() for path in (source / "seqtasks").rglob("__init__.py"))
    assert {"seqtasks", "seqtasks/converters", "seqtasks/encoder_decoder", "seqtasks/tasks/ner"} <= set(packages)
    assert [package for package in packages if f"{package}/__init__.py" not in names] == []
    # Every module, and no other: none from tests/ or benchmarks/, nor one of an old build/ folder.
    modules = {path.relative_to(source).as_posix() for path in (source / "seqtasks").rglob("*.py")}
    shipped = {name for name in names if name.endswith(".py") and not name.startswith("seqtasks/recipes/")}
    assert sorted(modules - shipped) == [], "modules missing from the wheel"
    assert sorted(shipped - modules) == [], "modules in the wheel that the source does not have"
    # Nothing beside the package and its metadata (no top-level recipes/, tests/, benchmarks/ or build/).
    dist_info = {name.split("/")[0] for name in names if name.split("/")[0].endswith(".dist-info")}
    assert len(dist_info) == 1
    assert {name.split("/")[0] for name in names} == {"seqtasks", *dist_info}
    entry_points = zipfile.ZipFile(wheel).read(f"{dist_info.pop()}/entry_points.txt").decode()
    assert "seqtasks = seqtasks.cli:main" in entry_points


def test_installed_from_the_wheel_every_recipe_reads_its_shipped_data_from_another_folder(installed, tmp_path):
    work = tmp_path / "elsewhere"
    work.mkdir()
    runs = {name: [*SHORT, *extra, "--set", f"export.directory={work / 'exports'}"] for name, extra in RUNS.items()}
    runs = {name: args if name == "captioning" else args[1::2] for name, args in runs.items()}  # `--set` flags or overrides
    result = subprocess.run(
        [str(installed.python), "-c", DRIVER, json.dumps(runs), str(work / "runs")],
        cwd=work,
        env=installed.environ,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"seqtasks from {installed.site / 'seqtasks' / '__init__.py'}" in result.stdout
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


class Commands:
    """`seqtasks ARGS...` of the installed wheel, each a process of its own, several at once; records which
    commands ran. `start` returns a handle whose `finish()` waits, asserts exit status 0 and returns stdout;
    leaving the `with` block kills the processes still running (a test that failed half-way)."""

    def __init__(self, installed, work):
        self.installed, self.work, self.ran, self.processes = installed, work, set(), []
        (work / "logs").mkdir()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()

    def start(self, *args):
        args = [str(arg) for arg in args]
        command = " ".join(args[:2]) if args[0] == "convert" else args[0]
        self.ran.add(command)
        log = self.work / "logs" / f"{len(self.processes):02d}-{command.replace(' ', '-')}"
        with open(f"{log}.out", "w", encoding="utf-8") as out, open(f"{log}.err", "w", encoding="utf-8") as err:
            process = subprocess.Popen([str(self.installed.script), *args], cwd=self.work, env=self.installed.environ,
                                       stdout=out, stderr=err, text=True)
        self.processes.append(process)

        def finish(timeout=300):
            try:
                process.wait(timeout=timeout)
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait()
            stdout = Path(f"{log}.out").read_text(encoding="utf-8")
            stderr = Path(f"{log}.err").read_text(encoding="utf-8")
            assert process.returncode == 0, f"seqtasks {' '.join(args)}: exit {process.returncode}\n{stdout}{stderr[-3000:]}"
            return stdout

        return types.SimpleNamespace(process=process, finish=finish)


@pytest.fixture
def commands(installed, tmp_path):
    work = tmp_path / "elsewhere"
    work.mkdir()
    with Commands(installed, work) as cli:
        yield cli


def printed(stdout, prefix):
    """The path of the line `PREFIX: PATH` a command printed."""
    (line,) = [line for line in stdout.splitlines() if line.startswith(f"{prefix}: ")]
    return Path(line.removeprefix(f"{prefix}: ").split(" (")[0])


def test_installed_from_the_wheel_every_command_runs(installed, commands):
    """Each command of `seqtasks` once, from the wheel's own script, on small real inputs: a tiny toy run gives
    the run folder and export the others work on, and the recorded tfa and OpenNMT-tf checkpoints convert."""
    from seqtasks.cli import main

    cli, work = commands, commands.work
    help_text = subprocess.run([str(installed.script), "--help"], cwd=work, env=installed.environ, check=True,
                               capture_output=True, text=True).stdout
    listed = [line.split()[0] for line in help_text.split("Commands:\n")[1].splitlines() if line.startswith("  ")]
    assert sorted(listed) == sorted(main.commands)

    tiny = ["--set", "data.train_size=64", "--set", "data.validation_size=8", *TINY_SEQ2SEQ,
            "--set", "training.epochs=1", "--set", "training.batch_size=32", "--set", "training.checkpoint_every_steps=1",
            "--set", f"export.directory={work / 'exports'}"]
    toy = cli.start("run", "toy", *tiny, "--output-dir", work / "runs")
    recipes = cli.start("recipes")
    tfa = cli.start("convert", "tfa", MIGRATION / "tfa-luong" / "ckpt-1", "--source-vocab",
                    MIGRATION / "tfa-luong" / "source.vocab", "--target-vocab", MIGRATION / "tfa-luong" / "target.vocab",
                    "--output", work / "tfa")
    opennmt = cli.start("convert", "opennmt", MIGRATION / "opennmt-luong", "--source-vocab",
                        MIGRATION / "opennmt-luong" / "source.vocab", "--target-vocab",
                        MIGRATION / "opennmt-luong" / "target.vocab", "--model", "LuongAttention", "--output", work / "onmt")

    lines = recipes.finish().splitlines()
    assert any(line.split()[0] == "toy" and "Reverse digit sequences" in line for line in lines), lines
    assert printed(tfa.finish(), "Run folder") == work / "tfa"
    assert (work / "tfa" / "model" / "model.keras").is_file()
    # The converted tutorial model translates pairs of the sentences it was trained on (tests/data/migration).
    pairs = work / "spa-eng.tsv"
    sample = (REPO / "tests" / "data" / "spa-eng-sample.tsv").read_text(encoding="utf-8")
    pairs.write_text("".join(sample.splitlines(keepends=True)[:5]), encoding="utf-8")
    evaluation = cli.start("eval", work / "tfa", "--data", pairs)
    assert printed(opennmt.finish(), "Run folder") == work / "onmt"
    vocab = (work / "onmt" / "target_vocab.txt").read_text(encoding="utf-8").splitlines()
    assert vocab[:4] == ["[PAD]", "[UNK]", "[START]", "[END]"] and (work / "onmt" / "model" / "model.keras").is_file()

    stdout = toy.finish()
    (run_dir,) = (work / "runs" / "toy").iterdir()
    assert printed(stdout, "Metrics") == run_dir / "metrics.json" and (run_dir / "metrics.json").is_file()
    export = printed(stdout, "SavedModel")
    assert export == work / "exports" / "toy" / "1" and (export / "saved_model.pb").is_file()
    assert sorted(path.name for path in (run_dir / "checkpoints").glob("step-*.weights.h5")) == [
        "step-00000001.weights.h5", "step-00000002.weights.h5"]
    average = cli.start("average", run_dir, "--last", "2")
    compare = cli.start("compare", run_dir, "--output", work / "by-length.png")
    predict = cli.start("predict", export, "3 1 4", "1 5 9 2")
    toy_pairs = work / "toy-pairs.tsv"
    toy_pairs.write_text("3 1 4\t4 1 3\n1 5 9 2\t2 9 5 1\n", encoding="utf-8")
    score = cli.start("score", export, "--input", toy_pairs)
    port = free_port()
    serve = cli.start("serve", export, "--port", port)

    stdout = evaluation.finish()
    assert printed(stdout, "Metrics") == work / "tfa" / "eval" / "spa-eng" / "metrics.json"
    metrics = json.loads((work / "tfa" / "eval" / "spa-eng" / "metrics.json").read_text())
    assert metrics["data"] == str(pairs.resolve()) and metrics["validation"]["bleu"] >= 0
    translations = (work / "tfa" / "eval" / "spa-eng" / "translations.tsv").read_text(encoding="utf-8").splitlines()
    assert [line.split("\t")[0] for line in translations] == ["Dormí.", "¡He ganado!", "Puedo ir.", "Charlaba.", "Sonrió."]
    checkpoint = printed(average.finish(), "Checkpoint")
    assert checkpoint.parent == run_dir / "checkpoints" and checkpoint.is_file()
    # The averaged weights differ from the final model's: exported as the next version.
    again = cli.start("export", run_dir, "--checkpoint", checkpoint, "--set", f"export.directory={work / 'exports'}")
    stdout = compare.finish()
    assert printed(stdout, "Figure") == work / "by-length.png"
    assert (work / "by-length.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = (work / "by-length.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0].startswith("run,bucket,count,") and rows[1].startswith("toy,1-5,")
    assert sum(int(row.split(",")[2]) for row in rows[1:]) == 8  # every validation example in a bucket
    outputs = predict.finish().splitlines()
    assert len(outputs) == 2, outputs
    scored = [line.split("\t") for line in score.finish().splitlines()]
    assert [fields[2] for fields in scored] == ["4 1 3", "2 9 5 1"]
    assert all(float(fields[0]) < 0 and float(fields[1]) < 0 for fields in scored), scored

    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        assert serve.process.poll() is None, f"seqtasks serve exited:\n{serve.finish()}"
        try:
            if get_json(url + "/healthz")[0] == 200:
                break
        except OSError:
            pass
        assert time.monotonic() < deadline, "seqtasks serve did not answer /healthz in time"
        time.sleep(0.3)
    status, answer = get_json(url + "/v1/models/toy")
    assert status == 200 and [entry["version"] for entry in answer["model_version_status"]] == ["1"], answer
    status, answer = post_json(url + "/v1/models/toy:predict", {"instances": ["3 1 4", "1 5 9 2"]})
    # The server answers what `predict` printed for the same export.
    assert status == 200 and [prediction["output"] for prediction in answer["predictions"]] == outputs, answer
    serve.process.send_signal(signal.SIGTERM)
    stdout = serve.finish(timeout=60)
    assert "Serving 'toy' version 1" in stdout and stdout.splitlines()[-1] == "Stopped", stdout

    exported = printed(again.finish(), "SavedModel")
    assert exported == work / "exports" / "toy" / "2" and (exported / "saved_model.pb").is_file()
    # A new command fails this test until it runs here from the wheel.
    assert cli.ran == set(command_paths(main))
