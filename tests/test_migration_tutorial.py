"""The worked example of docs/migrating.md: TensorFlow's tfa-era NMT tutorial, as seqtasks code.

The seqtasks side of the example lives here, in functions that the tests run: every line of the
section's fenced Python blocks must be a line of this file, every code span of the seqtasks column
of its tables a piece of it, and every code span of the tfa column a piece of
tests/data/migration/record_tfa.py (`test_the_doc_shows_only_code_that_runs`), so neither side
can drift from what runs. The section's recipe must load and build the same model.
"""

import re
import unicodedata

import keras
import numpy as np
import pytest
from keras import ops

from seqtasks.decoding import beam_search, greedy_search, tile_beams
from seqtasks.models import Seq2Seq
from seqtasks.text.special_ids import END_ID, PAD_ID, RESERVED_TOKENS, START_ID, UNK_ID
from tests.conftest import REPO, SAMPLE_PAIRS

# --- The worked example (docs/migrating.md shows these lines) ---

EMBEDDING, UNITS, BATCH, EPOCHS, MAX_LENGTH = 8, 32, 32, 20, 12


def preprocess(sentence):
    sentence = "".join(c for c in unicodedata.normalize("NFD", sentence.lower()) if unicodedata.category(c) != "Mn")
    sentence = re.sub(r"([?.!,¿])", r" \1 ", sentence)
    return re.sub(r"[^a-z?.!,¿]+", " ", sentence).strip()  # no <start>, <end>: ids START_ID, END_ID


def vocabulary(sentences):
    words = sorted({word for sentence in sentences for word in sentence.split()})
    return {word: index for index, word in enumerate(words, start=len(RESERVED_TOKENS))}


def to_ids(sentences, vocab, start=False, end=False):
    rows = [[START_ID] * start + [vocab.get(w, UNK_ID) for w in s.split()] + [END_ID] * end for s in sentences]
    return keras.utils.pad_sequences(rows, padding="post", value=PAD_ID)


def prepare(spanish, english):
    source_vocab, target_vocab = vocabulary(spanish), vocabulary(english)
    source = to_ids(spanish, source_vocab)
    target_in = to_ids(english, target_vocab, start=True)  # [START] w1 ... wn
    target_out = to_ids(english, target_vocab, end=True)  # w1 ... wn [END]
    sizes = len(source_vocab) + len(RESERVED_TOKENS), len(target_vocab) + len(RESERVED_TOKENS)
    return source, target_in, target_out, sizes


def build_model(source_vocab_size, target_vocab_size):
    return Seq2Seq(
        source_vocab_size,
        target_vocab_size,
        embedding_dim=EMBEDDING,
        encoder={"units": UNITS},
        decoder={
            "units": UNITS,
            "attention": "luong",
            "score": "general",
            "combine": "linear",
            "input_feeding": True,
            "output_size": UNITS,
        },
        bridge="copy",
    )


