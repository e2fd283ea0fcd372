"""The task table: every task `seqtasks run` knows, what its recipe sections are and what it serves.

It sits on the recipe's floor with the tasks' recipe sections (`<task>/config.py`, plain dataclasses):
the recipe loader reads it. It names each task's implementation as `module:Class` without importing it,
so reading recipes, listing them and `seqtasks --help` never import task code or TensorFlow.
`seqtasks.tasks.task_class` imports and checks the class.
"""

from dataclasses import dataclass

from seqtasks.recipe.schema import Seq2SeqModelConfig
from seqtasks.tasks.captioning.config import CaptionerModelConfig, CaptioningDataConfig
from seqtasks.tasks.ner.config import TaggerModelConfig, TaggingDataConfig
from seqtasks.tasks.sentiment.config import TextClassificationDataConfig, TextClassifierModelConfig
from seqtasks.tasks.toy.config import ToyDataConfig
from seqtasks.tasks.translation.config import TranslationDataConfig


@dataclass(frozen=True)
class TaskSpec:
    """One row of the task table.

    Attributes:
        name: the recipe's `task` value.
        description: one line for the recipe reference.
        data_config, model_config: the dataclasses of the recipe's `data` and
            `model` sections.
        implementation: `module:Class` of the `seqtasks.tasks.Task` subclass.
        monitors: validation metrics `training.monitor` may name.
        headline: the validation metric (of the task's evaluation; higher is
            better) that says how good a model is: `training.average_last`
            keeps the average of the last checkpoints only if it scores
            higher by it than the best epoch's weights. None: the task's recipes
            cannot average so.
        reads_data_files: whether `seqtasks eval --data FILE` applies (the toy
            task makes its own data).
        serving_input: the name of the export's one string input, `text` or
            `image` (encoded image bytes).
        binary_input: whether that input is bytes (an encoded image) rather
            than text: a server takes it only base64-encoded, never as a path.
        serving_outputs: the export's output names; `seqtasks predict` prints
            the first one per input.
        mergeable_signatures: the signatures whose concurrent requests
            `seqtasks serve` may merge into one model call: those whose
            outputs have one row per example and no axis sized by the batch's
            longest input (NER pads its tokens to it, so it has none).
        client_method: the `seqtasks.load` model's method that answers for
            the task (`translate`, `classify`, `tag`, `caption`); None where
            `predict` is the way.
        decodes: whether the task's models write their outputs token by
            token through `seqtasks.decoding.search`: its model section then
            has a `decoding` section (the settings), its export the n-best
            outputs and the per-request settings, its first output a `score`.
    """

    name: str
    description: str
    data_config: type
    model_config: type
    implementation: str
    monitors: tuple = ("val_loss",)
    headline: str = None
    reads_data_files: bool = True
    serving_input: str = "text"
    binary_input: bool = False
    serving_outputs: tuple = ()
    mergeable_signatures: tuple = ()
    client_method: str = None
    decodes: bool = False

    def n_best_outputs(self):
        """The outputs an export with `model.decoding.n_best` > 1 adds: its first output's plural, and `scores`."""
        return (self.serving_outputs[0] + "s", "scores") if self.decodes else ()


TASKS = {
    task.name: task
    for task in [
        TaskSpec(
            name="toy",
            description="Reverse digit sequences with the attention encoder-decoder.",
            data_config=ToyDataConfig,
            model_config=Seq2SeqModelConfig,
            implementation="seqtasks.tasks.toy.task:ToyTask",
            decodes=True,
            headline="sequence_accuracy",
            monitors=("val_loss", "val_token_accuracy"),
            reads_data_files=False,
            serving_outputs=("output", "score"),
            mergeable_signatures=("serving_default", "with_settings"),
        ),
        TaskSpec(
            name="translation",
            description="Translate sentences with a subword attention encoder-decoder; BLEU and chrF.",
            data_config=TranslationDataConfig,
            model_config=Seq2SeqModelConfig,
            implementation="seqtasks.tasks.translation.task:TranslationTask",
            decodes=True,
            headline="bleu",
            monitors=("val_loss", "val_token_accuracy"),
            serving_outputs=("translation", "score"),
            mergeable_signatures=("serving_default", "with_settings"),
            client_method="translate",
        ),
        TaskSpec(
            name="sentiment",
            description="Classify texts from a recurrent encoder's last state, attention or max pooling, one model or an ensemble.",
            data_config=TextClassificationDataConfig,
            model_config=TextClassifierModelConfig,
            implementation="seqtasks.tasks.sentiment.task:SentimentTask",
            headline="accuracy",
            monitors=("val_loss", "val_accuracy"),
            serving_outputs=("label", "probabilities"),
            mergeable_signatures=("serving_default",),
            client_method="classify",
        ),
        TaskSpec(
            name="ner",
            description="Tag every token (named entities) with a bidirectional RNN and a CRF; seqeval F1.",
            data_config=TaggingDataConfig,
            model_config=TaggerModelConfig,
            implementation="seqtasks.tasks.ner.task:NerTask",
            headline="f1",
            monitors=("val_loss", "val_f1"),
            serving_outputs=("tags", "tokens", "token_start", "token_end", "entity_count", "entity_start",
                             "entity_end", "entity_type", "entity_text", "entity_score"),
            client_method="tag",
        ),
        TaskSpec(
            name="captioning",
            description="Caption images with an attention decoder over a CNN feature grid (Show, Attend and Tell); BLEU-1..4.",
            data_config=CaptioningDataConfig,
            model_config=CaptionerModelConfig,
            implementation="seqtasks.tasks.captioning.task:CaptioningTask",
            decodes=True,
            headline="bleu_4",
            monitors=("val_loss", "val_token_accuracy", "val_bleu_4"),
            serving_input="image",
            binary_input=True,
            serving_outputs=("caption", "score"),
            mergeable_signatures=("serving_default", "with_settings"),
            client_method="caption",
        ),
    ]
}
