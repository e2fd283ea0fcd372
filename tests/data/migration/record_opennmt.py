"""Records the OpenNMT-tf reference models of the migration tests (run by hand, never by the tests).

Two RNN encoder-decoders of OpenNMT-tf's model catalogue, defined here as
`opennmt.models.SequenceToSequence` subclasses at toy sizes:

- `luong`: the catalogue's `LuongAttention` (and `NMTSmallV1`) layout: word
  embeddings, a unidirectional 2-layer LSTM `RNNEncoder`, a 2-layer LSTM
  `AttentionalRNNDecoder` with `tfa.seq2seq.LuongAttention`, a `CopyBridge` and
  the default tanh attention layer;
- `bahdanau`: a bidirectional 1-layer LSTM `RNNEncoder` whose directions are
  joined by a `ConcatReducer` (8 + 8 = 16 units), a 1-layer LSTM
  `AttentionalRNNDecoder` of 16 units with `tfa.seq2seq.BahdanauAttention`, a
  `CopyBridge` and a linear attention layer (`attention_layer_activation=None`).

Each is trained by `opennmt.Runner(...).train()` for a few hundred steps on the
first pairs of tests/data/spa-eng-sample.tsv (Spanish to English, lower-cased,
punctuation split off words), then restored from its checkpoint into a fresh
model, as `onmt-main infer` does, and run. Per variant, `opennmt-<variant>/` gets:

- `source.vocab`, `target.vocab`: built by `opennmt.data.Vocab` as
  `onmt-build-vocab` does (line N is the token of id N; lines 0, 1, 2 are
  `<blank>`, `<s>`, `</s>`; the out-of-vocabulary id is the number of lines);
- `checkpoint`, `ckpt-<step>.index`, `ckpt-<step>.data-00000-of-00001`: the
  final object-based checkpoint as OpenNMT-tf writes it (model and optimizer);
- `config.yml`: the run configuration of the training;
- `outputs.npz`: a batch of 4 source sentences of different lengths (`source`,
  padded with 0, `source_lengths`), their reference translations (`target_in`
  starting with `<s>`, `target_out` ending with `</s>`, `target_lengths`), the
  teacher-forced `logits` and `attention` (inference mode), greedy search
  (`greedy_ids`, `greedy_lengths`, `greedy_log_probs`), beam search without
  penalties (`beam0_*`), with `length_penalty` (`beam_*`) and with
  `length_penalty` and `coverage_penalty` (`beam2_*`): `_ids`, `_lengths`, `_log_probs` as OpenNMT-tf returns them,
  `_rescored_log_probs` (each hypothesis scored again by teacher forcing:
  OpenNMT-tf's `_log_probs` can be stale for a finished hypothesis that changed
  beam slot at its last step), `_settings` = (beam width, length penalty,
  coverage penalty); `start`, `end`, `oov` (the out-of-vocabulary id of
  the source and target sides), and `variables`: one "<name><TAB><d1,d2,...>"
  string per checkpoint entry (empty shape for scalars).

Ids past a sequence's length are 0 in `source`, `target_in`, `target_out`, and
2 (`</s>`) in the decoded ids; the logits and attention past a target's length
are what the decoder computes on padding.

Run from the repository root in a virtual environment of its own (Python 3.11;
TensorFlow 2.12.1 pins numpy to at most 1.24.3); it trains on the CPU in about a minute,
and a rerun on the same machine rewrites the same checkpoint and outputs:

    python3.11 -m venv /tmp/venv-onmt
    /tmp/venv-onmt/bin/pip install "OpenNMT-tf==2.32.0" "tensorflow==2.12.1" "tensorflow-addons==0.20.0"
    /tmp/venv-onmt/bin/python tests/data/migration/record_opennmt.py
"""

import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import opennmt
import tensorflow as tf
import tensorflow_addons as tfa
import yaml
from opennmt import decoders, encoders, inputters, layers
from opennmt.utils import checkpoint as checkpoint_util

