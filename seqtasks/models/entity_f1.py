import keras
from keras import ops


def tag_table(tag_names):
    """`(entity_type, begins)` int32 / bool `(num_tags,)` of IOB2 tag names: 0 for `O` and the 1-based index
    of each entity type (in order of first appearance), and whether the tag is a `B-`."""
    types, entity_type, begins = {}, [], []
    for name in tag_names:
        if name == "O":
            entity_type.append(0)
            begins.append(False)
            continue
        prefix, _, kind = name.partition("-")
        if prefix not in ("B", "I") or not kind:
            raise ValueError(f"Expected IOB2 tags: 'O', 'B-TYPE' or 'I-TYPE'. Received: tag_names containing {name!r}")
        entity_type.append(types.setdefault(kind, len(types) + 1))
        begins.append(prefix == "B")
    return entity_type, begins


def entity_counts(gold, predicted, mask, entity_type, begins):
    """`(correct, gold entities, predicted entities)` float32 sums over a batch of IOB2 tag id paths
    `(batch, time)`, with conlleval's chunks (seqeval's default): an entity starts at a `B-X` or at an
    `I-X` that does not follow `X`, and is correct when its span and type are exactly a gold one's."""
    mask = ops.cast(mask, "bool")
    table_type = ops.convert_to_tensor(entity_type, "int32")
    table_begins = ops.convert_to_tensor(begins, "bool")

    def labels(tags):
        tags = ops.where(mask, ops.cast(tags, "int32"), 0)
        kind = ops.where(mask, ops.take(table_type, tags), 0)
        previous = ops.pad(kind[:, :-1], ((0, 0), (1, 0)))
        start = ops.logical_and(kind > 0, ops.logical_or(ops.take(table_begins, tags), previous != kind))
        following_kind = ops.pad(kind[:, 1:], ((0, 0), (0, 1)))
        following_start = ops.pad(start[:, 1:], ((0, 0), (0, 1)))
        end = ops.logical_and(kind > 0, ops.logical_or(following_start, following_kind != kind))
        return kind, start, end

    gold_kind, gold_start, gold_end = labels(gold)
    kind, start, end = labels(predicted)
    same = ops.logical_and(ops.equal(kind, gold_kind), ops.equal(start, gold_start))
    steps = ops.transpose(ops.stack([same, gold_start, ops.logical_and(gold_end, end)], axis=-1), (1, 0, 2))

    def step(matching, inputs):
        # Whether every token of the current gold entity so far has the predicted labels of its own.
        matching = ops.where(inputs[:, 1], inputs[:, 0], ops.logical_and(matching, inputs[:, 0]))
        return matching, ops.logical_and(matching, inputs[:, 2])

    _, hits = ops.scan(step, ops.ones_like(steps[0, :, 0]), steps)
    count = lambda flags: ops.sum(ops.cast(flags, "float32"))  # noqa: E731
    return count(hits), count(gold_start), count(start)


@keras.saving.register_keras_serializable(package="seqtasks")
class EntityF1(keras.metrics.Metric):
    """Entity-level micro F1 of IOB2 tag paths, as seqeval's default `f1_score` (conlleval's chunks).

    An entity is a maximal run of one type that starts at a `B-X` or at an
    `I-X` after anything but `X`; a predicted entity is correct when a gold
    entity has exactly its span and type. The metric sums the correct, gold
    and predicted entities over every batch and reports
    `2 * correct / (gold + predicted)` (0 when there are none), the harmonic
    mean of precision and recall over the whole data, not a mean over
    batches.

    Args:
        tag_names: the IOB2 name of each tag id (`"O"`, `"B-PER"`, ...).
        name: the metric's name; `"f1"` logs `f1` and `val_f1`.
        **kwargs: other keyword arguments of `keras.metrics.Metric`.

    Call arguments (`update_state`):
        y_true, y_pred: int tag ids `(batch, time)`.
        sample_weight: optional `(batch, time)`, 0 (or `False`) at padding.

    Example:

    >>> metric = EntityF1(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])
    >>> metric.update_state(np.array([[1, 2, 0, 3]]), np.array([[1, 2, 0, 0]]))
    >>> round(float(metric.result()), 4)  # 1 correct, 2 gold, 1 predicted
    0.6667

    Reference:
        Tjong Kim Sang & De Meulder, "Introduction to the CoNLL-2003 Shared
        Task", CoNLL 2003 (conlleval); Nakayama, seqeval (2018).
    """

    def __init__(self, tag_names, name="f1", **kwargs):
        super().__init__(name=name, **kwargs)
        self.tag_names = list(tag_names)
        self.entity_type, self.begins = tag_table(self.tag_names)
        self.correct = self.add_variable((), "zeros", name="correct")
        self.gold = self.add_variable((), "zeros", name="gold")
        self.predicted = self.add_variable((), "zeros", name="predicted")

    def update_state(self, y_true, y_pred, sample_weight=None):
        mask = ops.ones_like(y_true, "bool") if sample_weight is None else ops.cast(sample_weight, "bool")
        correct, gold, predicted = entity_counts(y_true, y_pred, mask, self.entity_type, self.begins)
        self.correct.assign_add(correct)
        self.gold.assign_add(gold)
        self.predicted.assign_add(predicted)

    def result(self):
        return ops.divide_no_nan(2.0 * self.correct, self.gold + self.predicted)

    def get_config(self):
        config = super().get_config()
        config.update({"tag_names": self.tag_names})
        return config
