"""A sixth task written outside the package, to show that a task is one file and one task-table row.

Character tagging: every character of a text gets a tag (here: `U` an upper-
case letter, `L` a lower-case one, `D` a digit, `S` a space, `P` anything
else). The data file has one example a line, `text<TAB>tags`, one tag letter
per character. The model is the package's own layers: an embedding, a
bidirectional `StackedRNN`, a softmax per character. The export maps `text`
to `tokens` (its characters, padded with "") and `tags`, the outputs a
`seqtasks.load` model's `tag()` reads, so `client_method="tag"` serves it.

`ROW` is its task-table row; `tests/tasks/test_base.py` adds it at run time.
"""

import json
from dataclasses import dataclass

from seqtasks.errors import SeqtasksError
from seqtasks.recipe.schema import spec
from seqtasks.tasks.table import TaskSpec
from seqtasks.tasks.base import Evaluation, Task

TAGS = ("U", "L", "D", "S", "P")


def char_tags(text):
    """The tag of each character of `text`: what the tagger learns from examples."""
    return "".join("U" if c.isupper() else "L" if c.islower() else "D" if c.isdigit() else "S" if c == " " else "P"
                   for c in text)


@dataclass
class CharDataConfig:
    path: str = spec("", "Examples, one a line: text<TAB>tags (a tag letter per character).", path=True)
    validation_size: int = spec(20, "Examples split off for validation.", min=1, max=100_000)
    max_length: int = spec(60, "Characters of a text that are tagged; the rest are cut off.", min=1, max=1_000)

    def check(self):
        return [] if self.path else [("path", "required: the examples file")]


@dataclass
class CharModelConfig:
    embedding_dim: int = spec(16, "Size of the character embeddings.", min=1, max=1024)
    units: int = spec(16, "State size of each direction of the recurrent layer.", min=1, max=1024)


ROW = TaskSpec(
    name="char_tagging",
    description="Tag every character of a text (case, digits, spaces); per-character accuracy.",
    data_config=CharDataConfig,
    model_config=CharModelConfig,
    implementation="tests.support.char_tagging:CharTaggingTask",
    monitors=("val_loss", "val_accuracy"),
    serving_outputs=("tags", "tokens"),
    client_method="tag",
)


class CharTaggingTask(Task):
    def read_splits(self):
        examples = self._read(self.recipe.data.path)
        size = self.recipe.data.validation_size
        if len(examples) <= size:
            raise SeqtasksError(f"{self.recipe.data.path}: {len(examples)} examples; need more than {size}")
        return examples[size:], examples[:size]

    def read_file(self, path):
        return self._read(path)

    def _read(self, path):
        examples = []
        with open(path, encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                text, tab, tags = line.rstrip("\n").partition("\t")
                if not tab or len(tags) != len(text) or set(tags) - set(TAGS):
                    raise SeqtasksError(f"{path}:{number}: expected text<TAB>one of {''.join(TAGS)} per character")
                examples.append((text, tags))
        return examples

    def prepare(self, train, validation, run_dir):
        chars = sorted({c for text, _ in train for c in text})
        (run_dir / "chars.json").write_text(json.dumps(chars))
        self.restore(run_dir)

    def restore(self, run_dir):
        # 0 pads, 1 is a character unseen in training.
        self.chars = json.loads((run_dir / "chars.json").read_text())
        self.index = {c: i + 2 for i, c in enumerate(self.chars)}

    def _arrays(self, examples):
        import numpy as np

        width = self.recipe.data.max_length
        ids = np.zeros((len(examples), width), np.int32)
        tags = np.zeros((len(examples), width), np.int32)
        for row, (text, labels) in enumerate(examples):
            text, labels = text[:width], labels[:width]
            ids[row, : len(text)] = [self.index.get(c, 1) for c in text]
            tags[row, : len(labels)] = [TAGS.index(t) for t in labels]
        return ids, tags

    def datasets(self, train, validation):
        import tensorflow as tf

        batch = self.recipe.training.batch_size
        train_ids, train_tags = self._arrays(train)
        data = tf.data.Dataset.from_tensor_slices((train_ids, train_tags)).shuffle(len(train), seed=self.recipe.seed)
        return data.batch(batch), tf.data.Dataset.from_tensor_slices(self._arrays(validation)).batch(batch)

    def build_model(self):
        import keras

        from seqtasks.layers import StackedRNN

        config = self.recipe.model
        ids = keras.Input((None,), dtype="int32")
        embedded = keras.layers.Embedding(len(self.chars) + 2, config.embedding_dim, mask_zero=True)(ids)
        states, _ = StackedRNN(config.units, cell_type="gru", bidirectional=True)(embedded)
        return keras.Model(ids, keras.layers.Dense(len(TAGS), activation="softmax")(states))

    def compile_model(self, model):
        import keras

        from seqtasks.training.fit import make_optimizer

        model.compile(
            optimizer=make_optimizer(self.recipe.training),
            loss=keras.losses.SparseCategoricalCrossentropy(),
            metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        )

    def evaluate(self, model, examples, out_dir):
        import numpy as np

        ids, gold = self._arrays(examples)
        predicted = np.argmax(np.asarray(model.predict(ids, verbose=0)), -1)
        real = ids != 0
        accuracy = float((predicted == gold)[real].mean())
        lines = ["".join(TAGS[t] for t, keep in zip(row, mask) if keep) for row, mask in zip(predicted, real)]
        (out_dir / "tags.txt").write_text("".join(f"{text}\t{tags}\n" for (text, _), tags in zip(examples, lines)))
        return Evaluation({"validation": {"char_accuracy": accuracy}}, [f"  {examples[0][0]} -> {lines[0]}"])

    def serving_module(self, model):
        import tensorflow as tf

        chars, width = self.chars, self.recipe.data.max_length

        class CharServer(tf.Module):
            def __init__(self):
                super().__init__()
                self.model = model
                self.table = tf.lookup.StaticHashTable(
                    tf.lookup.KeyValueTensorInitializer(tf.constant(chars), tf.range(2, len(chars) + 2)), 1
                )
                self.tags = tf.constant(TAGS)

            @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
            def serve(self, text):
                tokens = tf.strings.unicode_split(text, "UTF-8")[:, :width].to_tensor("")
                tokens = tf.pad(tokens, [[0, 0], [0, tf.maximum(0, 1 - tf.shape(tokens)[1])]], constant_values="")
                real = tf.not_equal(tokens, "")
                ids = tf.where(real, self.table.lookup(tokens), 0)
                tags = tf.gather(self.tags, tf.argmax(self.model(ids), -1, output_type=tf.int32))
                return {"tokens": tokens, "tags": tf.where(real, tags, "")}

        return CharServer()
