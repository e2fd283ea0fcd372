"""`EntityF1` against seqeval's `f1_score` (the independent reference) on random IOB2 and stray-I paths."""

import keras
import numpy as np
import pytest
from seqeval.metrics import f1_score

from seqtasks.models.entity_f1 import EntityF1, entity_counts, tag_table

pytestmark = pytest.mark.backends

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def _names(rows, lengths):
    return [[TAGS[tag] for tag in row[:length]] for row, length in zip(rows, lengths)]


@pytest.mark.parametrize("seed", range(6))
def test_f1_over_batches_is_seqevals_over_the_whole_data(seed):
    rng = np.random.default_rng(seed)
    metric = EntityF1(TAGS)
    gold_names, predicted_names = [], []
    for _ in range(3):  # the sums run over batches: not a mean of per-batch F1s
        batch, width = 5, 9
        lengths = rng.integers(1, width + 1, batch)
        mask = np.arange(width)[None, :] < lengths[:, None]
        # Mostly O, with any tag anywhere: stray I- tags, type changes, B- after B-.
        gold = np.where(rng.random((batch, width)) < 0.5, 0, rng.integers(1, len(TAGS), (batch, width)))
        predicted = np.where(rng.random((batch, width)) < 0.3, gold, rng.integers(0, len(TAGS), (batch, width)))
        # Garbage at padding must count for nothing.
        gold, predicted = np.where(mask, gold, 3), np.where(mask, predicted, 4)
        metric.update_state(gold, predicted, mask)
        gold_names += _names(gold, lengths)
        predicted_names += _names(predicted, lengths)
    assert float(metric.result()) == pytest.approx(f1_score(gold_names, predicted_names), abs=1e-6)


@pytest.mark.parametrize(
    "gold, predicted, expected",
    [
        (["B-PER", "I-PER", "O"], ["B-PER", "I-PER", "O"], (1, 1, 1)),
        (["B-PER", "I-PER", "O"], ["B-PER", "O", "O"], (0, 1, 1)),  # too short
        (["B-PER", "O", "O"], ["B-PER", "I-PER", "O"], (0, 1, 1)),  # too long
        (["B-PER", "I-PER", "I-PER"], ["B-PER", "I-PER", "I-PER"], (1, 1, 1)),  # ends at the last token
        (["B-PER", "B-PER", "O"], ["B-PER", "I-PER", "O"], (0, 2, 1)),  # two entities, not one
        (["I-PER", "I-PER", "O"], ["B-PER", "I-PER", "O"], (1, 1, 1)),  # a stray I- starts an entity
        (["B-PER", "I-LOC", "O"], ["B-PER", "B-LOC", "O"], (2, 2, 2)),  # another type starts another
        (["B-LOC", "I-LOC", "O"], ["B-PER", "I-PER", "O"], (0, 1, 1)),  # wrong type
        (["O", "O", "O"], ["O", "O", "O"], (0, 0, 0)),
    ],
)
def test_entities_are_counted_as_conlleval_chunks(gold, predicted, expected):
    ids = {tag: index for index, tag in enumerate(TAGS)}
    counts = entity_counts(
        np.array([[ids[t] for t in gold]]), np.array([[ids[t] for t in predicted]]), np.ones((1, 3), bool),
        *tag_table(TAGS),
    )
    assert tuple(float(keras.ops.convert_to_numpy(c)) for c in counts) == expected


def test_no_entities_anywhere_scores_zero_and_reset_starts_over():
    metric = EntityF1(TAGS)
    metric.update_state(np.zeros((2, 3), "int32"), np.zeros((2, 3), "int32"))
    assert float(metric.result()) == 0.0
    metric.update_state(np.array([[1, 2, 0]]), np.array([[1, 2, 0]]))
    assert float(metric.result()) == 1.0
    metric.reset_state()
    assert float(metric.result()) == 0.0


def test_the_type_table_and_bad_tags():
    assert tag_table(["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]) == ([0, 1, 1, 2, 2], [False, True, False, True, False])
    for name in ("X-PER", "B-", "PER"):
        with pytest.raises(ValueError, match=f"Expected IOB2 tags: 'O', 'B-TYPE' or 'I-TYPE'. .*{name!r}"):
            EntityF1(["O", name])


def test_config_round_trip():
    metric = EntityF1(TAGS, name="entity_f1")
    restored = EntityF1.from_config(metric.get_config())
    assert restored.tag_names == TAGS and restored.name == "entity_f1"
