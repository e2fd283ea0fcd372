"""Labelled texts for classification: CSV, label-first TSV, one folder or one file per label.

Every reader returns a list of `(text, label)` string pairs and raises
`SeqtasksError` naming the file (and the line) for anything malformed.
"""

import csv
import random
from pathlib import Path

from seqtasks.data.text_files import numbered_lines, reading
from seqtasks.errors import SeqtasksError

FORMATS = ("csv", "tsv", "folders", "lines")
# aclImdb's train/ also holds unlabelled reviews, which are not a class.
_UNLABELLED_FOLDERS = {"unsup"}


def read_labelled_csv(path, text_column="text", label_column="label", encoding="utf-8"):
    """A CSV file (plain or gzip) with a header row naming its columns."""
    path = Path(path)
    examples = []
    with reading(path, encoding):
        lines = numbered_lines(path, encoding)
        numbers = []

        def texts():
            for number, line in lines:
                numbers.append(number)
                yield line

        rows = csv.reader(texts(), strict=True)
        try:
            header = next(rows, None)
            if header is None:
                raise SeqtasksError(f"{path}: empty file, expected a header row")
            missing = [name for name in (text_column, label_column) if name not in header]
            if missing:
                raise SeqtasksError(
                    f"{path}:1: no column {missing[0]!r} in the header (columns: {', '.join(header)})"
                )
            text_index, label_index = header.index(text_column), header.index(label_column)
            for row in rows:
                if not row:
                    continue
                if len(row) != len(header):
                    raise SeqtasksError(
                        f"{path}:{numbers[-1]}: expected {len(header)} columns as in the header; got {len(row)}"
                    )
                examples.append(_example(row[text_index], row[label_index], path, numbers[-1]))
        except csv.Error as error:
            raise SeqtasksError(f"{path}:{numbers[-1] if numbers else 1}: malformed CSV: {error}") from None
    return _non_empty(examples, path)


def read_label_first_tsv(path, header=True, encoding="utf-8"):
    """Lines `label<TAB>text` (plain or gzip), after one header row if `header`."""
    path = Path(path)
    examples = []
    with reading(path, encoding):
        for number, line in numbered_lines(path, encoding):
            if (header and number == 1) or not line.strip():
                continue
            label, tab, text = line.partition("\t")
            if not tab:
                raise SeqtasksError(f"{path}:{number}: expected 'label<TAB>text'; found no tab")
            examples.append(_example(text, label, path, number))
    return _non_empty(examples, path)


def read_label_folders(path, labels=(), encoding="utf-8"):
    """One folder per label of `.txt` files, one text each (the aclImdb layout).

    `labels` picks and orders the folders; by default every sub-folder but
    aclImdb's unlabelled `unsup`.
    """
    path = Path(path)
    if not path.is_dir():
        raise SeqtasksError(f"{path}: expected a folder with one sub-folder of .txt files per label")
    labels = list(labels) or sorted(
        p.name for p in path.iterdir() if p.is_dir() and p.name not in _UNLABELLED_FOLDERS
    )
    examples = []
    for label in labels:
        folder = path / label
        files = sorted(folder.glob("*.txt"))
        if not files:
            raise SeqtasksError(f"{folder}: expected .txt files of label {label!r}; found none")
        for file in files:
            with reading(file, encoding):
                text = " ".join(line for _, line in numbered_lines(file, encoding))
            examples.append(_example(text, label, file, None))
    return _non_empty(examples, path)


def read_label_files(path, labels, encoding="utf-8"):
    """One text per line in one file per label, named `<path>.<label>` (rt-polarity)."""
    if not labels:
        raise SeqtasksError(f"{path}: the 'lines' format needs data.labels, the file name suffixes")
    examples = []
    for label in labels:
        file = Path(f"{path}.{label}")
        with reading(file, encoding):
            for number, line in numbered_lines(file, encoding):
                if line.strip():
                    examples.append(_example(line, label, file, number))
    return _non_empty(examples, path)


def read_labelled_texts(config, path):
    """Reads `path` in the format and with the columns a recipe's data section names."""
    if config.format == "csv":
        return read_labelled_csv(path, config.text_column, config.label_column, config.encoding)
    if config.format == "tsv":
        return read_label_first_tsv(path, config.header, config.encoding)
    if config.format == "folders":
        return read_label_folders(path, config.labels, config.encoding)
    return read_label_files(path, config.labels, config.encoding)


def split_examples(examples, validation_size, seed):
    """A seeded shuffle, then `validation_size` examples for validation and the rest for training.

    Examples are anything: labelled texts here, tagged sentences for NER.
    """
    if validation_size >= len(examples):
        raise SeqtasksError(
            f"data.validation_size ({validation_size}) leaves no training examples out of {len(examples)}"
        )
    shuffled = list(examples)
    random.Random(seed).shuffle(shuffled)
    return shuffled[validation_size:], shuffled[:validation_size]


def _example(text, label, path, number):
    where = f"{path}:{number}" if number is not None else f"{path}"
    label = label.strip()
    if not label:
        raise SeqtasksError(f"{where}: empty label")
    return text.strip(), label


def _non_empty(examples, path):
    if not examples:
        raise SeqtasksError(f"{path}: no labelled texts in the data")
    return examples
