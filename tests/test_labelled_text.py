import gzip

import pytest

from seqtasks.data.labelled_text import (
    read_label_files,
    read_label_first_tsv,
    read_label_folders,
    read_labelled_csv,
    split_examples,
)
from seqtasks.errors import SeqtasksError

CSV = 'id,label,text\n1,1,"Great, really ""great"" film"\n2,0,Dull.\n'


def test_csv_reads_named_columns_with_quoting_plain_or_gzip(tmp_path):
    plain = tmp_path / "reviews.csv"
    plain.write_text(CSV, encoding="utf-8")
    packed = tmp_path / "reviews.csv.gz"
    packed.write_bytes(gzip.compress(CSV.encode()))
    expected = [('Great, really "great" film', "1"), ("Dull.", "0")]
    assert read_labelled_csv(plain) == expected
    assert read_labelled_csv(packed) == expected


def test_tsv_label_first_skips_the_header(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("label\tsentence\n0\tno wit .\n\n1\ta gem , with\ttabs\n", encoding="utf-8")
    assert read_label_first_tsv(path) == [("no wit .", "0"), ("a gem , with\ttabs", "1")]
    assert read_label_first_tsv(path, header=False)[0] == ("sentence", "label")


def test_folders_per_label_leave_out_unlabelled_reviews(tmp_path):
    for label, texts in {"pos": ["Loved it.<br />Yes."], "neg": ["Meh.", "Bad."], "unsup": ["?"]}.items():
        (tmp_path / label).mkdir()
        for index, text in enumerate(texts):
            (tmp_path / label / f"{index}_7.txt").write_text(text, encoding="utf-8")
    assert read_label_folders(tmp_path) == [("Meh.", "neg"), ("Bad.", "neg"), ("Loved it.<br />Yes.", "pos")]
    assert read_label_folders(tmp_path, ["pos"]) == [("Loved it.<br />Yes.", "pos")]


def test_one_file_per_label_in_latin1(tmp_path):
    (tmp_path / "rt.pos").write_bytes("un film réussi \n".encode("latin-1"))
    (tmp_path / "rt.neg").write_bytes(b"ennuyeux \n\n")
    assert read_label_files(tmp_path / "rt", ["neg", "pos"], "latin-1") == [
        ("ennuyeux", "neg"),
        ("un film réussi", "pos"),
    ]


@pytest.mark.parametrize(
    "reader, name, content, message",
    [
        (read_labelled_csv, "a.csv", b"", "a.csv: empty file, expected a header row"),
        (read_labelled_csv, "a.csv", b"id,text\n1,x\n", "a.csv:1: no column 'label' in the header (columns: id, text)"),
        (read_labelled_csv, "a.csv", b"label,text\n1,x\n0,y,z\n", "a.csv:3: expected 2 columns as in the header; got 3"),
        (read_labelled_csv, "a.csv", b"label,text\n1,ok\n,x\n", "a.csv:3: empty label"),
        (read_labelled_csv, "a.csv", b"label,text\n1,caf\xe9\n", "a.csv:2: not valid utf-8 (byte 6 of the line)"),
        (read_labelled_csv, "a.csv", b"label,text\n", "a.csv: no labelled texts in the data"),
        (read_label_first_tsv, "a.tsv", b"label\ttext\n1 no tab here\n", "a.tsv:2: expected 'label<TAB>text'; found no tab"),
    ],
)
def test_bad_files_name_the_file_and_the_line(tmp_path, reader, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(SeqtasksError) as error:
        reader(path)
    assert str(error.value) == f"{path}{message[len(name):]}"


def test_missing_data_is_named(tmp_path):
    with pytest.raises(SeqtasksError, match="absent.csv: no such data file"):
        read_labelled_csv(tmp_path / "absent.csv")
    with pytest.raises(SeqtasksError, match="expected a folder with one sub-folder of .txt files per label"):
        read_label_folders(tmp_path / "absent")
    (tmp_path / "pos").mkdir()
    with pytest.raises(SeqtasksError, match=r"pos: expected .txt files of label 'pos'; found none"):
        read_label_folders(tmp_path)
    with pytest.raises(SeqtasksError, match=r"rt.neg: no such data file"):
        read_label_files(tmp_path / "rt", ["neg"])


def test_split_is_seeded_and_disjoint():
    examples = [(f"text {i}", str(i % 2)) for i in range(50)]
    train, validation = split_examples(examples, 10, seed=1)
    assert len(train) == 40 and len(validation) == 10
    assert sorted(train + validation) == sorted(examples)
    assert split_examples(examples, 10, seed=1) == (train, validation)
    assert split_examples(examples, 10, seed=2) != (train, validation)
    with pytest.raises(SeqtasksError, match=r"data.validation_size \(50\) leaves no training examples out of 50"):
        split_examples(examples, 50, seed=1)
