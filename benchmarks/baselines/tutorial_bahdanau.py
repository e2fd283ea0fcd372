"""Baseline B: the design of TensorFlow's older "Neural machine translation with attention" tutorial.

A GRU encoder; a decoder that, at every step, scores the encoder outputs with
Bahdanau attention against its previous state (vᵀ tanh(W₁q + W₂h)), feeds the
context joined with the embedded previous token to a GRU, and projects to the
vocabulary. Training runs the decoder one token at a time in a Python loop
inside a `tf.function` `GradientTape` step, over batches padded to the longest
sentence of the corpus; greedy decoding steps the decoder in a Python loop.

    python -m benchmarks.baselines.tutorial_bahdanau RUN_DIR SECONDS OUT.json
"""

import json
import sys

import keras
import numpy as np
import tensorflow as tf

from benchmarks.baselines import common
from seqtasks.text.special_ids import END_ID, PAD_ID, START_ID
from seqtasks.encoder_decoder.decoding import pad_rows


class Encoder(keras.Model):
    def __init__(self, vocab_size, embedding_dim, units):
        super().__init__()
        self.embedding = keras.layers.Embedding(vocab_size, embedding_dim)
        self.gru = keras.layers.GRU(units, return_sequences=True, return_state=True, recurrent_initializer="glorot_uniform")

    def call(self, ids):
        return self.gru(self.embedding(ids))


class BahdanauAttention(keras.layers.Layer):
    def __init__(self, units):
        super().__init__()
        self.query_dense = keras.layers.Dense(units)
        self.memory_dense = keras.layers.Dense(units)
        self.score_dense = keras.layers.Dense(1)

    def call(self, query, values):
        score = self.score_dense(tf.nn.tanh(self.query_dense(query[:, None, :]) + self.memory_dense(values)))
        weights = tf.nn.softmax(score, axis=1)
        return tf.reduce_sum(weights * values, axis=1)


class Decoder(keras.Model):
    def __init__(self, vocab_size, embedding_dim, units):
        super().__init__()
        self.embedding = keras.layers.Embedding(vocab_size, embedding_dim)
        self.gru = keras.layers.GRU(units, return_sequences=True, return_state=True, recurrent_initializer="glorot_uniform")
        self.fc = keras.layers.Dense(vocab_size)
        self.attention = BahdanauAttention(units)

    def call(self, ids, state, memory):
        context = self.attention(state, memory)
        x = tf.concat([context[:, None, :], self.embedding(ids)], axis=-1)
        output, state = self.gru(x, initial_state=state)
        return self.fc(output[:, 0]), state


def main(run_dir, seconds, out):
    recipe, train, validation, source_tokenizer, target_tokenizer = common.load_run_data(run_dir)
    config = recipe.data
    rows = common.tokenized_rows(train, source_tokenizer, target_tokenizer, config.max_length)
    embedding_dim, units = recipe.model.embedding_dim, recipe.model.decoder.units
    batch_size = recipe.training.batch_size
    encoder = Encoder(source_tokenizer.vocab_size, embedding_dim, units)
    decoder = Decoder(target_tokenizer.vocab_size, embedding_dim, units)
    optimizer = keras.optimizers.Adam()
    loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    source_width = max(len(s) for s, _ in rows)
    target_width = max(len(t) for _, t in rows)
    sources, targets = pad_rows([s for s, _ in rows], source_width), pad_rows([t for _, t in rows], target_width)
    data = tf.data.Dataset.from_tensor_slices((sources, targets)).shuffle(len(rows), seed=recipe.seed)
    data = data.batch(batch_size, drop_remainder=True).repeat()

    @tf.function
    def train_step(source, target):
        loss = 0.0
        with tf.GradientTape() as tape:
            memory, state = encoder(source)
            ids = tf.fill([batch_size, 1], START_ID)
            for t in range(1, target_width):
                logits, state = decoder(ids, state, memory)
                mask = tf.cast(target[:, t] != PAD_ID, logits.dtype)
                loss += tf.reduce_mean(loss_object(target[:, t], logits) * mask)
                ids = target[:, t : t + 1]
            loss = loss / target_width
        variables = encoder.trainable_variables + decoder.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    budget = common.Budget(seconds)
    for source, target in data:
        train_step(source, target)
        if not budget.step_done(np.count_nonzero(target.numpy()[:, 1:])):
            break

    max_length = recipe.model.decoding.max_length

    def greedy(source):
        memory, state = encoder(tf.constant(source))
        ids = tf.fill([source.shape[0], 1], START_ID)
        done = np.zeros(source.shape[0], bool)
        outputs = []
        for _ in range(max_length):
            logits, state = decoder(ids, state, memory)
            next_ids = tf.argmax(logits, axis=-1, output_type=tf.int32).numpy()
            outputs.append(np.where(done, PAD_ID, next_ids))
            done |= next_ids == END_ID
            if done.all():
                break
            ids = tf.constant(next_ids[:, None])
        return common.end_mask(np.stack(outputs, axis=1))

    bleu, speed = common.greedy_bleu(greedy, validation, source_tokenizer, target_tokenizer, config.max_length, config.lower_case)
    parameters = encoder.count_params() + decoder.count_params()
    with open(out, "w") as handle:
        json.dump(common.result(budget, bleu, speed, parameters), handle)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), sys.argv[3])
