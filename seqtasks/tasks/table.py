"""The task table: every task of seqtasks, what its recipe sections are and what it serves.

Each row (a `seqtasks.recipe.tasks.TaskSpec`) names its task's recipe sections, the plain dataclasses of
`<task>/config.py`, and its implementation as `module:Class` without importing it, so reading recipes,
listing them and `seqtasks --help` never import task code or TensorFlow; `seqtasks.tasks.task_class`
imports and checks the class. The recipe's floor below finds this table as the entry point `seqtasks` of
the group `seqtasks.task_tables` (pyproject.toml), never by an import.
"""

from seqtasks.recipe.schema import Seq2SeqModelConfig
from seqtasks.recipe.tasks import TaskSpec
from seqtasks.tasks.captioning.config import CaptionerModelConfig, CaptioningDataConfig
from seqtasks.tasks.ner.config import TaggerModelConfig, TaggingDataConfig
from seqtasks.tasks.sentiment.config import TextClassificationDataConfig, TextClassifierModelConfig
from seqtasks.tasks.toy.config import ToyDataConfig
from seqtasks.tasks.translation.config import TranslationDataConfig


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
