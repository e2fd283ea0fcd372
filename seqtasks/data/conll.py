"""CoNLL column files for tagging: one token per line, blank lines between sentences."""

from pathlib import Path

from seqtasks.data.text_files import numbered_lines, reading
from seqtasks.errors import SeqtasksError

SCHEMES = ("iob1", "iob2")


def read_conll(path, token_column=0, tag_column=-1, scheme="iob2", encoding="utf-8"):
    """Reads `(tokens, tags)` sentences; tags come back in the IOB2 scheme.

    Columns are split on tabs when the line has one, else on whitespace.
    `-DOCSTART-` lines and whitespace-only lines end a sentence. Tags must be
    `O` or `B-TYPE`/`I-TYPE`; with `scheme="iob1"` (CoNLL-2003) an `I-` that
    starts an entity becomes `B-`. A line with too few columns or a malformed
    tag is an error naming the file and the line.
    """
    documents = read_conll_documents(path, token_column, tag_column, scheme, encoding)
    return [sentence for document in documents for sentence in document]


def read_conll_documents(path, token_column=0, tag_column=-1, scheme="iob2", encoding="utf-8"):
    """The sentences of `read_conll` in documents: lists of sentences, split at `-DOCSTART-` lines.

    Sentences before the first `-DOCSTART-` line (or in a file without one)
    are a document; documents without sentences are left out.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"Expected one of {set(SCHEMES)}. Received: scheme={scheme!r}")
    path = Path(path)
    documents, sentences, tokens, tags = [], [], [], []

    def end_sentence():
        if tokens:
            sentences.append((list(tokens), _to_iob2(tags) if scheme == "iob1" else list(tags)))
            tokens.clear()
            tags.clear()

    def end_document():
        end_sentence()
        if sentences:
            documents.append(list(sentences))
            sentences.clear()

    with reading(path, encoding):
        for number, line in numbered_lines(path, encoding):
            if not line.strip():
                end_sentence()
                continue
            columns = line.split("\t") if "\t" in line else line.split()
            columns = [column.strip() for column in columns]
            if columns[0] == "-DOCSTART-":
                end_document()
                continue
            needed = max(token_column, tag_column) + 1 if tag_column >= 0 else max(token_column + 1, -tag_column)
            if tag_column < 0 and len(columns) + tag_column == token_column:
                needed = len(columns) + 1  # counted from the end, the tag column is the token's: no tag
            if len(columns) < needed:
                raise SeqtasksError(
                    f"{path}:{number}: expected at least {needed} columns (token column {token_column}, "
                    f"tag column {tag_column}); got {len(columns)}"
                )
            token, tag = columns[token_column], columns[tag_column]
            if not token:
                raise SeqtasksError(f"{path}:{number}: empty token")
            if tag != "O" and (len(tag) < 3 or tag[:2] not in ("B-", "I-")):
                raise SeqtasksError(
                    f"{path}:{number}: tag {tag!r} is not O, B-TYPE or I-TYPE "
                    f"(data.scheme is {scheme}; other schemes such as IOBES are not read)"
                )
            tokens.append(token)
            tags.append(tag)
    end_document()
    if not documents:
        raise SeqtasksError(f"{path}: no sentences in the file")
    return documents


def split_documents(documents, count, seed):
    """`(kept, set_aside)` sentence lists: `count` documents picked by `seed` set aside, the rest kept.

    Both keep the file's order. At least one document must be left.
    """
    import random

    if count >= len(documents):
        raise SeqtasksError(
            f"cannot set {count} documents aside: the file has {len(documents)} (documents start at -DOCSTART- lines)"
        )
    aside = set(random.Random(seed).sample(range(len(documents)), count))
    kept = [sentence for index, document in enumerate(documents) if index not in aside for sentence in document]
    held = [sentence for index, document in enumerate(documents) if index in aside for sentence in document]
    return kept, held


def _to_iob2(tags):
    converted = []
    previous = "O"
    for tag in tags:
        if tag.startswith("I-") and (previous == "O" or previous[2:] != tag[2:]):
            tag = "B-" + tag[2:]
        converted.append(tag)
        previous = tag
    return converted
