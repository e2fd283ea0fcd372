"""Records the tfa.seq2seq reference models of tests/converters/test_tfa.py (run by hand, never by the tests).

The model is the encoder-decoder of TensorFlow's "Neural machine translation with
attention" tutorial of the tensorflow-addons era, kept as that tutorial wrote it
(an `Encoder` and a `Decoder` of tf.keras, `tfa.seq2seq.AttentionWrapper` with
`attention_layer_size`, `BasicDecoder`, a `tf.train.Checkpoint` of encoder, decoder
and optimizer), at toy sizes. It trains for a few steps on the first pairs of
tests/data/spa-eng-sample.tsv, then writes, per attention variant:

- `tfa-<variant>/ckpt-1.*`, the checkpoint, and `source.vocab`, `target.vocab`
  (line N is the token of id N; line 0 is padding, as the tutorial's tokenizer
  leaves id 0 free);
- `tfa-<variant>/outputs.npz`: source and target ids, the teacher-forced
  logits and attention weights, greedy ids and lengths (GreedyEmbeddingSampler),
  beam search ids, lengths and scores (BeamSearchDecoder with `tile_batch`) for
  three settings of `length_penalty_weight` and `coverage_penalty_weight`;

and `tfa-crf.npz`: `crf_log_likelihood` and `crf_decode` on random potentials.

Run in a virtual environment of its own (tests/data/migration/README.md):

    python -m venv /tmp/venv-tfa
    /tmp/venv-tfa/bin/pip install "tensorflow==2.15.1" "tensorflow-addons==0.23.0" "numpy<2"
    /tmp/venv-tfa/bin/python tests/data/migration/record_tfa.py
"""

import re
import unicodedata
from pathlib import Path

import numpy as np
import tensorflow as tf
import tensorflow_addons as tfa

HERE = Path(__file__).resolve().parent
PAIRS = HERE.parent / "spa-eng-sample.tsv"
EMBEDDING, UNITS, BATCH, STEPS, MAX_ITERATIONS = 8, 16, 32, 300, 12
# (length_penalty_weight, coverage_penalty_weight) of the recorded beam searches.
BEAM_SETTINGS = [(0.0, 0.0), (0.6, 0.0), (0.6, 0.4)]
BEAM_WIDTH = 3


def preprocess(sentence):
    # The tutorial's normalisation: ASCII, lower case, punctuation as words, <start> ... <end>.
    sentence = "".join(c for c in unicodedata.normalize("NFD", sentence.lower()) if unicodedata.category(c) != "Mn")
    sentence = re.sub(r"([?.!,¿])", r" \1 ", sentence)
    sentence = re.sub(r"[^a-z?.!,¿]+", " ", sentence).strip()
    return f"<start> {sentence} <end>"


def read_pairs(count):
    lines = PAIRS.read_text(encoding="utf-8").splitlines()[:count]
    english, spanish = zip(*(line.split("\t") for line in lines))
    return [preprocess(s) for s in spanish], [preprocess(e) for e in english]


class Encoder(tf.keras.Model):
    def __init__(self, vocab_size, embedding_dim, enc_units):
        super().__init__()
        self.embedding = tf.keras.layers.Embedding(vocab_size, embedding_dim)
        self.lstm_layer = tf.keras.layers.LSTM(
            enc_units, return_sequences=True, return_state=True, recurrent_initializer="glorot_uniform"
        )

    def call(self, x):
        return self.lstm_layer(self.embedding(x))


class Decoder(tf.keras.Model):
    def __init__(self, vocab_size, embedding_dim, dec_units, attention_type, source_length):
        super().__init__()
        self.embedding = tf.keras.layers.Embedding(vocab_size, embedding_dim)
        self.fc = tf.keras.layers.Dense(vocab_size)
        self.decoder_rnn_cell = tf.keras.layers.LSTMCell(dec_units)
        self.sampler = tfa.seq2seq.sampler.TrainingSampler()
        if attention_type == "bahdanau":
            self.attention_mechanism = tfa.seq2seq.BahdanauAttention(units=dec_units, normalize=True)
        else:
            self.attention_mechanism = tfa.seq2seq.LuongAttention(units=dec_units)
        self.rnn_cell = tfa.seq2seq.AttentionWrapper(
            self.decoder_rnn_cell, self.attention_mechanism, attention_layer_size=dec_units
        )
        self.decoder = tfa.seq2seq.BasicDecoder(self.rnn_cell, sampler=self.sampler, output_layer=self.fc)

    def build_initial_state(self, batch_size, encoder_state):
        state = self.rnn_cell.get_initial_state(batch_size=batch_size, dtype=tf.float32)
        return state.clone(cell_state=encoder_state)

    def call(self, inputs, initial_state, lengths):
        outputs, _, _ = self.decoder(self.embedding(inputs), initial_state=initial_state, sequence_length=lengths)
        return outputs.rnn_output


