"""The lifecycle of a run, the same for every task; the task (`seqtasks.tasks.Task`) gives the rest.

`Runner.start(recipe)` makes (or finds, to resume) a run folder and
`train()` reads the data, fits, evaluates, exports and writes
`metrics.json`. `Runner.open(run_dir)` reopens a run folder to evaluate it
again, on its validation split or another file, or to export it again, from
its final model or a checkpoint. The CLI, the tests and the benchmarks all
go through here.
"""

import time
from pathlib import Path

from seqtasks.errors import SeqtasksError


class Runner:
    """A run folder, its merged recipe and its task.

    Args:
        recipe: the merged `Recipe`.
        run_dir: the run folder.
        log: where progress lines go.
    """

    def __init__(self, recipe, run_dir, log=print):
        from seqtasks.tasks import make_task

        self.recipe = recipe
        self.run_dir = Path(run_dir)
        self.log = log
        self.task = make_task(recipe)

    @classmethod
    def start(cls, recipe, output_dir="runs", fresh=False, log=print):
        """The run folder to train `recipe` in: its newest unfinished one (unless `fresh`), else a new one.

        A new folder gets the merged recipe as `recipe.yaml`. The distribution
        strategy is made first, before any other TensorFlow work, as
        multi-worker collectives require.
        """
        from seqtasks.distribute import make_strategy
        from seqtasks.io_utils import make_run_dir, write_text_atomic
        from seqtasks.recipe import dump_recipe
        from seqtasks.run_folders import unfinished_run

        make_strategy(recipe.distribute)
        text = dump_recipe(recipe)
        run_dir = None if fresh else unfinished_run(output_dir, recipe.name, text)
        if run_dir is not None:
            log(f"Resuming the unfinished run in {run_dir} (--fresh starts a new one)")
        else:
            run_dir = make_run_dir(output_dir, recipe.name, time.strftime("%Y%m%d-%H%M%S"))
            write_text_atomic(run_dir / "recipe.yaml", text)
        log(f"Run folder: {run_dir}")
        return cls(recipe, run_dir, log)

    @classmethod
    def open(cls, run_dir, overrides=(), log=print):
        """A trained (or stopped) run folder; `KEY=VALUE` overrides change its recipe for this use only."""
        from seqtasks.recipe import load_recipe

        run_dir = Path(run_dir)
        if not (run_dir / "recipe.yaml").is_file():
            raise SeqtasksError(f"{run_dir}: not a run folder (it has no recipe.yaml)")
        runner = cls(load_recipe(run_dir / "recipe.yaml", overrides), run_dir, log)
        runner.task.restore(run_dir)
        return runner

    def train(self):
        """Trains (resuming from the folder's last checkpoint), evaluates, exports; returns and writes the metrics."""
        import keras

        from seqtasks.io_utils import write_json_atomic
        from seqtasks.training import fit_metrics, train_model

        started = time.time()
        keras.utils.set_random_seed(self.recipe.seed)
        task = self.task
        train, validation = task.read_splits()
        task.prepare(train, validation, self.run_dir)
        train_data, validation_data = task.datasets(train, validation)
        model, history, train_seconds = train_model(
            self.recipe, self.run_dir, task.build_model, task.compile_model, train_data, validation_data
        )
        metrics = fit_metrics(self.recipe.task, history, train_seconds, model)
        metrics.update(task.training_metrics(train, validation, history))
        metrics.update(self._evaluate(model, validation, self.run_dir))
        if self.recipe.export.enabled:
            exported = self._export(model)
            if exported is not None:  # None on the workers of a multi-worker run: the chief exports
                metrics["export"] = str(exported)
        metrics["seconds"] = round(time.time() - started, 1)
        write_json_atomic(self.run_dir / "metrics.json", metrics)
        return metrics

    def evaluate(self, data_path=None, checkpoint=None):
        """Metrics of the run's model on its validation split, or on `data_path` (a file in the recipe's format).

        On the validation split the outputs replace the run folder's own; for
        a file they go to `RUN/eval/<file name>/` with its `metrics.json`.
        `checkpoint` is `final`, `best`, `latest` or a weights file (see
        `seqtasks.run_folders.checkpoint_file`).
        """
        from seqtasks.io_utils import write_json_atomic
        from seqtasks.run_folders import eval_folder

        if data_path is None:
            _, examples = self.task.read_splits()
            return self._evaluate(self.load_model(checkpoint), examples, self.run_dir)
        if not self.task.spec.reads_data_files:
            raise SeqtasksError(f"task {self.recipe.task!r} makes its own data; it has no data files to evaluate on")
        if not Path(data_path).is_file():
            raise SeqtasksError(f"{data_path}: no such data file")
        examples = self.task.read_file(data_path)
        out_dir = eval_folder(self.run_dir, data_path)
        out_dir.mkdir(parents=True, exist_ok=True)
        metrics = self._evaluate(self.load_model(checkpoint), examples, out_dir)
        write_json_atomic(out_dir / "metrics.json", {"data": str(Path(data_path).resolve()), **metrics})
        return metrics

    def export(self, checkpoint=None):
        """Writes the run's model as the next SavedModel version under `export.directory`; returns its folder."""
        return self._export(self.load_model(checkpoint))

    def load_model(self, checkpoint=None):
        """The run's model: `model/model.keras` in safe mode, or the task's model with a checkpoint's weights.

        A checkpoint holds the optimizer's variables too, so the model is
        compiled with the recipe's optimizer before its weights are read.
        """
        import keras

        import seqtasks.models  # noqa: F401 - registers the model classes for loading
        from seqtasks.run_folders import checkpoint_file
        from seqtasks.training import dtype_policy

        path = checkpoint_file(self.run_dir, checkpoint)
        if path is None:
            final = self.run_dir / "model" / "model.keras"
            try:
                return keras.models.load_model(final, safe_mode=True, compile=False)
            except Exception as error:  # Keras raises many types for a file that is not its model
                first_line = str(error).splitlines()[0]
                raise SeqtasksError(f"{final}: cannot load the model (safe mode): {first_line}") from None
        with dtype_policy(self.recipe.training.precision):  # as in training: mixed_float16's loss-scale optimizer
            model = self.task.build_model()
            if not model.built:
                model.build()
        self.task.compile_model(model)
        model.optimizer.build(model.trainable_variables)
        try:
            model.load_weights(str(path))
        except ValueError as error:
            raise SeqtasksError(f"{path}: does not fit the run's model ({error})") from None
        return model

    def _evaluate(self, model, examples, out_dir):
        evaluation = self.task.evaluate(model, examples, Path(out_dir))
        for line in evaluation.report:
            self.log(line)
        return evaluation.metrics

    def _export(self, model):
        """The SavedModel of the task's serving module; its folder (None on a worker that is not the chief)."""
        from seqtasks.export import export_saved_model

        server = self.task.serving_module(model)
        check_serving_signature(server.serve, self.task.spec)
        return export_saved_model(server, server.serve, self.recipe.export.directory, self.recipe.name)


def check_serving_signature(serve, spec):
    """Raises `TypeError` unless `serve` takes the task table's input and returns exactly its outputs."""
    concrete = serve.get_concrete_function()
    inputs = [tensor.name for tensor in concrete.structured_input_signature[0]]
    outputs = sorted(concrete.structured_outputs)
    if inputs != [spec.serving_input] or outputs != sorted(spec.serving_outputs):
        raise TypeError(
            f"task {spec.name!r}: the serving function maps {inputs} to {outputs}; the task table declares "
            f"[{spec.serving_input!r}] to {sorted(spec.serving_outputs)}"
        )
