"""The lifecycle of a run, the same for every task; the task (`seqtasks.tasks.Task`) gives the rest.

`Runner.start(recipe)` makes (or finds, to resume) a run folder and
`train()` reads the data, fits, evaluates, exports and writes
`metrics.json`. `Runner.open(run_dir)` reopens a run folder to evaluate it
again, on its validation split or another file, or to export it again, from
its final model or a checkpoint. The CLI, the tests and the benchmarks all
go through here.
"""

import os
import stat
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

    def __init__(self, recipe, run_dir, log=print, task=None, splits=None):
        from seqtasks.lifecycle.backends import set_matmul_precision
        from seqtasks.tasks import make_task

        set_matmul_precision(recipe.training.matmul_precision)
        self.recipe = recipe
        self.run_dir = Path(run_dir)
        self.log = log
        self.task = task if task is not None else make_task(recipe)
        self._splits = splits  # read (and checked) before the run folder was made

    @classmethod
    def start(cls, recipe, output_dir="runs", fresh=False, log=print):
        """The run folder to train `recipe` in: its newest unfinished one (unless `fresh`), else a new one.

        The task's inputs are checked first: the files and folders it reads
        (`check_inputs`), then their contents, read whole by the task
        (`Task.read_splits`), so a missing file or a malformed line leaves no
        run folder behind; what only a new run reads (`Task.start_paths`) is
        checked when no unfinished run is resumed. A new folder gets the merged recipe as
        `recipe.yaml`. The folder is locked for this process
        (`seqtasks.training.run_folders.lock_run`): a second process resuming
        the same run is refused. The distribution strategy is made before any
        other TensorFlow work, as multi-worker collectives require.
        """
        from seqtasks.lifecycle.backends import resolve_backend
        from seqtasks.recipe import dump_recipe
        from seqtasks.tasks import make_task
        from seqtasks.training.distribute import make_strategy
        from seqtasks.training.run_folders import lock_run, unfinished_run
        from seqtasks.utils.io_utils import make_run_dir, write_text_atomic

        check_inputs(make_task(recipe).input_paths())
        recipe = resolve_backend(recipe)
        make_strategy(recipe.distribute, recipe.backend)
        task = make_task(recipe)
        splits = task.read_splits()
        text = dump_recipe(recipe)
        run_dir = None if fresh else unfinished_run(output_dir, recipe.name, text)
        if run_dir is not None:
            lock_run(run_dir)
            log(f"Resuming the unfinished run in {run_dir} (--fresh starts a new one)")
        else:
            check_inputs(task.start_paths())
            run_dir = make_run_dir(output_dir, recipe.name, time.strftime("%Y%m%d-%H%M%S"))
            lock_run(run_dir)
            write_text_atomic(run_dir / "recipe.yaml", text)
        log(f"Run folder: {run_dir}")
        log(f"Keras backend: {recipe.backend}")
        return cls(recipe, run_dir, log, task, splits)

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

        from seqtasks.utils.io_utils import write_json_atomic
        from seqtasks.training.fit import fit_metrics, train_model

        started = time.time()
        keras.utils.set_random_seed(self.recipe.seed)
        task = self.task
        train, validation = self._splits if self._splits is not None else task.read_splits()
        task.prepare(train, validation, self.run_dir)
        train_data, validation_data = task.datasets(train, validation)
        model, history, train_seconds = train_model(
            self.recipe, self.run_dir, task.build_model, task.compile_model, train_data, validation_data,
            task.validation_scores(validation),
        )
        metrics = fit_metrics(self.recipe.task, history, train_seconds, model)
        for name, entry in metrics["xla_compilations"].items():
            self.log(f"XLA compiled {name} for {entry['compilations']} batch shape(s) ({entry['seconds']} s)")
        metrics.update(task.training_metrics(train, validation, history))
        metrics.update(self._evaluate(model, validation, self.run_dir))
        checkpoint = "final"
        if self.recipe.training.average_last:
            model, checkpoint = self._keep_the_better_average(model, validation, metrics)
        for name, examples in task.heldout_splits().items():
            self.log(f"Held-out split {name!r} ({len(examples)} examples, not trained on nor used for selection):")
            out_dir = self.run_dir / "eval" / name
            out_dir.mkdir(parents=True, exist_ok=True)
            evaluation = self._evaluate(model, examples, out_dir)
            metrics[name] = evaluation["validation"]
            if "per_type" in evaluation:
                metrics[f"{name}_per_type"] = evaluation["per_type"]
        if self.recipe.export.enabled:
            exported = self._export(model, checkpoint, metrics)
            if exported is not None:  # None on the workers of a multi-worker run: the chief exports
                metrics["export"] = str(exported)
        metrics["seconds"] = round(time.time() - started, 1)
        write_json_atomic(self.run_dir / "metrics.json", metrics)
        return metrics

    def _keep_the_better_average(self, model, validation, metrics):
        """`training.average_last`: averages the last kept step checkpoints, evaluates the average on `validation`
        and keeps it if it scores higher than `model` (the best epoch's weights, which `fit` restored) by the task's
        headline metric; returns the kept model and its checkpoint, `"final"` (`model/model.keras`, which then holds
        the average). `metrics` gets `averaging` (and, if the average is kept, its evaluation, the best epoch's
        as `best_validation`).
        """
        from seqtasks.training.averaging import average_checkpoints
        from seqtasks.training.checkpoints import kept_steps
        from seqtasks.utils.io_utils import publish_folder

        wanted = self.recipe.training.average_last
        last = min(wanted, len(kept_steps(self.run_dir / "checkpoints")))
        if last < 2:  # a run shorter than the checkpoints it was to keep
            metrics["averaging"] = {"last": wanted, "kept": "best", "note": f"{last} step checkpoint(s) kept: no average"}
            self.log(f"Averaging: the run kept {last} step checkpoint(s); the best epoch's weights are kept")
            return model, "final"
        path, steps = average_checkpoints(self, last)
        averaged = self.load_model(str(path))
        self.log(f"Averaging: the last {last} step checkpoints ({', '.join(map(str, steps))}) on the validation data:")
        out_dir = self.run_dir / "eval" / "average"
        out_dir.mkdir(parents=True, exist_ok=True)  # the task writes its outputs there (translations, figures)
        evaluation = self._evaluate(averaged, validation, out_dir)
        name = self.task.spec.headline
        best, average = metrics["validation"][name], evaluation["validation"][name]
        kept = "average" if average > best else "best"
        metrics["averaging"] = {"last": last, "steps": steps, "metric": name, "best": best, "average": average,
                                "kept": kept, "file": str(path)}
        self.log(f"Averaging: {name} {average:.4f} averaged against {best:.4f} for the best epoch's weights: "
                 f"the {'average' if kept == 'average' else 'best epoch'}'s weights are kept")
        if kept == "best":
            return model, "final"
        metrics["best_validation"] = metrics["validation"]
        metrics.update(evaluation)  # its outputs (translations, figures) are in eval/average/
        # `seqtasks eval RUN` and `export RUN` read the kept weights; the last trained ones are the newest checkpoint's.
        publish_folder(lambda folder: averaged.save(f"{folder}/model.keras"), self.run_dir / "model")
        return averaged, "final"

    def ensemble(self, others, checkpoint=None):
        """This run's model and those of the runs `others` (folders) as one `seqtasks.models.Ensemble`.

        Every run must be of this run's task, one whose models decode, with
        the same vocabularies (`Task.vocabularies`); a run that differs is a
        `SeqtasksError` naming it and the first entry that differs.
        `checkpoint` picks each run's weights.
        """
        from seqtasks.models import Ensemble

        mine = self.task.vocabularies()
        if mine is None:
            raise SeqtasksError(f"task {self.recipe.task!r} does not decode; ensembles are of encoder-decoder runs")
        models = [self.load_model(checkpoint)]
        for other in others:
            runner = Runner.open(other, log=self.log)
            if runner.recipe.task != self.recipe.task:
                raise SeqtasksError(
                    f"{other}: a {runner.recipe.task!r} run cannot join an ensemble of {self.recipe.task!r} runs"
                )
            theirs = runner.task.vocabularies()
            for name, vocabulary in mine.items():
                if theirs[name] != vocabulary:
                    raise SeqtasksError(f"{other}: {_difference(name, vocabulary, theirs[name], self.run_dir)}; "
                                        "the runs of an ensemble must share their vocabularies")
            models.append(runner.load_model(checkpoint))
        return Ensemble(models)

    def evaluate(self, data_path=None, checkpoint=None, ensemble=()):
        """Metrics of the run's model on its validation split, or on `data_path` (a file in the recipe's format).

        On the validation split the outputs replace the run folder's own; for
        a file they go to `RUN/eval/<file name>/` with its `metrics.json`.
        `checkpoint` is `final`, `best`, `latest`, a step or a weights file
        (see `seqtasks.training.run_folders.checkpoint_file`); a run that did not
        finish has no default.
        """
        from seqtasks.utils.io_utils import write_json_atomic
        from seqtasks.training.run_folders import checkpoint_file, eval_folder

        checkpoint_file(self.run_dir, checkpoint)  # a run that did not finish is refused before any work

        def model():
            return self.ensemble(ensemble, checkpoint) if ensemble else self.load_model(checkpoint)

        if data_path is None:
            _, examples = self.task.read_splits()
            # An ensemble's outputs do not replace the run's own.
            out_dir = eval_folder(self.run_dir, "validation-ensemble") if ensemble else self.run_dir
            out_dir.mkdir(parents=True, exist_ok=True)
            return self._evaluate(model(), examples, out_dir)
        if not self.task.spec.reads_data_files:
            raise SeqtasksError(f"task {self.recipe.task!r} makes its own data; it has no data files to evaluate on")
        if not Path(data_path).is_file():
            raise SeqtasksError(f"{data_path}: no such data file")
        examples = self.task.read_file(data_path)
        out_dir = eval_folder(self.run_dir, data_path)
        out_dir.mkdir(parents=True, exist_ok=True)
        metrics = self._evaluate(model(), examples, out_dir)
        write_json_atomic(out_dir / "metrics.json", {"data": str(Path(data_path).resolve()), **metrics})
        return metrics

    def export(self, checkpoint=None, force=False, ensemble=()):
        """Writes the run's model as a new SavedModel version under `export.directory`; returns its folder.

        Weights and recipe identical to the newest version's export nothing
        (the newest version's folder is returned) unless `force`. With
        `ensemble` (other run folders), the export decodes with this run's
        model and theirs together (`ensemble`), as `<recipe name>-ensemble`.
        """
        if not ensemble:
            return self._export(self.load_model(checkpoint), checkpoint, force=force)
        from dataclasses import replace

        model = self.ensemble(ensemble, checkpoint)
        runs = [str(self.run_dir.resolve()), *(str(Path(other).resolve()) for other in ensemble)]
        members = Runner(replace(self.recipe, name=f"{self.recipe.name}-ensemble"), self.run_dir, self.log, self.task)
        notes = [f"An ensemble of {len(runs)} runs: " + ", ".join(runs) + "."]
        # The first run's metrics are not the ensemble's.
        return members._export(model, checkpoint, force=force, notes=notes, run_metrics=False, ensemble=ensemble)

    def load_model(self, checkpoint=None):
        """The run's model: `model/model.keras` in safe mode, or the task's model with a checkpoint's weights.

        A checkpoint holds the optimizer's variables too, so the model is
        compiled with the recipe's optimizer before its weights are read.
        """
        import keras

        import seqtasks.models  # noqa: F401 - registers the model classes for loading
        from seqtasks.training.run_folders import checkpoint_file
        from seqtasks.training.fit import dtype_policy, use_averaged_weights

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
        use_averaged_weights(model)  # as training validated and saved them (training.ema_momentum)
        return model

    def _evaluate(self, model, examples, out_dir):
        from seqtasks.evaluation.summaries import record_evaluation

        # The metrics and figures go to TensorBoard too (RUN/logs/evaluation, RUN/logs/eval/<file name>).
        evaluation = record_evaluation(
            self.run_dir, out_dir, model, lambda: self.task.evaluate(model, examples, Path(out_dir))
        )
        for line in evaluation.report:
            self.log(line)
        return evaluation.metrics

    def _export(self, model, checkpoint=None, metrics=None, force=False, notes=(), run_metrics=True, ensemble=()):
        """Publishes the task's serving module as a new SavedModel version; its folder (None on a non-chief worker).

        `checkpoint` is the `--checkpoint` value the weights came from;
        `metrics` are those of these weights when known (at the end of
        training), else a finished run's `metrics.json` describes its final
        model (unless not `run_metrics`); `notes` are lines for the model card; `ensemble` names the
        other runs of an ensemble `model` (for a backend other than TensorFlow). The version's `assets.extra/` gets the recipe, the sources, the
        metrics and a model card (`seqtasks.export.model_card`). Weights and recipe
        identical to the newest version's export nothing unless `force`.
        """
        import json
        from dataclasses import replace

        import keras

        if keras.backend.backend() != "tensorflow":
            from seqtasks.lifecycle.backends import export_in_tensorflow

            # The TensorFlow process rebuilds the model: an ensemble's from its runs (`ensemble`).
            return export_in_tensorflow(self, checkpoint, metrics, force, ensemble, notes, run_metrics)

        from seqtasks.export.saved_model import (
            describe_signature,
            export_saved_model,
            module_signatures,
            unchanged_export,
            weights_sha256,
        )
        from seqtasks.export.model_card import Source, audit_files, identity_files
        from seqtasks.recipe import load_recipe
        from seqtasks.training.run_folders import checkpoint_file

        weights = weights_sha256(model.weights)
        directory, name = self.recipe.export.directory, self.recipe.name
        if not force and (same := unchanged_export(directory, name, identity_files(self.recipe, weights), self.log)):
            return same  # found before the serving function is traced
        module = self.task.serving_module(model)
        n_best = self.recipe.model.decoding.n_best if self.task.spec.decodes else 1
        check_serving_signature(module.serve, self.task.spec, n_best)
        run_dir = self.run_dir.resolve()
        if checkpoint in (None, "final"):
            label, weights_file = "final", run_dir / "model" / "model.keras"
        else:
            weights_file = Path(checkpoint_file(run_dir, checkpoint)).resolve()
            digits = str(checkpoint).isdigit()
            label = checkpoint if checkpoint in ("best", "latest") else f"step {int(checkpoint)}" if digits else "file"
        if metrics is None and label == "final" and run_metrics:
            try:
                metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                metrics = None
        try:
            differs = replace(load_recipe(run_dir / "recipe.yaml"), export=None) != replace(self.recipe, export=None)
        except (OSError, SeqtasksError):
            differs = False
        source = Source(str(run_dir), label, str(weights_file), weights)
        described = {**describe_signature(module.serve), "signatures": sorted(module_signatures(module))}
        extras = audit_files(
            self.recipe, described, source, self.task.input_limits(), metrics, differs,
            [*self.task.data_notes(), *notes],
        )
        return export_saved_model(module, module_signatures(module), directory, name, extras, force, self.log)


