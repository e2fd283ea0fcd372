"""Baseline A: the design of TensorFlow's current "Neural machine translation with attention" tutorial.

A bidirectional GRU encoder (directions summed), a GRU decoder whose outputs
attend to the encoder states through one-head `MultiHeadAttention` (added and
layer-normalised) before the output layer, trained with `fit` and teacher
forcing on shuffled batches padded to their longest sentence; greedy decoding
in a Python loop, one decoder call per step, stopping when every row ended.

    python -m benchmarks.baselines.tutorial_attention RUN_DIR SECONDS OUT.json
"""

import json
import sys

import keras
import numpy as np
import tensorflow as tf

from benchmarks.baselines import common
from seqtasks.text.special_ids import END_ID, PAD_ID, START_ID


class Encoder(keras.layers.Layer):
    def __init__(self, vocab_size, units, **kwargs):
        super().__init__(**kwargs)
        self.embedding = keras.layers.Embedding(vocab_size, units, mask_zero=True)
        self.rnn = keras.layers.Bidirectional(
            keras.layers.GRU(units, return_sequences=True, recurrent_initializer="glorot_uniform"), merge_mode="sum"
        )

    def call(self, ids):
        return self.rnn(self.embedding(ids))


class CrossAttention(keras.layers.Layer):
    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.attention = keras.layers.MultiHeadAttention(key_dim=units, num_heads=1)
        self.norm = keras.layers.LayerNormalization()
        self.add = keras.layers.Add()

    def call(self, x, context, context_mask):
        attended = self.attention(query=x, value=context, attention_mask=context_mask[:, None, :])
        return self.norm(self.add([x, attended]))


class Decoder(keras.layers.Layer):
    def __init__(self, vocab_size, units, **kwargs):
        super().__init__(**kwargs)
        self.embedding = keras.layers.Embedding(vocab_size, units, mask_zero=True)
        self.rnn = keras.layers.GRU(units, return_sequences=True, return_state=True, recurrent_initializer="glorot_uniform")
        self.attention = CrossAttention(units)
        self.output_layer = keras.layers.Dense(vocab_size)

    def call(self, context, context_mask, ids, state=None):
        x, state = self.rnn(self.embedding(ids), initial_state=state)
        return self.output_layer(self.attention(x, context, context_mask)), state


class Translator(keras.Model):
    def __init__(self, source_vocab, target_vocab, units, **kwargs):
        super().__init__(**kwargs)
        self.encoder = Encoder(source_vocab, units)
        self.decoder = Decoder(target_vocab, units)

    def call(self, inputs):
        source, target_in = inputs
        return self.decoder(self.encoder(source), source != PAD_ID, target_in)[0]


def masked_loss(y_true, y_pred):
    loss = keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True)
    mask = tf.cast(y_true != PAD_ID, loss.dtype)
    return tf.reduce_sum(loss * mask) / tf.reduce_sum(mask)


def dataset(rows, batch_size, seed):
    sources = tf.ragged.constant([s for s, _ in rows], dtype=tf.int32)
    targets = tf.ragged.constant([t for _, t in rows], dtype=tf.int32)
    data = tf.data.Dataset.from_tensor_slices((sources, targets)).shuffle(len(rows), seed=seed).batch(batch_size)

    def to_dense(source, target):
        source, target = source.to_tensor(), target.to_tensor()
        return (source, target[:, :-1]), target[:, 1:]

    return data.map(to_dense, num_parallel_calls=tf.data.AUTOTUNE).repeat()


def greedy(model, source, max_length):
    context, context_mask = model.encoder(tf.constant(source)), tf.constant(source != PAD_ID)
    ids = tf.fill([source.shape[0], 1], START_ID)
    done = np.zeros(source.shape[0], bool)
    state, outputs = None, []
    for _ in range(max_length):
        logits, state = model.decoder(context, context_mask, ids, state)
        ids = tf.argmax(logits[:, -1:], axis=-1, output_type=tf.int32)
        outputs.append(ids.numpy()[:, 0])
        done |= outputs[-1] == END_ID
        if done.all():
            break
    return common.end_mask(np.stack(outputs, axis=1))


def main(run_dir, seconds, out):
    recipe, train, validation, source_tokenizer, target_tokenizer = common.load_run_data(run_dir)
    config = recipe.data
    rows = common.tokenized_rows(train, source_tokenizer, target_tokenizer, config.max_length)
    units, batch_size = recipe.model.decoder.units, recipe.training.batch_size
    model = Translator(source_tokenizer.vocab_size, target_tokenizer.vocab_size, units)
    model.compile(optimizer=keras.optimizers.Adam(), loss=masked_loss)
    tokens_per_batch = np.mean([len(t) - 1 for _, t in rows]) * batch_size
    data = dataset(rows, batch_size, recipe.seed)
    budget = common.Budget(seconds)

    class StopAtBudget(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if not budget.step_done(tokens_per_batch):
                self.model.stop_training = True

    model.fit(data, epochs=1, steps_per_epoch=10**7, callbacks=[StopAtBudget()], verbose=0)
    max_length = recipe.model.decoding.max_length
    bleu, speed = common.greedy_bleu(
        lambda source: greedy(model, source, max_length),
        validation,
        source_tokenizer,
        target_tokenizer,
        config.max_length,
        config.lower_case,
    )
    with open(out, "w") as handle:
        json.dump(common.result(budget, bleu, speed, model.count_params()), handle)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), sys.argv[3])
