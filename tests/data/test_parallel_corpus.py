import gzip

import pytest

from seqtasks.data.parallel_corpus import read_parallel_tsv, split_by_source
from seqtasks.errors import SeqtasksError

LINES = "Go.\tVe.\nHi.\tHola.\n\nRun!\t¡Corre!\tCC-BY 2.0 (France) Attribution\n"


def test_reads_the_chosen_columns_and_skips_blank_lines(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text(LINES, encoding="utf-8")
    assert read_parallel_tsv(path, source_column=1, target_column=0) == [
        ("Ve.", "Go."),
        ("Hola.", "Hi."),
        ("¡Corre!", "Run!"),
    ]


def test_reads_gzip_whatever_the_name(tmp_path):
    path = tmp_path / "pairs.data"
    path.write_bytes(gzip.compress(LINES.encode("utf-8")))
    assert read_parallel_tsv(path, 0, 1)[2] == ("Run!", "¡Corre!")


@pytest.mark.parametrize(
    "content, message",
    [
        (b"Go.\tVe.\nHi.\n", "pairs.tsv:2: expected at least 2 tab-separated columns (source column 1, target column 0); got 1"),
        (b"Go.\tVe.\n\t Hola.\n", "pairs.tsv:2: empty source or target text"),
        (b"Go.\tVe.\nHi.\tHol\xe1.\n", "pairs.tsv:2: not valid utf-8 (byte 8 of the line)"),
        (b"\n\n", "pairs.tsv: no sentence pairs in the file"),
        (b"", "pairs.tsv: no sentence pairs in the file"),
    ],
)
def test_bad_files_name_the_file_and_line(tmp_path, content, message):
    path = tmp_path / "pairs.tsv"
    path.write_bytes(content)
    with pytest.raises(SeqtasksError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_parallel_tsv(path, 1, 0)


def test_latin1_files_read_with_their_encoding(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_bytes("Hi.\tHolá.\n".encode("latin-1"))
    assert read_parallel_tsv(path, 1, 0, encoding="latin-1") == [("Holá.", "Hi.")]


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(SeqtasksError, match="absent.tsv: no such data file"):
        read_parallel_tsv(tmp_path / "absent.tsv", 1, 0)
    with pytest.raises(SeqtasksError, match="is a folder, expected a data file"):
        read_parallel_tsv(tmp_path, 1, 0)


def test_split_keeps_each_source_sentence_on_one_side():
    pairs = [(f"s{i % 50}", f"t{i}") for i in range(200)]  # 4 translations per source
    train, validation = split_by_source(pairs, validation_size=30, seed=3)
    assert len(train) + len(validation) == 200
    assert 30 <= len(validation) <= 33
    assert not {s for s, _ in train} & {s for s, _ in validation}
    assert split_by_source(pairs, 30, seed=3) == (train, validation)
    assert split_by_source(pairs, 30, seed=4) != (train, validation)


def test_split_that_leaves_no_training_data_is_an_error():
    with pytest.raises(SeqtasksError, match=r"data.validation_size \(10\) leaves no training pairs out of 3"):
        split_by_source([("a", "x"), ("b", "y"), ("c", "z")], validation_size=10, seed=0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_source_sentences_are_enough_to_split(seed):
    pairs = [("a", "x"), ("b", "y"), ("a", "z")]
    train, validation = split_by_source(pairs, validation_size=1, seed=seed)
    assert sorted([train, validation]) == [[("a", "x"), ("a", "z")], [("b", "y")]]


def test_one_source_sentence_cannot_be_split():
    with pytest.raises(SeqtasksError) as error:
        split_by_source([("a", "x"), ("a", "y")], validation_size=1, seed=0)
    assert str(error.value) == "need at least two distinct source sentences to split off a validation set"


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_validation_stops_at_the_first_group_that_reaches_its_size(seed):
    # One pair per source: exactly validation_size pairs, no group more.
    pairs = [(f"s{i}", f"t{i}") for i in range(6)]
    train, validation = split_by_source(pairs, validation_size=2, seed=seed)
    assert (len(train), len(validation)) == (4, 2)
    assert sorted(train + validation) == pairs
