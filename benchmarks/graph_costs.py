"""Where the time goes in tracing, saving and loading the TensorFlow graphs of a trained seqtasks run.

    python -m benchmarks.graph_costs RUN_DIR [--json OUT.json] [--repeat N]

RUN_DIR is a finished run folder of an encoder-decoder recipe (translation).
Every measurement runs in fresh processes, `--repeat` times (minimum and
median), with the `seqtasks` on PYTHONPATH, else this checkout's:

- `import_tensorflow`: importing tensorflow and tensorflow_text;
- `first_fit_step`, `second_fit_step`: `train_on_batch` on one training
  batch of the model built and compiled as the run does (their difference
  is tracing the training step);
- `search_trace`: tracing `seqtasks.decoding.search` alone (no AutoGraph) with
  the recipe's `model.decoding`; then `trace_<signature>`: each export
  signature's first `get_concrete_function()`, in the serving module's
  order; then `saved_model_save`: `tf.saved_model.save` of the traced
  module, which traces each signature again in its save context, and
  `saved_model_save_again`: the same save once more, without that tracing;
- `export_command`: `seqtasks export RUN_DIR --force`, wall time;
- `saved_model_load`, `first_call`, `second_call`: the export loaded and its
  `serving_default` called on one sentence, by TensorFlow alone;
  `saved_model_pb_bytes` and `functions_in_library` describe the export;
- `predict_cold`: `seqtasks predict VERSION_DIR SENTENCE`, wall time.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SENTENCE = "Tengo hambre."
TRAINING_PAIRS = 4096
NOT_SECONDS = ("saved_model_pb_bytes", "functions_in_library")
RESULT = "RESULT "

IMPORT_CODE = """
import json, time
started = time.perf_counter()
import tensorflow
import tensorflow_text
print("RESULT " + json.dumps({"import_tensorflow": time.perf_counter() - started}))
"""

LOAD_CODE = """
import json, sys, time
from pathlib import Path
import tensorflow as tf
import tensorflow_text
from tensorflow.core.protobuf import saved_model_pb2

version, sentence = sys.argv[1], sys.argv[2]
started = time.perf_counter()
loaded = tf.saved_model.load(version)
times = {"saved_model_load": time.perf_counter() - started}
serve = loaded.signatures["serving_default"]
(name,) = serve.structured_input_signature[1]
for label in ("first_call", "second_call"):
    started = time.perf_counter()
    outputs = serve(**{name: tf.constant([sentence])})
    [value.numpy() for value in outputs.values()]
    times[label] = time.perf_counter() - started
data = (Path(version) / "saved_model.pb").read_bytes()
saved = saved_model_pb2.SavedModel()
saved.ParseFromString(data)
times["saved_model_pb_bytes"] = len(data)
times["functions_in_library"] = sum(len(graph.graph_def.library.function) for graph in saved.meta_graphs)
print("RESULT " + json.dumps(times))
"""

CHILD_CODE = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("graph_costs", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.child(*sys.argv[2:])
"""

REPO = Path(__file__).resolve().parent.parent
WHERE_CODE = "import importlib.util; print(importlib.util.find_spec('seqtasks').origin)"


class Children:
    """Fresh processes in an empty working folder, importing `seqtasks` from PYTHONPATH, else from `REPO`."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.env = dict(os.environ, KERAS_BACKEND="tensorflow")
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))

    def seqtasks_tree(self):
        return Path(self.run([sys.executable, "-c", WHERE_CODE]).strip()).parent.parent

    def run(self, args):
        completed = subprocess.run(args, cwd=self.workdir, env=self.env, capture_output=True, text=True)
        if completed.returncode != 0:
            sys.exit(f"{' '.join(map(str, args[:4]))} ... failed ({completed.returncode}):\n{completed.stderr[-4000:]}")
        return completed.stdout

    def code(self, code, *args):
        lines = self.run([sys.executable, "-c", code, *map(str, args)]).splitlines()
        return json.loads(next(line for line in reversed(lines) if line.startswith(RESULT))[len(RESULT):])

    def measure(self, group, *args):
        return self.code(CHILD_CODE, Path(__file__).resolve(), group, *args)

    def wall(self, *args):
        started = time.perf_counter()
        self.run([str(Path(sys.executable).parent / "seqtasks"), *map(str, args)])
        return time.perf_counter() - started


def child(group, *args):
    """Entry point of a measuring child process: prints its measurements as one `RESULT` line."""
    print(RESULT + json.dumps({"fit": fit_steps, "trace": traces}[group](*args)), flush=True)


def _runner(run_dir):
    from seqtasks.lifecycle.runner import Runner

    return Runner.open(run_dir, log=lambda line: None)


def fit_steps(run_dir):
    from seqtasks.training.distribute import make_strategy
    from seqtasks.training.fit import dtype_policy

    runner = _runner(run_dir)
    recipe, task = runner.recipe, runner.task
    train, validation = task.read_splits()
    train_data, _ = task.datasets(train[:TRAINING_PAIRS], validation[:TRAINING_PAIRS])
    inputs, targets = next(iter(train_data))
    with make_strategy(recipe.distribute, "tensorflow").scope(), dtype_policy(recipe.training.precision):
        model = task.build_model()
        if not model.built:
            model.build()
        task.compile_model(model)
    times = {}
    for label in ("first_fit_step", "second_fit_step"):
        started = time.perf_counter()
        model.train_on_batch(inputs, targets)
        times[label] = time.perf_counter() - started
    return times


def search_trace(model, decoding):
    import tensorflow as tf

    from seqtasks.decoding import search

    settings = {name: getattr(decoding, name) for name in ("beam_width", "max_length", "length_penalty")}
    function = tf.function(
        lambda ids: search(model, ids, settings),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
        autograph=False,
    )
    started = time.perf_counter()
    function.get_concrete_function()
    return time.perf_counter() - started


def _trace(function):
    """A signature traced as the measured tree's export traces it (inside a save context, where it does)."""
    from seqtasks.export import saved_model

    traced = getattr(saved_model, "traced_for_saving", None)
    return traced(function) if traced else function.get_concrete_function()


