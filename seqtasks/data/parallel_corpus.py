"""Tab-separated parallel corpora (plain or gzip) and their split by source sentence."""

import random
from pathlib import Path

from seqtasks.data.text_files import numbered_lines, reading
from seqtasks.errors import SeqtasksError


def read_parallel_tsv(path, source_column, target_column, encoding="utf-8"):
    """Reads `(source, target)` pairs from the given 0-based columns of a TSV file.

    Blank lines are skipped. A line with too few columns, an empty source or
    target, or bytes that are not valid `encoding` is an error naming the file
    and the line.
    """
    path = Path(path)
    needed = max(source_column, target_column) + 1
    pairs = []
    with reading(path, encoding):
        for number, line in numbered_lines(path, encoding):
            if not line.strip():
                continue
            columns = line.split("\t")
            if len(columns) < needed:
                raise SeqtasksError(
                    f"{path}:{number}: expected at least {needed} tab-separated columns "
                    f"(source column {source_column}, target column {target_column}); got {len(columns)}"
                )
            source, target = columns[source_column].strip(), columns[target_column].strip()
            if not source or not target:
                raise SeqtasksError(f"{path}:{number}: empty source or target text")
            pairs.append((source, target))
    if not pairs:
        raise SeqtasksError(f"{path}: no sentence pairs in the file")
    return pairs


def split_by_source(pairs, validation_size, seed):
    """Splits pairs so that no source sentence is in both parts (seeded, deterministic).

    Source sentences are shuffled with `seed`; whole groups of pairs sharing a
    source go to validation until it holds at least `validation_size` pairs.
    """
    groups = {}
    for pair in pairs:
        groups.setdefault(pair[0], []).append(pair)
    sources = sorted(groups)
    if len(sources) < 2:
        raise SeqtasksError("need at least two distinct source sentences to split off a validation set")
    random.Random(seed).shuffle(sources)
    validation, train = [], []
    for source in sources:
        if len(validation) < validation_size:
            validation.extend(groups[source])
        else:
            train.extend(groups[source])
    if not train:
        raise SeqtasksError(
            f"data.validation_size ({validation_size}) leaves no training pairs out of {len(pairs)}"
        )
    return train, validation