def lengths_of(ids):
    return tf.reduce_sum(tf.cast(ids != 0, tf.int32), axis=1)


def encode(encoder, decoder, source, multiplier=1):
    memory, h, c = encoder(source)
    lengths = lengths_of(source)
    if multiplier > 1:
        memory, h, c, lengths = (tfa.seq2seq.tile_batch(x, multiplier=multiplier) for x in (memory, h, c, lengths))
    decoder.attention_mechanism.setup_memory(memory, memory_sequence_length=lengths)
    return decoder.build_initial_state(tf.shape(memory)[0], [h, c])


def train(encoder, decoder, source, target):
    optimizer = tf.keras.optimizers.Adam(0.01)
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    for step in range(STEPS):
        index = np.arange(step * BATCH, (step + 1) * BATCH) % len(source)
        src, tgt = tf.constant(source[index]), tf.constant(target[index])
        tgt = tgt[:, : int(tf.reduce_max(lengths_of(tgt)))]
        with tf.GradientTape() as tape:
            state = encode(encoder, decoder, src)
            logits = decoder(tgt[:, :-1], state, lengths_of(tgt) - 1)
            mask = tf.cast(tgt[:, 1:] != 0, tf.float32)
            loss = tf.reduce_sum(loss_object(tgt[:, 1:], logits) * mask) / tf.reduce_sum(mask)
        variables = encoder.trainable_variables + decoder.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    print(f"loss after {STEPS} steps: {float(loss):.3f}")
    return optimizer


def teacher_forced(encoder, decoder, source, target_in):
    # Step by step through the AttentionWrapper, so its alignments are recorded beside the logits.
    state = encode(encoder, decoder, source)
    embedded = decoder.embedding(target_in)
    logits, weights = [], []
    for t in range(target_in.shape[1]):
        output, state = decoder.rnn_cell(embedded[:, t], state)
        logits.append(decoder.fc(output))
        weights.append(state.alignments)
    return np.stack(logits, 1), np.stack(weights, 1)


def greedy(encoder, decoder, source, start, end):
    sampler = tfa.seq2seq.GreedyEmbeddingSampler()
    search = tfa.seq2seq.BasicDecoder(
        decoder.rnn_cell, sampler=sampler, output_layer=decoder.fc, maximum_iterations=MAX_ITERATIONS
    )
    state = encode(encoder, decoder, source)
    start_tokens = tf.fill([source.shape[0]], start)
    outputs, _, lengths = search(decoder.embedding.variables[0], start_tokens=start_tokens, end_token=end, initial_state=state)
    return outputs.sample_id.numpy(), lengths.numpy()


def beam(encoder, decoder, source, start, end, length_penalty, coverage_penalty):
    search = tfa.seq2seq.BeamSearchDecoder(
        decoder.rnn_cell,
        beam_width=BEAM_WIDTH,
        output_layer=decoder.fc,
        length_penalty_weight=length_penalty,
        coverage_penalty_weight=coverage_penalty,
        maximum_iterations=MAX_ITERATIONS,
    )
    state = encode(encoder, decoder, source, BEAM_WIDTH)
    start_tokens = tf.fill([source.shape[0]], start)
    outputs, final_state, lengths = search(
        decoder.embedding.variables[0], start_tokens=start_tokens, end_token=end, initial_state=state
    )
    ids = tf.transpose(outputs.predicted_ids, (0, 2, 1)).numpy()  # (batch, beam, time)
    # The final beam scores: the last step's, which the beams are sorted by.
    return ids, lengths.numpy(), final_state.log_probs.numpy(), outputs.beam_search_decoder_output.scores.numpy()