HERE = Path(__file__).resolve().parent
PAIRS = HERE.parent / "spa-eng-sample.tsv"
TRAIN_LINES, SEED = 400, 11
EMBEDDING, BATCH, STEPS, LEARNING_RATE = 8, 32, 600, 0.01
MAX_DECODING_LENGTH, BEAM_WIDTH = 12, 3
# name: (length_penalty, coverage_penalty) of the recorded beam searches.
BEAM_SETTINGS = {"beam0": (0.0, 0.0), "beam": (0.6, 0.0), "beam2": (0.6, 0.4)}
# The recorded batch: source sentences of these token counts, the first of each in the
# training lines, and one sentence past them holding a source word out of the vocabulary.
FIXTURE_LENGTHS = (5, 2, 4)


class Luong(opennmt.models.SequenceToSequence):
    """The catalogue's LuongAttention / NMTSmallV1 layout at toy size."""

    def __init__(self):
        super().__init__(
            source_inputter=inputters.WordEmbedder(embedding_size=EMBEDDING),
            target_inputter=inputters.WordEmbedder(embedding_size=EMBEDDING),
            encoder=encoders.RNNEncoder(
                num_layers=2,
                num_units=16,
                dropout=0.0,
                residual_connections=False,
                cell_class=tf.keras.layers.LSTMCell,
            ),
            decoder=decoders.AttentionalRNNDecoder(
                num_layers=2,
                num_units=16,
                bridge_class=layers.CopyBridge,
                attention_mechanism_class=tfa.seq2seq.LuongAttention,
                cell_class=tf.keras.layers.LSTMCell,
                dropout=0.0,
                residual_connections=False,
            ),
        )


class Bahdanau(opennmt.models.SequenceToSequence):
    """A bidirectional encoder (directions concatenated) and Bahdanau attention, linear attention layer."""

    def __init__(self):
        super().__init__(
            source_inputter=inputters.WordEmbedder(embedding_size=EMBEDDING),
            target_inputter=inputters.WordEmbedder(embedding_size=EMBEDDING),
            encoder=encoders.RNNEncoder(
                num_layers=1,
                num_units=8,
                bidirectional=True,
                residual_connections=False,
                dropout=0.0,
                reducer=layers.ConcatReducer(),
                cell_class=tf.keras.layers.LSTMCell,
            ),
            decoder=decoders.AttentionalRNNDecoder(
                num_layers=1,
                num_units=16,
                bridge_class=layers.CopyBridge,
                attention_mechanism_class=tfa.seq2seq.BahdanauAttention,
                attention_layer_activation=None,
                cell_class=tf.keras.layers.LSTMCell,
                dropout=0.0,
                residual_connections=False,
            ),
        )


VARIANTS = {"luong": Luong, "bahdanau": Bahdanau}


def tokenize(sentence):
    # Lower case; every character that is neither a letter, a digit, an apostrophe nor a space is a token.
    return " ".join(re.sub(r"([^\w\s'])", r" \1 ", sentence.lower()).split())


def read_pairs():
    # (spanish, english) pairs, tokenized, in file order.
    lines = PAIRS.read_text(encoding="utf-8").splitlines()
    return [(tokenize(spanish), tokenize(english)) for english, spanish in (line.split("\t") for line in lines)]


def build_vocab(text_path, vocab_path):
    # What onmt-build-vocab does with its defaults (no size limit, minimum frequency 1).
    vocab = opennmt.data.Vocab(
        special_tokens=[
            opennmt.constants.PADDING_TOKEN,
            opennmt.constants.START_OF_SENTENCE_TOKEN,
            opennmt.constants.END_OF_SENTENCE_TOKEN,
        ]
    )
    vocab.add_from_text(str(text_path))
    vocab = vocab.prune()
    vocab.serialize(str(vocab_path))
    return vocab


def pick_fixture(pairs, source_vocab):
    training = pairs[:TRAIN_LINES]
    chosen = [next(p for p in training if len(p[0].split()) == n) for n in FIXTURE_LENGTHS]
    unknown = next(
        p
        for p in pairs[TRAIN_LINES:]
        if len(p[0].split()) == 3 and sum(source_vocab.lookup(t) is None for t in p[0].split()) == 1
    )
    return chosen[:2] + [unknown] + chosen[2:]