def train(model, source, target_in, target_out):
    model.compile(keras.optimizers.Adam(0.02), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model.fit((source, target_in), target_out, batch_size=BATCH, epochs=EPOCHS, verbose=0)


def greedy(model, source):
    cache, state = model.encode(source)

    def step(ids, state):
        logits, state, _ = model.decode_step(ids, state, cache)
        return logits, state

    start = np.full(len(source), START_ID)
    ids, lengths, scores, _ = greedy_search(step, state, start, END_ID, MAX_LENGTH)
    return ids, lengths, scores


def beam(model, source, beam_width, alpha=0.0, beta=0.0):
    cache, state = model.encode(source)
    covered = ops.zeros(ops.shape(source), "float32")  # attention summed over the steps, for beta
    cache, state = tile_beams((cache, (state, covered)), beam_width)

    def step(ids, state):
        inner, covered = state
        logits, inner, weights = model.decode_step(ids, inner, cache)
        return logits, (inner, covered + weights)

    start = np.full(len(source), START_ID)
    ids, lengths, scores, _ = beam_search(
        step, state, start, END_ID, MAX_LENGTH, beam_width, alpha=alpha,
        coverage_penalty_weight=beta, coverage_fn=lambda state: state[1],
    )
    return ids, lengths, scores


# --- The tests ---

PAIRS = 160
DOC = REPO / "docs" / "migrating.md"
SECTION = "Worked example: TensorFlow's NMT with attention tutorial (tfa era)"


def read_pairs(count):
    lines = SAMPLE_PAIRS.read_text(encoding="utf-8").splitlines()[:count]
    english, spanish = zip(*(line.split("\t") for line in lines))
    return [preprocess(s) for s in spanish], [preprocess(e) for e in english]


@pytest.fixture(scope="module")
def data():
    return prepare(*read_pairs(PAIRS))


@pytest.fixture(scope="module")
def trained(data):
    """`(untrained copy, trained model, fit history)`: one model, its initial weights kept in a twin."""
    source, target_in, target_out, sizes = data
    keras.utils.set_random_seed(7)
    model = build_model(*sizes)
    untrained = build_model(*sizes)
    model.build()
    untrained.build()
    untrained.set_weights(model.get_weights())
    history = train(model, source, target_in, target_out)
    return untrained, model, history


def _token_accuracy(ids, lengths, target_out):
    """The share of reference tokens (the end token included) that the decoded ids have at the same position."""
    ids = np.asarray(ids)
    width = min(ids.shape[1], target_out.shape[1])
    real = target_out[:, :width] != PAD_ID
    return float(np.sum((ids[:, :width] == target_out[:, :width]) & real) / np.sum(real))


@pytest.mark.slow
@pytest.mark.core
def test_the_loss_falls(trained):
    losses = trained[2].history["loss"]
    assert len(losses) == EPOCHS
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.slow
@pytest.mark.core
def test_trained_greedy_output_matches_the_references_better_than_the_untrained(data, trained):
    source, _, target_out, _ = data
    untrained, model, _ = trained
    rows = slice(0, 64)
    before = _token_accuracy(*greedy(untrained, source[rows])[:2], target_out[rows])
    after = _token_accuracy(*greedy(model, source[rows])[:2], target_out[rows])
    assert after > before + 0.3, (before, after)


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_greedy_search_is_beam_search_of_width_one(data, trained, alpha):
    source = data[0][:16]
    model = trained[1]
    greedy_ids, greedy_lengths, greedy_scores = (np.asarray(x) for x in greedy(model, source))
    ids, lengths, scores = (np.asarray(x) for x in beam(model, source, beam_width=1, alpha=alpha))
    np.testing.assert_array_equal(ids, greedy_ids)
    np.testing.assert_array_equal(lengths, greedy_lengths)
    ended = greedy_ids[np.arange(len(source)), greedy_lengths - 1] == END_ID
    counted = greedy_lengths - ended  # GNMT's |Y|: the end token not counted
    np.testing.assert_allclose(scores, greedy_scores / ((5.0 + counted) / 6.0) ** alpha, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.core
def test_beam_search_scores_are_its_outputs_log_probabilities_with_the_penalties(data, trained):
    """A beam's score is its teacher-forced log-probability over GNMT's length penalty plus the coverage
    penalty of its teacher-forced attention: what tfa.seq2seq's BeamSearchDecoder ranks by."""
    source = data[0][:16]
    model = trained[1]
    alpha, beta = 0.6, 0.4
    ids, lengths, scores = (np.asarray(x) for x in beam(model, source, beam_width=3, alpha=alpha, beta=beta))
    ended = ids[np.arange(len(source)), lengths - 1] == END_ID
    assert ended.all()  # every best hypothesis ended before MAX_LENGTH, so the coverage penalty applies
    target_in = np.concatenate([np.full((len(source), 1), START_ID), ids[:, :-1]], axis=1)
    log_probs = np.asarray(ops.log_softmax(model((source, target_in), training=False), axis=-1))
    chosen = np.take_along_axis(log_probs, ids[..., None], axis=-1)[..., 0]
    steps = np.arange(ids.shape[1])[None, :] < lengths[:, None]
    log_prob = np.sum(np.where(steps, chosen, 0.0), axis=1)
    attention = np.asarray(model.attention(source, target_in))
    covered = np.sum(np.where(steps[..., None], attention, 0.0), axis=1)
    coverage = beta * np.sum(np.log(np.where(covered == 0.0, 1.0, np.minimum(covered, 1.0))), axis=1)
    expected = log_prob / ((5.0 + lengths - 1) / 6.0) ** alpha + coverage
    np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-4)


def _section_text():
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"## {SECTION}\n")
    following = re.search(r"^## ", text[start + 3 :], re.M)
    return text[start : start + 3 + following.start()] if following else text[start:]


