"""The task contract: what every task gives the runner (`seqtasks.lifecycle.runner`), which does the rest."""

import abc
from dataclasses import dataclass, field

from seqtasks.errors import SeqtasksError
from seqtasks.recipe.tasks import task_table


@dataclass
class Evaluation:
    """What `Task.evaluate` returns.

    Attributes:
        metrics: the entries for `metrics.json`; `metrics["validation"]` maps
            each headline metric's name to its value.
        report: lines for the console after the metrics: sample outputs,
            scores per class or entity type.
    """

    metrics: dict
    report: list = field(default_factory=list)


class Task(abc.ABC):
    """A task's own part of a run: its data, model, evaluation and serving.

    The runner owns the lifecycle that is the same for every task (the run
    folder, the saved recipe, resuming, `fit`, checkpoints, metrics, export,
    reloading a run) and calls these methods:

    - training: `read_splits` -> `prepare` -> `datasets` -> `build_model` and
      `compile_model` -> fit -> `training_metrics` -> `evaluate` on the
      validation split -> `serving_module`, exported;
    - a trained run: `restore` -> `build_model` (for a checkpoint's weights)
      -> `evaluate` (examples from `read_splits` or `read_file`) or
      `serving_module`.

    `prepare` or `restore` comes before anything that needs what is learned
    from the training data (vocabularies, labels); a task keeps that on
    itself. The task table (`seqtasks.tasks.table`) declares each
    task's recipe sections and serving input and outputs (`spec`).

    Args:
        recipe: the merged `Recipe`.
    """

    def __init__(self, recipe):
        self.recipe = recipe

    @property
    def spec(self):
        """The task's row of the task table."""
        return task_table()[self.recipe.task]

    @abc.abstractmethod
    def read_splits(self):
        """`(train, validation)`: the recipe's examples, in the task's own form.

        The runner reads them before it makes a run folder, so a malformed
        file fails with its reader's `SeqtasksError` (file and line) first.
        """

    def input_paths(self):
        """`(path, "file" or "folder")` of everything the recipe makes the task read, checked before a run starts.

        By default the path fields of the recipe's `data` section: files, or
        folders where the schema says `path="folder"`; fields the task
        writes (`path="written"`) are left out.
        """
        import dataclasses

        data = self.recipe.data
        for field in dataclasses.fields(data):
            kind, value = field.metadata.get("path"), getattr(data, field.name)
            if kind and value and kind != "written":
                yield value, "folder" if kind == "folder" else "file"

    def start_paths(self):
        """`(path, "file", what it is for)` of what only a new run reads, as it prepares (pretrained vectors):
        checked before a new run folder is made; a resumed run has it in its folder already. None by default."""
        return []

    def read_file(self, path):
        """The examples of a data file in the recipe's format, for `seqtasks eval`, after `restore`."""
        raise SeqtasksError(f"task {self.recipe.task!r} makes its own data; it has no data files to evaluate on")

    def heldout_splits(self):
        """Named example lists, read by `read_splits`, that training never sees and that choose nothing.

        The runner evaluates the final model on each after the validation
        split, into `RUN/eval/<name>/`, and records its headline metrics as
        `metrics[name]`. None by default.
        """
        return {}

    @abc.abstractmethod
    def prepare(self, train, validation, run_dir):
        """Learns what the model needs from the training examples and writes it into `run_dir` for `restore`."""

    @abc.abstractmethod
    def restore(self, run_dir):
        """Reads back what `prepare` wrote into a run folder."""

    @abc.abstractmethod
    def datasets(self, train, validation):
        """`(train, validation)` `tf.data` pipelines of `training.batch_size` batches for `fit`.

        The training pipeline shuffles by the recipe's seed and the training
        position (`seqtasks.data.batching.epoch_ordered`), so a resumed run
        sees the batches the stopped one had not.
        """

    @abc.abstractmethod
    def build_model(self):
        """A new, built model; the runner calls it under the distribution strategy and dtype policy."""

    @abc.abstractmethod
    def compile_model(self, model):
        """Compiles `model` with the recipe's optimizer (`seqtasks.training.fit.make_optimizer`) and loss."""

    def training_metrics(self, train, validation, history):
        """Entries for `metrics.json` about training: example counts, throughput.

        `history` is the run's Keras history with `batches_seen` (training
        steps, earlier runs of a resumed one included) and `train_seconds`.
        """
        return {}

    def validation_scores(self, validation):
        """None, or a callable from the model to `{log name: value}` that `fit` adds to each epoch's logs after
        validation: scores of decoded `validation` examples that `training.monitor` may name."""
        return None

    @abc.abstractmethod
    def evaluate(self, model, examples, out_dir):
        """An `Evaluation` of `model` on `examples`; predictions and figures are written into `out_dir`."""

    def data_notes(self):
        """Lines the model card adds about what the model learned from besides its data files (pretrained vectors)."""
        return []

    def input_limits(self):
        """The model card's lines on what the export reads of an input and how long its outputs may be."""
        lines = ["Any batch size; an empty batch gives empty outputs.", *self.reading_limits()]
        if self.spec.decodes:
            decoding = self.recipe.model.decoding
            line = f"An output has at most {decoding.max_length} tokens (`model.decoding.max_length`)"
            if decoding.length_factor > 0:
                line += (f", and at most {decoding.length_factor:g} x (its source's tokens + 1) where the model reads "
                         "tokens (`model.decoding.length_factor`)")
            lines.append(line + ".")
        return lines

    def reading_limits(self):
        """How much of one input the export reads, in lines; by default a text's characters, then its tokens."""
        from seqtasks.export.serving_limits import text_character_limit

        data = self.recipe.data
        keep = getattr(data, "keep", "first")
        return [
            f"Only the {keep} {text_character_limit(data.max_length):,} characters of a text are read.",
            f"A text is cut to its first {data.max_length} tokens (`data.max_length`).",
        ]

    def vocabularies(self):
        """The vocabularies the model reads and writes, by name, after `prepare` or `restore`: runs whose models
        decode together as an ensemble must have the same. None for a task whose models do not decode."""
        return None

    def label_names(self):
        """A classifier's class names in the order of its probabilities; None for a task that has none."""
        return None

    @abc.abstractmethod
    def serving_module(self, model):
        """A `tf.Module` whose `serve` `tf.function` maps the declared input `[None]` to the declared outputs."""