def signature_traces(module):
    from seqtasks.export.saved_model import module_signatures

    times = {}
    for name, function in module_signatures(module).items():
        started = time.perf_counter()
        _trace(function)
        times[f"trace_{name}"] = time.perf_counter() - started
    return times


def saved_model_save(module):
    """The first save, then a second one of the same module: where the signatures were traced outside a
    save context (before `traced_for_saving`), the first save traces every one again."""
    import tensorflow as tf

    from seqtasks.export.saved_model import module_signatures

    signatures = {name: _trace(fn) for name, fn in module_signatures(module).items()}
    times = {}
    for label in ("saved_model_save", "saved_model_save_again"):
        folder = tempfile.mkdtemp(prefix="graph-costs-save-")
        try:
            started = time.perf_counter()
            tf.saved_model.save(module, folder, signatures=signatures)
            times[label] = time.perf_counter() - started
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return times


def traces(run_dir):
    runner = _runner(run_dir)
    model = runner.load_model()
    times = {"search_trace": search_trace(model, runner.recipe.model.decoding)}
    module = runner.task.serving_module(model)
    times.update(signature_traces(module))
    times.update(saved_model_save(module))
    return times


def export_command(children, run_dir, export_dir):
    seconds = children.wall("export", run_dir, "--force", "--set", f"export.directory={export_dir}")
    versions = sorted(Path(export_dir).glob("*/*/saved_model.pb"), key=lambda path: path.stat().st_mtime)
    if not versions:
        sys.exit(f"seqtasks export wrote no SavedModel under {export_dir}")
    return seconds, versions[-1].parent


def one_round(children, run_dir, export_dir):
    times = children.code(IMPORT_CODE)
    times.update(children.measure("fit", run_dir))
    times.update(children.measure("trace", run_dir))
    times["export_command"], version = export_command(children, run_dir, export_dir)
    times.update(children.code(LOAD_CODE, version, SENTENCE))
    times["predict_cold"] = children.wall("predict", version, SENTENCE)
    return times


def summarise(rounds):
    """`{name: minimum}`, with `<name>_median` beside each time when there are several rounds."""
    summary = {}
    for name in rounds[0]:
        values = [times[name] for times in rounds]
        summary[name] = min(values)
        if len(rounds) > 1 and name not in NOT_SECONDS:
            summary[f"{name}_median"] = statistics.median(values)
    return summary


def print_table(summary, repeat):
    names = [name for name in summary if not name.endswith("_median")]
    width = max(map(len, names))
    heading = f"{'name':<{width}}  {'seconds':>10}" + (f"  {'median':>10}" if repeat > 1 else "")
    print(heading)
    print("-" * len(heading))
    for name in names:
        if name in NOT_SECONDS:
            print(f"{name:<{width}}  {summary[name]:>10}")
            continue
        median = f"  {summary[name + '_median']:>10.3f}" if repeat > 1 else ""
        print(f"{name:<{width}}  {summary[name]:>10.3f}{median}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.graph_costs", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a finished run folder of an encoder-decoder recipe")
    parser.add_argument("--json", type=Path, help="also write the measurements here, as a JSON dict")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of fresh processes (minimum and median)")
    args = parser.parse_args(argv)
    run_dir = args.run_dir.resolve()
    if not (run_dir / "model" / "model.keras").is_file():
        sys.exit(f"{run_dir}: not a finished run folder (no model/model.keras)")
    workdir = Path(tempfile.mkdtemp(prefix="graph-costs-"))
    try:
        children = Children(workdir)
        print(f"seqtasks from {children.seqtasks_tree()}; {args.repeat} round(s) on {run_dir}", file=sys.stderr)
        rounds = [one_round(children, run_dir, workdir / "exports") for _ in range(args.repeat)]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    summary = summarise(rounds)
    print_table(summary, args.repeat)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