def _difference(name, mine, theirs, run_dir):
    """Where vocabulary `theirs` first differs from `mine` (that of `run_dir`), as a phrase."""
    if len(theirs) != len(mine):
        return f"its {name} vocabulary has {len(theirs)} entries, {run_dir}'s {len(mine)}"
    index = next(i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b)
    return f"its {name} vocabulary differs from {run_dir}'s at entry {index} ({theirs[index]!r}, not {mine[index]!r})"


def check_inputs(paths):
    """Raises `SeqtasksError` naming the first of `paths` that is missing or unusable.

    `paths` are `(path, "file" or "folder")` pairs (`Task.input_paths`),
    or triples whose third item says, for a missing one, what it is for:
    files must be readable regular files (not a folder, a device or a pipe),
    folders readable folders.
    """
    for path, expected, *hint in paths:
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            raise SeqtasksError(f"{path}: no such data {expected}" + "".join(f" ({note})" for note in hint)) from None
        except OSError as error:
            raise SeqtasksError(f"{path}: cannot read: {error.strerror}") from None
        if expected == "folder" and not stat.S_ISDIR(mode):
            raise SeqtasksError(f"{path}: not a folder, expected a folder of data files")
        if expected == "file" and stat.S_ISDIR(mode):
            raise SeqtasksError(f"{path}: is a folder, expected a data file")
        if expected == "file" and not stat.S_ISREG(mode):
            raise SeqtasksError(f"{path}: not a regular file")
        if not os.access(path, os.R_OK | (os.X_OK if expected == "folder" else 0)):
            raise SeqtasksError(f"{path}: cannot read: permission denied")


def check_serving_signature(serve, spec, n_best=1):
    """Raises `TypeError` unless `serve` takes the task table's input and returns exactly its outputs.

    With `n_best` > 1, the outputs are those and the task's `n_best_outputs()`.
    """
    from seqtasks.export.saved_model import traced_for_saving

    concrete = traced_for_saving(serve)
    inputs = [tensor.name for tensor in concrete.structured_input_signature[0]]
    outputs = sorted(concrete.structured_outputs)
    declared = sorted(spec.serving_outputs + (spec.n_best_outputs() if n_best > 1 else ()))
    if inputs != [spec.serving_input] or outputs != declared:
        raise TypeError(
            f"task {spec.name!r}: the serving function maps {inputs} to {outputs}; the task table declares "
            f"[{spec.serving_input!r}] to {declared}"
        )
