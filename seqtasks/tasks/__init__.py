"""The task table: every task `seqtasks run` knows, in one place.

A task names its recipe sections' types and its runner as `module:function`,
imported only when the task runs, so reading recipes never imports TensorFlow.
The same module gives `load_run(run_dir, overrides, checkpoint)`,
`export_run(run)` and, for tasks that read data files, `evaluate_file(run, path)`.
"""

from dataclasses import dataclass

from seqtasks.recipe.schema import (
    CaptionerModelConfig,
    CaptioningDataConfig,
    Seq2SeqModelConfig,
    TaggerModelConfig,
    TaggingDataConfig,
    TextClassificationDataConfig,
    TextClassifierModelConfig,
    ToyDataConfig,
    TranslationDataConfig,
)


@dataclass(frozen=True)
class Task:
    name: str
    description: str
    data_config: type
    model_config: type
    runner: str
    # Validation metrics `training.monitor` may name.
    monitors: tuple = ("val_loss",)

    def load_runner(self):
        return self.function(self.runner.split(":")[1])

    def function(self, name):
        """The task module's `name` (`load_run`, `evaluate_file`, `export_run`), or None where it has none."""
        import importlib

        return getattr(importlib.import_module(self.runner.split(":")[0]), name, None)


TASKS = {
    task.name: task
    for task in [
        Task(
            name="toy",
            description="Reverse digit sequences with the attention encoder-decoder.",
            data_config=ToyDataConfig,
            model_config=Seq2SeqModelConfig,
            runner="seqtasks.tasks.toy:run",
            monitors=("val_loss", "val_token_accuracy"),
        ),
        Task(
            name="translation",
            description="Translate sentences with a subword attention encoder-decoder; BLEU and chrF.",
            data_config=TranslationDataConfig,
            model_config=Seq2SeqModelConfig,
            runner="seqtasks.tasks.translation:run",
            monitors=("val_loss", "val_token_accuracy"),
        ),
        Task(
            name="sentiment",
            description="Classify texts from a recurrent encoder's last state or attention pooling.",
            data_config=TextClassificationDataConfig,
            model_config=TextClassifierModelConfig,
            runner="seqtasks.tasks.sentiment:run",
            monitors=("val_loss", "val_accuracy"),
        ),
        Task(
            name="ner",
            description="Tag every token (named entities) with a bidirectional RNN and a CRF; seqeval F1.",
            data_config=TaggingDataConfig,
            model_config=TaggerModelConfig,
            runner="seqtasks.tasks.ner:run",
        ),
        Task(
            name="captioning",
            description="Caption images with an attention decoder over a CNN feature grid (Show, Attend and Tell); BLEU-1..4.",
            data_config=CaptioningDataConfig,
            model_config=CaptionerModelConfig,
            runner="seqtasks.tasks.captioning:run",
            monitors=("val_loss", "val_token_accuracy"),
        ),
    ]
}
