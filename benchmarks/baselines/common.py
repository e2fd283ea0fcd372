"""What the two baselines share: the seqtasks run's data and subwords, a time budget, BLEU."""

import time

import numpy as np

from seqtasks.text.special_ids import END_ID, PAD_ID, START_ID
from seqtasks.encoder_decoder.decoding import pad_rows


def load_run_data(run_dir):
    """`(recipe, train_pairs, validation_pairs, source_tokenizer, target_tokenizer)` of a translation run folder."""
    import keras

    from seqtasks.recipe import load_recipe
    from seqtasks.lifecycle.runner import Runner

    # Seeded before the tokenizers exist: re-seeding TensorFlow clears its kernels, and with them the
    # SentencePiece models' resources that the tokenizers look up.
    keras.utils.set_random_seed(load_recipe(f"{run_dir}/recipe.yaml").seed)
    task = Runner.open(run_dir).task
    train, validation = task.read_splits()
    return task.recipe, train, validation, task.source_tokenizer, task.target_tokenizer


def tokenized_rows(pairs, source_tokenizer, target_tokenizer, max_length):
    """Id lists `(source, target with [START] and [END])`, pairs longer than `max_length` left out, as seqtasks does."""
    import tensorflow as tf

    sources = source_tokenizer.tokenize(tf.constant([s for s, _ in pairs])).to_list()
    targets = target_tokenizer.tokenize(tf.constant([t for _, t in pairs])).to_list()
    return [
        (s, [START_ID] + t + [END_ID])
        for s, t in zip(sources, targets)
        if 0 < len(s) <= max_length and len(t) + 1 <= max_length
    ]


class Budget:
    """Training time against a budget; `first_step_seconds` is the time to the end of the first step."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.started = time.perf_counter()
        self.first_step_seconds = None
        self.stopped = None
        self.tokens = 0
        self.steps = 0

    def step_done(self, tokens):
        """Counts a step of `tokens` target tokens; False once the budget is spent (the clock then stops)."""
        if self.first_step_seconds is None:
            self.first_step_seconds = time.perf_counter() - self.started
        self.tokens += int(tokens)
        self.steps += 1
        if self.elapsed < self.seconds:
            return True
        self.stopped = time.perf_counter()
        return False

    @property
    def elapsed(self):
        return (self.stopped or time.perf_counter()) - self.started


def greedy_bleu(decode_batch, validation_pairs, source_tokenizer, target_tokenizer, max_length, lower_case, batch_size=64):
    """Greedy-decodes the validation sources in length-sorted batches: `(bleu, sentences_per_second)`."""
    import sacrebleu
    import tensorflow as tf

    from seqtasks.tasks.translation.task import normalize_reference

    sources = [row[:max_length] for row in source_tokenizer.tokenize(tf.constant([s for s, _ in validation_pairs])).to_list()]
    order = np.argsort([len(row) for row in sources], kind="stable")
    outputs = [None] * len(sources)
    started = time.perf_counter()
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        ids = decode_batch(pad_rows([sources[i] for i in chunk]))
        for index, row in zip(chunk, ids):
            outputs[index] = row
    seconds = time.perf_counter() - started
    width = max(len(row) for row in outputs)
    texts = [t.decode() for t in target_tokenizer.detokenize(pad_rows(outputs, width)).numpy()]
    references = [normalize_reference(t, lower_case) for _, t in validation_pairs]
    return sacrebleu.BLEU().corpus_score(texts, [references]).score, len(sources) / seconds


def result(budget, bleu, sentences_per_second, parameters):
    import resource

    return {
        "train_target_tokens_per_second": budget.tokens / budget.elapsed,
        "train_steps": budget.steps,
        "train_seconds": budget.elapsed,
        "first_step_seconds": budget.first_step_seconds,
        "bleu_greedy": bleu,
        "greedy_sentences_per_second": sentences_per_second,
        "parameters": parameters,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def end_mask(ids):
    """Zeroes every id after the first [END] (kept) in each row."""
    ended = np.cumsum(ids == END_ID, axis=1) - (ids == END_ID)
    return np.where(ended > 0, PAD_ID, ids)