def record(variant, sources, targets):
    out = HERE / f"tfa-{variant}"
    out.mkdir(exist_ok=True)
    for old in out.glob("ckpt-*"):
        old.unlink()
    tf.keras.utils.set_random_seed(7)
    source_tokenizer = tf.keras.preprocessing.text.Tokenizer(filters="")
    source_tokenizer.fit_on_texts(sources)
    target_tokenizer = tf.keras.preprocessing.text.Tokenizer(filters="")
    target_tokenizer.fit_on_texts(targets)
    source = tf.keras.preprocessing.sequence.pad_sequences(source_tokenizer.texts_to_sequences(sources), padding="post")
    target = tf.keras.preprocessing.sequence.pad_sequences(target_tokenizer.texts_to_sequences(targets), padding="post")
    encoder = Encoder(len(source_tokenizer.word_index) + 1, EMBEDDING, UNITS)
    decoder = Decoder(len(target_tokenizer.word_index) + 1, EMBEDDING, UNITS, variant, source.shape[1])
    optimizer = train(encoder, decoder, source, target)
    tf.train.Checkpoint(optimizer=optimizer, encoder=encoder, decoder=decoder).save(str(out / "ckpt"))
    for name, tokenizer in (("source", source_tokenizer), ("target", target_tokenizer)):
        words = ["<pad>"] + [tokenizer.index_word[i] for i in range(1, len(tokenizer.word_index) + 1)]
        (out / f"{name}.vocab").write_text("\n".join(words) + "\n", encoding="utf-8")
    # Unpadded batches: the tutorial's encoder reads padding (no mask), which seqtasks masks.
    src_lengths, tgt_lengths = lengths_of(source).numpy(), lengths_of(target).numpy()
    pick = np.flatnonzero((src_lengths == 6) & (tgt_lengths == 6))[:4]
    fixture_source = source[pick][:, :6]
    fixture_target = target[pick][:, :6]
    logits, weights = teacher_forced(encoder, decoder, tf.constant(fixture_source), tf.constant(fixture_target[:, :-1]))
    start, end = target_tokenizer.word_index["<start>"], target_tokenizer.word_index["<end>"]
    # Greedy and beam search on the fixture batch and on sentences of other lengths, one at a time.
    greedy_ids, greedy_lengths = greedy(encoder, decoder, tf.constant(fixture_source), start, end)
    arrays = {
        "source": fixture_source,
        "target": fixture_target,
        "logits": logits,
        "attention": weights,
        "greedy_ids": greedy_ids,
        "greedy_lengths": greedy_lengths,
        "start": start,
        "end": end,
    }
    for index, (alpha, beta) in enumerate(BEAM_SETTINGS):
        ids, lengths, log_probs, step_scores = beam(encoder, decoder, tf.constant(fixture_source), start, end, alpha, beta)
        arrays.update(
            {
                f"beam{index}_ids": ids,
                f"beam{index}_lengths": lengths,
                f"beam{index}_log_probs": log_probs,
                f"beam{index}_step_scores": step_scores,
                f"beam{index}_settings": np.array([alpha, beta], "float32"),
            }
        )
    np.savez_compressed(out / "outputs.npz", **arrays)
    print(variant, "greedy:", [" ".join(target_tokenizer.index_word.get(int(i), "?") for i in row) for row in greedy_ids])


def record_crf():
    rng = np.random.default_rng(3)
    potentials = rng.normal(size=(4, 7, 5)).astype("float32")
    transitions = rng.normal(size=(5, 5)).astype("float32")
    lengths = np.array([7, 5, 2, 1], "int32")
    tags = rng.integers(0, 5, size=(4, 7)).astype("int32")
    log_likelihood, _ = tfa.text.crf_log_likelihood(potentials, tags, lengths, tf.constant(transitions))
    decoded, best = tfa.text.crf_decode(potentials, tf.constant(transitions), lengths)
    np.savez_compressed(
        HERE / "tfa-crf.npz",
        potentials=potentials,
        transitions=transitions,
        lengths=lengths,
        tags=tags,
        log_likelihood=log_likelihood.numpy(),
        decoded=decoded.numpy(),
        best_score=best.numpy(),
    )


if __name__ == "__main__":
    sources, targets = read_pairs(400)
    for variant in ("luong", "bahdanau"):
        record(variant, sources, targets)
    record_crf()
    print("tensorflow", tf.__version__, "tensorflow-addons", tfa.__version__)