def _table_columns(section):
    """`(tfa cells, seqtasks cells)` of the section's two-column tables whose header names tfa and seqtasks."""
    tfa, ours = [], []
    in_table = False
    for line in section.splitlines():
        if re.match(r"^\| tfa .*\| seqtasks .*\|$", line):
            in_table = True
            continue
        if in_table and line.startswith("|"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if set(cells[0]) <= set("- "):
                continue
            assert len(cells) == 2, line
            tfa.append(cells[0])
            ours.append(cells[1])
        else:
            in_table = False
    return tfa, ours


def test_the_doc_shows_only_code_that_runs():
    section = _section_text()
    source = (REPO / "tests" / "test_migration_tutorial.py").read_text(encoding="utf-8")
    lines = {line.strip() for line in source.splitlines()}
    blocks = re.findall(r"^```python\n(.*?)^```$", section, re.S | re.M)
    assert len(blocks) >= 4
    shown = [line.strip() for block in blocks for line in block.splitlines() if line.strip()]
    assert [line for line in shown if line not in lines] == []
    # Every function of the example is shown whole, from its `def` on.
    for name in ("preprocess", "vocabulary", "to_ids", "build_model", "train", "greedy", "beam"):
        assert f"def {name}(" in section, name
    tfa, ours = _table_columns(section)
    assert len(tfa) >= 10
    recorder = (REPO / "tests" / "data" / "migration" / "record_tfa.py").read_text(encoding="utf-8")
    quoted = [code for cell in tfa for code in re.findall(r"`([^`]+)`", cell)]
    assert quoted and [code for code in quoted if code not in recorder] == []
    ours_code = [code for cell in ours for code in re.findall(r"`([^`]+)`", cell)]
    assert ours_code and [code for code in ours_code if code not in source] == []


def test_the_recipe_loads_and_builds_the_same_model(tmp_path):
    from seqtasks.recipe import load_recipe

    (block,) = re.findall(r"^```yaml\n(.*?)^```$", _section_text(), re.S | re.M)
    path = tmp_path / "tutorial.yaml"
    path.write_text(block, encoding="utf-8")
    sizes = [f"model.embedding_dim={EMBEDDING}", f"model.encoder.units={UNITS}", f"model.decoder.units={UNITS}",
             f"model.decoder.output_size={UNITS}"]
    recipe = load_recipe(path, sizes)
    assert recipe.task == "translation" and recipe.data.tokenizer == "wordpiece"
    assert recipe.training.clipnorm is None  # the tutorial's gradients are not clipped
    # A relative data path starts at the recipe's folder.
    assert recipe.data.path == str(tmp_path / "recipes" / "data" / "spa-eng.txt.gz")
    from_recipe = Seq2Seq.from_recipe(recipe.model, 50, 40)
    by_hand = build_model(50, 40)
    from_recipe.build()
    by_hand.build()
    assert [w.shape for w in from_recipe.weights] == [w.shape for w in by_hand.weights]
    ignored = {"name", "dtype", "seed", "trainable"}
    for ours, theirs in ((from_recipe.encoder_layer, by_hand.encoder_layer), (from_recipe.decoder_layer, by_hand.decoder_layer)):
        config, expected = ours.get_config(), theirs.get_config()
        assert {k: v for k, v in config.items() if k not in ignored} == {k: v for k, v in expected.items() if k not in ignored}
    assert from_recipe.bridge == by_hand.bridge == "copy"


def _has_field(config_class, dotted):
    import dataclasses
    import typing

    for part in dotted.split("."):
        if config_class is None or not dataclasses.is_dataclass(config_class):
            return False
        fields = {field.name: field for field in dataclasses.fields(config_class)}
        if part not in fields:
            return False
        hint = typing.get_type_hints(config_class)[part]
        config_class = hint if dataclasses.is_dataclass(hint) else None
    return True


def test_every_recipe_key_the_doc_names_exists():
    from seqtasks.recipe.schema import Recipe
    from seqtasks.tasks.table import TASKS

    spec = TASKS["translation"]
    sections = {"data": spec.data_config, "model": spec.model_config}
    text = DOC.read_text(encoding="utf-8")
    # A key is a whole code span, or starts one as `key: value` or `key=value` (not Python's `model.fit(`).
    keys = set(re.findall(r"`((?:data|model|training|evaluation|export|distribute)\.[\w.]+)[`:=]", text))
    assert len(keys) > 40
    missing = []
    for key in sorted(keys):
        section, _, rest = key.partition(".")
        found = _has_field(sections[section], rest) if section in sections else _has_field(Recipe, key)
        if not found:
            missing.append(key)
    assert missing == []
