"""The toy task: reverse sequences of digits ("3 1 4" -> "4 1 3").

It exercises the whole path of a real task (recipe -> data -> model -> fit ->
decoding -> metrics -> SavedModel) in about half a minute on a CPU, and the
attention it needs (output step t reads input step T - t) is easy to check.
"""

import numpy as np

from seqtasks.evaluation.length_buckets import report_lines, scores_by_length
from seqtasks.text.special_ids import END_ID, PAD_ID, RESERVED_TOKENS, START_ID
from seqtasks.tasks.base import Evaluation, Task


def make_examples(config, count, rng):
    """Returns `(source, target_in, target_out)` int32 arrays, 0-padded.

    Digit `d` has id `len(RESERVED_TOKENS) + d`, as in `WordTokenizer` over
    the digits.
    """
    width = config.max_length
    source = np.full((count, width), PAD_ID, np.int32)
    target_in = np.full((count, width + 1), PAD_ID, np.int32)
    target_out = np.full((count, width + 1), PAD_ID, np.int32)
    for row in range(count):
        length = rng.integers(config.min_length, config.max_length + 1)
        ids = rng.integers(0, config.num_symbols, size=length) + len(RESERVED_TOKENS)
        source[row, :length] = ids
        target_in[row, 0] = START_ID
        target_in[row, 1 : length + 1] = ids[::-1]
        target_out[row, :length] = ids[::-1]
        target_out[row, length] = END_ID
    return source, target_in, target_out


def _dataset(arrays, batch_size, shuffle_seed=None):
    import tensorflow as tf

    from seqtasks.data.batching import epoch_ordered

    source, target_in, target_out = arrays
    data = tf.data.Dataset.from_tensor_slices(((source, target_in), target_out))
    if shuffle_seed is None:
        data = data.batch(batch_size)
    else:
        data = epoch_ordered(data, len(source), shuffle_seed, lambda elements: elements.batch(batch_size))
    return data.prefetch(tf.data.AUTOTUNE)


def sequence_scores(predictions, target_out):
    """Sequence and token accuracy of decoded id rows against the references."""
    width = target_out.shape[1]
    predicted = np.stack([np.pad(row[:width], (0, max(0, width - len(row)))) for row in predictions])
    real = target_out != PAD_ID
    return {
        "sequence_accuracy": float(np.all((predicted == target_out) | ~real, axis=1).mean()),
        "token_accuracy": float(((predicted == target_out) & real).sum() / real.sum()),
    }


class ToyTask(Task):
    """Generated digit sequences -> `Seq2Seq` -> sequence and token accuracy."""

    def read_splits(self):
        config = self.recipe.data
        rng = np.random.default_rng(self.recipe.seed)
        return make_examples(config, config.train_size, rng), make_examples(config, config.validation_size, rng)

    def prepare(self, train, validation, run_dir):
        self.restore(run_dir)

    def restore(self, run_dir):
        from seqtasks.text.word_tokenizer import WordTokenizer

        self.tokenizer = WordTokenizer([str(digit) for digit in range(self.recipe.data.num_symbols)])

    def vocabularies(self):
        return {"output": list(self.tokenizer.vocab)}

    def datasets(self, train, validation):
        batch_size = self.recipe.training.batch_size
        return _dataset(train, batch_size, shuffle_seed=self.recipe.seed), _dataset(validation, batch_size)

    def build_model(self):
        from seqtasks.models import Seq2Seq

        size = self.tokenizer.vocab_size
        return Seq2Seq.from_recipe(self.recipe.model, size, size, seed=self.recipe.seed)

    def compile_model(self, model):
        from seqtasks.encoder_decoder.training import compile_model

        compile_model(model, self.recipe.training)

    def training_metrics(self, train, validation, history):
        return {"train_examples": len(train[0]), "validation_examples": len(validation[0])}

    def evaluate(self, model, examples, out_dir):
        from seqtasks.encoder_decoder.decoding import decode_id_rows, make_decode

        source, _, target_out = examples
        decode = make_decode(model, self.recipe.model.decoding)
        predictions = decode_id_rows(decode, model, source, self.recipe.evaluation.batch_size)
        sources = self.tokenizer.detokenize(source[:3]).numpy()
        outputs = self.tokenizer.detokenize(np.stack(predictions[:3])).numpy()
        report = ["Sample outputs (validation):"]
        report += [f"  {s.decode()}  ->  {o.decode()}" for s, o in zip(sources, outputs)]
        by_length = scores_by_length(
            np.count_nonzero(source != PAD_ID, axis=1).tolist(),
            self.recipe.evaluation.length_buckets,
            lambda rows: sequence_scores([predictions[i] for i in rows], target_out[rows]),
            "source symbols",
        )
        report += report_lines(by_length, ["sequence_accuracy", "token_accuracy"])
        return Evaluation({"validation": sequence_scores(predictions, target_out), "by_length": by_length}, report)

    def serving_module(self, model):
        from seqtasks.encoder_decoder.export import make_encoder_decoder_module, text_reader

        reader = text_reader(self.tokenizer, self.recipe.data.max_length)
        return make_encoder_decoder_module(model, reader, self.tokenizer, "output", self.recipe.model.decoding)
