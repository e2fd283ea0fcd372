import gzip

import pytest

from seqtasks.data.labelled_text import (
    read_label_files,
    read_label_first_tsv,
    read_label_folders,
    read_labelled_csv,
    read_labelled_texts,
    split_examples,
)
from seqtasks.errors import SeqtasksError
from seqtasks.tasks.sentiment.config import TextClassificationDataConfig

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


def _write(path, content):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def test_bytes_not_in_the_default_encoding_name_utf8_the_file_and_the_line(tmp_path):
    tsv = _write(tmp_path / "a.tsv", b"label\ttext\n1\tcaf\xe9\n")
    with pytest.raises(SeqtasksError) as error:
        read_label_first_tsv(tsv)
    assert str(error.value) == f"{tsv}:2: not valid utf-8 (byte 6 of the line)"
    text = _write(tmp_path / "folders" / "pos" / "0.txt", b"caf\xe9\n")
    with pytest.raises(SeqtasksError) as error:
        read_label_folders(tmp_path / "folders")
    assert str(error.value) == f"{text}:1: not valid utf-8 (byte 4 of the line)"
    _write(tmp_path / "rt.neg", b"bad\n")
    pos = _write(tmp_path / "rt.pos", b"ok\n\xe9t\xe9\n")
    with pytest.raises(SeqtasksError) as error:
        read_label_files(tmp_path / "rt", ["neg", "pos"])
    assert str(error.value) == f"{pos}:2: not valid utf-8 (byte 1 of the line)"


def test_an_unknown_encoding_is_named_with_the_file(tmp_path):
    tsv = _write(tmp_path / "a.tsv", b"label\ttext\n1\tok\n")
    first_text = _write(tmp_path / "folders" / "neg" / "0.txt", b"meh\n")
    _write(tmp_path / "folders" / "pos" / "0.txt", b"ok\n")
    neg = _write(tmp_path / "rt.neg", b"meh\n")
    _write(tmp_path / "rt.pos", b"ok\n")
    for read, file in [
        (lambda: read_labelled_csv(tsv, encoding="klingon"), tsv),
        (lambda: read_label_first_tsv(tsv, encoding="klingon"), tsv),
        (lambda: read_label_folders(tmp_path / "folders", encoding="klingon"), first_text),
        (lambda: read_label_files(tmp_path / "rt", ["neg", "pos"], encoding="klingon"), neg),
    ]:
        with pytest.raises(SeqtasksError) as error:
            read()
        assert str(error.value) == f"{file}: unknown text encoding 'klingon'"


def test_latin1_tsv_and_folders_and_the_lines_of_a_text_joined_by_spaces(tmp_path):
    tsv = _write(tmp_path / "a.tsv", "label\ttext\n1\tcafé\n".encode("latin-1"))
    assert read_label_first_tsv(tsv, encoding="latin-1") == [("café", "1")]
    _write(tmp_path / "folders" / "pos" / "0.txt", "très\r\nbien\nvu \n".encode("latin-1"))
    assert read_label_folders(tmp_path / "folders", encoding="latin-1") == [("très bien vu", "pos")]


def test_an_empty_label_names_the_file_and_for_lines_the_line(tmp_path):
    # `labels: [""]` reads the .txt files of the folder itself, and for 'lines' the file `<path>.`.
    text = _write(tmp_path / "folders" / "a.txt", b"fine\n")
    with pytest.raises(SeqtasksError) as error:
        read_label_folders(tmp_path / "folders", [""])
    assert str(error.value) == f"{text}: empty label"
    lines = _write(tmp_path / "rt.", b"\nfine\n")
    with pytest.raises(SeqtasksError) as error:
        read_label_files(tmp_path / "rt", [""])
    assert str(error.value) == f"{lines}:2: empty label"


def test_no_texts_at_all_names_the_data(tmp_path):
    (tmp_path / "folders" / "unsup").mkdir(parents=True)
    with pytest.raises(SeqtasksError) as error:
        read_label_folders(tmp_path / "folders")
    assert str(error.value) == f"{tmp_path / 'folders'}: no labelled texts in the data"
    _write(tmp_path / "rt.neg", b"\n \n")
    _write(tmp_path / "rt.pos", b"")
    with pytest.raises(SeqtasksError) as error:
        read_label_files(tmp_path / "rt", ["neg", "pos"])
    assert str(error.value) == f"{tmp_path / 'rt'}: no labelled texts in the data"
    with pytest.raises(SeqtasksError) as error:
        read_label_files(tmp_path / "rt", [])
    assert str(error.value) == f"{tmp_path / 'rt'}: the 'lines' format needs data.labels, the file name suffixes"


def _latin1_data(tmp_path):
    _write(tmp_path / "reviews.csv", "stars,review\n5,très bien\n".encode("latin-1"))
    _write(tmp_path / "with_header.tsv", "label\ttext\n1\tcafé\n".encode("latin-1"))
    _write(tmp_path / "no_header.tsv", "1\tcafé\n0\tthé\n".encode("latin-1"))
    for label, text in [("pos", "génial"), ("neg", "à éviter"), ("other", "?")]:
        _write(tmp_path / "folders" / label / "0.txt", text.encode("latin-1"))
        _write(tmp_path / f"rt.{label}", f"{text}\n".encode("latin-1"))


@pytest.mark.parametrize(
    "settings, name, expected",
    [
        ({"format": "csv", "text_column": "review", "label_column": "stars"}, "reviews.csv", [("très bien", "5")]),
        ({"format": "tsv", "header": True}, "with_header.tsv", [("café", "1")]),
        ({"format": "tsv", "header": False}, "no_header.tsv", [("café", "1"), ("thé", "0")]),
        ({"format": "folders", "labels": ["pos", "neg"]}, "folders", [("génial", "pos"), ("à éviter", "neg")]),
        ({"format": "lines", "labels": ["neg", "pos"]}, "rt", [("à éviter", "neg"), ("génial", "pos")]),
    ],
)
def test_read_labelled_texts_reads_the_recipe_format_with_its_settings(tmp_path, settings, name, expected):
    _latin1_data(tmp_path)
    config = TextClassificationDataConfig(path=str(tmp_path / name), encoding="latin-1", **settings)
    assert read_labelled_texts(config, tmp_path / name) == expected


def test_csv_rows_after_a_blank_line_are_read(tmp_path):
    path = _write(tmp_path / "a.csv", b"label,text\n1,a\n\n0,b\n")
    assert read_labelled_csv(path) == [("a", "1"), ("b", "0")]


@pytest.mark.parametrize(
    "content, message",
    [
        (b'label,text\n1,ok\n0,"bad"x\n', ":3: malformed CSV: ',' expected after '\"'"),
        (b'label,text\n1,"bad"x\n0,ok\n', ":2: malformed CSV: ',' expected after '\"'"),
        (b'label,text\n1,"open\nstill open\n', ":3: malformed CSV: unexpected end of data"),
    ],
)
def test_malformed_csv_names_the_line_where_it_is_found(tmp_path, content, message):
    path = _write(tmp_path / "a.csv", content)
    with pytest.raises(SeqtasksError) as error:
        read_labelled_csv(path)
    assert str(error.value) == f"{path}{message}"


def test_an_empty_tsv_label_names_the_line(tmp_path):
    path = _write(tmp_path / "a.tsv", b"label\ttext\n1\tfine\n \tno label\n")
    with pytest.raises(SeqtasksError) as error:
        read_label_first_tsv(path)
    assert str(error.value) == f"{path}:3: empty label"