def run_config(tmp, variant):
    return {
        "model_dir": str(tmp / variant),
        "data": {
            "train_features_file": str(tmp / "train.es"),
            "train_labels_file": str(tmp / "train.en"),
            "source_vocabulary": str(tmp / "source.vocab"),
            "target_vocabulary": str(tmp / "target.vocab"),
        },
        "params": {
            "optimizer": "Adam",
            "learning_rate": LEARNING_RATE,
            "beam_width": 1,
            "maximum_decoding_length": MAX_DECODING_LENGTH,
        },
        "train": {
            "batch_type": "examples",
            "batch_size": BATCH,
            "sample_buffer_size": -1,
            "length_bucket_width": 1,
            "max_step": STEPS,
            "save_checkpoints_steps": STEPS,
            "keep_checkpoint_max": 1,
            "save_summary_steps": 50,
        },
    }


def write_config(path, config):
    header = (
        "# The run configuration the checkpoint beside was trained with by\n"
        "# tests/data/migration/record_opennmt.py: opennmt.Runner(model, config, auto_config=False).train().\n"
        "# model_dir and the data paths point to the temporary folder of that run, which is deleted;\n"
        "# source_vocabulary and target_vocabulary are copied beside as source.vocab and target.vocab.\n"
    )
    path.write_text(header + yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


def keep_final_checkpoint(model_dir, out):
    for old in list(out.glob("ckpt-*")) + list(out.glob("checkpoint")):
        old.unlink()
    prefix = Path(tf.train.latest_checkpoint(str(model_dir)))
    for path in model_dir.glob(prefix.name + ".*"):
        shutil.copy(path, out / path.name)
    shutil.copy(model_dir / "checkpoint", out / "checkpoint")
    return out / prefix.name


def restored_model(model_class, out, params):
    # As onmt-main infer: a fresh model, initialized from the data configuration, weights restored.
    model = model_class()
    model.initialize(
        {"source_vocabulary": str(out / "source.vocab"), "target_vocabulary": str(out / "target.vocab")},
        params=params,
    )
    restored = checkpoint_util.Checkpoint(model, model_dir=str(out)).restore(weights_only=True)
    if restored is None:
        raise RuntimeError(f"no checkpoint in {out}")
    return model


def check_restored(model, prefix):
    # The deferred restore fills the variables on the first call: check that every model variable
    # was in the checkpoint and already held its value.
    before = [v.numpy() for v in model.variables]
    tf.train.Checkpoint(model=model).restore(str(prefix)).expect_partial().assert_existing_objects_matched()
    for value, variable in zip(before, model.variables):
        np.testing.assert_array_equal(value, variable.numpy(), err_msg=variable.name)


def rescore(model, features, index, ids, length):
    # The log-probability of one hypothesis (its end token included when it has one) by teacher forcing.
    tokens = [int(i) for i in ids[:length]]
    ended = length < len(ids) and ids[length] == opennmt.constants.END_OF_SENTENCE_ID
    target_in = [opennmt.constants.START_OF_SENTENCE_ID] + tokens
    target_out = tokens + [opennmt.constants.END_OF_SENTENCE_ID]
    source_length = int(features["length"][index])
    one = {"ids": features["ids"][index : index + 1, :source_length], "length": features["length"][index : index + 1]}
    labels = {
        "ids": tf.constant([target_in], tf.int64),
        "ids_out": tf.constant([target_out], tf.int64),
        "length": tf.constant([len(target_in)], tf.int64),
    }
    outputs, _ = model(one, labels=labels, training=False)
    log_probs = tf.nn.log_softmax(outputs["logits"][0]).numpy()
    steps = len(target_out) if ended else length
    return log_probs[np.arange(steps), target_out[:steps]].sum()


def to_ids(tokens, vocab):
    lookup = np.vectorize(lambda t: vocab.lookup(t.decode("utf-8"), default=len(vocab)), otypes=["int32"])
    return lookup(tokens)


def decode(model_class, out, features, target_vocab, beam_width, length_penalty=0.0, coverage_penalty=0.0):
    params = {
        "beam_width": beam_width,
        "length_penalty": length_penalty,
        "coverage_penalty": coverage_penalty,
        "maximum_decoding_length": MAX_DECODING_LENGTH,
        "num_hypotheses": beam_width,
    }
    model = restored_model(model_class, out, params)
    _, predictions = model(features, training=False)
    ids = to_ids(predictions["tokens"].numpy(), target_vocab)
    return ids, predictions["length"].numpy().astype("int32"), predictions["log_probs"].numpy()


def record(variant, pairs, tmp):
    model_class = VARIANTS[variant]
    out = HERE / f"opennmt-{variant}"
    out.mkdir(exist_ok=True)
    for name in ("source", "target"):
        shutil.copy(tmp / f"{name}.vocab", out / f"{name}.vocab")
    config = run_config(tmp, variant)
    write_config(out / "config.yml", config)
    _, summary = opennmt.Runner(model_class(), config, auto_config=False, seed=SEED).train(return_summary=True)
    prefix = keep_final_checkpoint(tmp / variant, out)

    source_vocab = opennmt.data.Vocab.from_file(str(out / "source.vocab"))
    target_vocab = opennmt.data.Vocab.from_file(str(out / "target.vocab"))
    fixture = pick_fixture(pairs, source_vocab)

    model = restored_model(model_class, out, {"beam_width": 1, "maximum_decoding_length": MAX_DECODING_LENGTH})
    features = model.features_inputter.make_features(tf.constant([s for s, _ in fixture]))
    labels = model.labels_inputter.make_features(tf.constant([t for _, t in fixture]))
    outputs, _ = model(features, labels=labels, training=False)
    check_restored(model, prefix)

    arrays = {
        "source": features["ids"].numpy().astype("int32"),
        "source_lengths": features["length"].numpy().astype("int32"),
        "target_in": labels["ids"].numpy().astype("int32"),
        "target_out": labels["ids_out"].numpy().astype("int32"),
        "target_lengths": labels["length"].numpy().astype("int32"),
        "logits": outputs["logits"].numpy(),
        "start": np.int32(opennmt.constants.START_OF_SENTENCE_ID),
        "end": np.int32(opennmt.constants.END_OF_SENTENCE_ID),
        "oov": np.array([len(source_vocab), len(target_vocab)], "int32"),
    }
    if outputs.get("attention") is not None:
        arrays["attention"] = outputs["attention"].numpy()

    ids, lengths, log_probs = decode(model_class, out, features, target_vocab, 1)
    arrays.update(greedy_ids=ids[:, 0], greedy_lengths=lengths[:, 0], greedy_log_probs=log_probs[:, 0])
    for name, (length_penalty, coverage_penalty) in BEAM_SETTINGS.items():
        ids, lengths, log_probs = decode(
            model_class, out, features, target_vocab, BEAM_WIDTH, length_penalty, coverage_penalty
        )
        arrays.update(
            {
                f"{name}_ids": ids,
                f"{name}_lengths": lengths,
                f"{name}_log_probs": log_probs,
                f"{name}_rescored_log_probs": np.array(
                    [[rescore(model, features, b, ids[b, k], lengths[b, k]) for k in range(BEAM_WIDTH)] for b in range(4)],
                    "float32",
                ),
                f"{name}_settings": np.array([BEAM_WIDTH, length_penalty, coverage_penalty], "float32"),
            }
        )

    shapes = tf.train.load_checkpoint(str(prefix)).get_variable_to_shape_map()
    arrays["variables"] = np.array([f"{name}\t{','.join(map(str, shapes[name]))}" for name in sorted(shapes)])
    np.savez_compressed(out / "outputs.npz", **arrays)

    words = target_vocab.words + ["<unk>"]
    size = sum(p.stat().st_size for p in out.iterdir()) / 1024
    print(f"{variant}: {prefix.name}, loss {summary['last_loss']:.3f} at step {summary['last_step']}, {size:.0f} KB")
    for (source, _), row, length in zip(fixture, arrays["greedy_ids"], arrays["greedy_lengths"]):
        print(f"  {source} -> {' '.join(words[i] for i in row[:length])}")


def main():
    tf.config.experimental.enable_op_determinism()
    pairs = read_pairs()
    with tempfile.TemporaryDirectory(prefix="record-opennmt-") as folder:
        tmp = Path(folder)
        for suffix, side in (("es", 0), ("en", 1)):
            text = tmp / f"train.{suffix}"
            text.write_text("".join(pair[side] + "\n" for pair in pairs[:TRAIN_LINES]), encoding="utf-8")
            build_vocab(text, tmp / ("source.vocab" if side == 0 else "target.vocab"))
        for variant in VARIANTS:
            record(variant, pairs, tmp)
    print("OpenNMT-tf", opennmt.__version__, "tensorflow", tf.__version__, "tensorflow-addons", tfa.__version__)


if __name__ == "__main__":
    main()
