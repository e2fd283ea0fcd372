import gzip

import pytest

from seqtasks.data.conll import read_conll
from seqtasks.errors import SeqtasksError

CONLL_2003 = """-DOCSTART- -X- O O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O
Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER
Smith NNP I-NP B-PER
Inc NNP I-NP I-ORG

Only RB I-NP O
"""


def test_iob1_becomes_iob2_and_docstart_lines_are_skipped(tmp_path):
    path = tmp_path / "eng.train.gz"
    path.write_bytes(gzip.compress(CONLL_2003.encode()))
    sentences = read_conll(path, token_column=0, tag_column=3, scheme="iob1")
    assert sentences == [
        (
            ["EU", "rejects", "German", "call", "Peter", "Blackburn", "Smith", "Inc"],
            ["B-ORG", "O", "B-MISC", "O", "B-PER", "I-PER", "B-PER", "B-ORG"],
        ),
        (["Only"], ["O"]),
    ]


def test_tab_separated_with_whitespace_only_sentence_breaks(tmp_path):
    path = tmp_path / "wnut.conll"
    path.write_text("Empire\tB-location\nState Building\tI-location\n\t\nhi\tO\n", encoding="utf-8")
    assert read_conll(path, 0, -1) == [
        (["Empire", "State Building"], ["B-location", "I-location"]),
        (["hi"], ["O"]),
    ]


@pytest.mark.parametrize(
    "content, message",
    [
        ("EU B-ORG\nrejects\n", ":2: expected at least 2 columns (token column 0, tag column 1); got 1"),
        ("EU X-ORG\n", ":1: tag 'X-ORG' is not O, B-TYPE or I-TYPE (data.scheme is iob2; other schemes such as IOBES are not read)"),
        ("EU S-ORG\n", ":1: tag 'S-ORG' is not O, B-TYPE or I-TYPE"),
        ("\n\n", ": no sentences in the file"),
    ],
)
def test_malformed_files_name_the_file_and_line(tmp_path, content, message):
    path = tmp_path / "bad.conll"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SeqtasksError) as error:
        read_conll(path, 0, 1)
    assert str(error.value).startswith(f"{path}{message}")


def test_unknown_scheme_is_rejected():
    with pytest.raises(ValueError, match=r"Expected one of \{.*\}. Received: scheme='iobes'"):
        read_conll("x", scheme="iobes")


@pytest.mark.parametrize("tag", ["B-", "I-", "B", "I", "-", "b-PER", "o", "O-PER", "BI-PER"])
@pytest.mark.parametrize("separator", [" ", "\t"])
def test_a_tag_without_a_type_or_of_no_scheme_names_the_file_and_line(tmp_path, tag, separator):
    path = tmp_path / "bad.conll"
    path.write_text(f"EU{separator}B-ORG\nrejects{separator}O\n\nGerman{separator}{tag}\n", encoding="utf-8")
    for scheme in ("iob2", "iob1"):
        with pytest.raises(SeqtasksError) as error:
            read_conll(path, 0, -1, scheme=scheme)
        assert str(error.value) == (
            f"{path}:4: tag {tag!r} is not O, B-TYPE or I-TYPE "
            f"(data.scheme is {scheme}; other schemes such as IOBES are not read)"
        )


def test_one_letter_types_and_types_with_dashes_are_tags(tmp_path):
    path = tmp_path / "ok.conll"
    path.write_text("a B-X\nb I-X\nc B-date-time\nd I-date-time\ne O\n", encoding="utf-8")
    assert read_conll(path) == [(["a", "b", "c", "d", "e"], ["B-X", "I-X", "B-date-time", "I-date-time", "O"])]


def test_a_line_with_only_a_token_has_no_tag_even_when_the_tag_is_counted_from_the_end(tmp_path):
    # With tag column -1 a one-column line's last column is its token: "O" must not pass as its tag.
    path = tmp_path / "bad.conll"
    path.write_text("EU B-ORG\nO\n", encoding="utf-8")
    with pytest.raises(SeqtasksError) as error:
        read_conll(path, 0, -1)
    assert str(error.value) == f"{path}:2: expected at least 2 columns (token column 0, tag column -1); got 1"
    # A tag two columns from the end of a CoNLL-2003 line: a 2-column line has it in the token's place.
    path.write_text("EU NNP I-NP B-ORG\nO O\n", encoding="utf-8")
    with pytest.raises(SeqtasksError) as error:
        read_conll(path, 0, -2)
    assert str(error.value) == f"{path}:2: expected at least 3 columns (token column 0, tag column -2); got 2"
    path.write_text("EU NNP I-NP B-ORG\n", encoding="utf-8")
    assert read_conll(path, 0, -2) == [(["EU"], ["I-NP"])]
    assert read_conll(path, 1, -1) == [(["NNP"], ["B-ORG"])]


@pytest.mark.parametrize(
    "tags, iob2",
    [
        (["I-PER", "I-PER", "I-ORG", "O", "I-ORG"], ["B-PER", "I-PER", "B-ORG", "O", "B-ORG"]),
        (["B-PER", "I-PER", "B-PER", "I-PER"], ["B-PER", "I-PER", "B-PER", "I-PER"]),
        (["O", "I-X", "B-X", "I-Y"], ["O", "B-X", "B-X", "B-Y"]),
    ],
)
def test_iob1_to_iob2_starts_an_entity_only_after_o_or_another_type(tmp_path, tags, iob2):
    path = tmp_path / "eng.train"
    path.write_text("".join(f"w{i} {tag}\n" for i, tag in enumerate(tags)), encoding="utf-8")
    assert read_conll(path, scheme="iob1") == [([f"w{i}" for i in range(len(tags))], iob2)]
    assert read_conll(path, scheme="iob2") == [([f"w{i}" for i in range(len(tags))], tags)]  # read as written


@pytest.mark.parametrize("entity_type", ["PER", "O", "OXX", "X"])
def test_iob1_an_i_tag_opening_a_sentence_starts_an_entity_whatever_its_type(tmp_path, entity_type):
    # Before a sentence's first tag there is no entity: no type, not even one spelled like a tag's end.
    path = tmp_path / "eng.train"
    path.write_text(f"a I-{entity_type}\nb I-{entity_type}\n\nc O\nd I-{entity_type}\n", encoding="utf-8")
    assert read_conll(path, scheme="iob1") == [
        (["a", "b"], [f"B-{entity_type}", f"I-{entity_type}"]),
        (["c", "d"], ["O", f"B-{entity_type}"]),
    ]


def test_conll_files_in_their_encoding_and_bytes_not_utf8_by_default(tmp_path):
    path = tmp_path / "deu.train"
    path.write_bytes("Köln B-LOC\n".encode("latin-1"))
    assert read_conll(path, encoding="latin-1") == [(["Köln"], ["B-LOC"])]
    with pytest.raises(SeqtasksError) as error:
        read_conll(path)
    assert str(error.value) == f"{path}:1: not valid utf-8 (byte 2 of the line)"
    with pytest.raises(SeqtasksError) as error:
        read_conll(path, encoding="klingon")
    assert str(error.value) == f"{path}: unknown text encoding 'klingon'"


@pytest.mark.parametrize(
    "token_column, tag_column, content, needed, got",
    [
        (0, -2, "EU NNP I-NP B-ORG\nOnly\n", 2, 1),  # the tag 2 from the end needs 2 columns
        (2, -1, "EU NNP I-NP B-ORG\nEU B-ORG\n", 3, 2),  # the token in column 2 needs 3 columns
    ],
)
def test_too_few_columns_for_a_tag_counted_from_the_end(tmp_path, token_column, tag_column, content, needed, got):
    path = tmp_path / "bad.conll"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SeqtasksError) as error:
        read_conll(path, token_column, tag_column)
    assert str(error.value) == (
        f"{path}:2: expected at least {needed} columns (token column {token_column}, tag column {tag_column}); got {got}"
    )


def test_tag_first_columns_with_the_token_last(tmp_path):
    path = tmp_path / "tag_first.conll"
    path.write_text("B-PER\tJohn\nO\tsmiles\n", encoding="utf-8")
    assert read_conll(path, token_column=1, tag_column=-2) == [(["John", "smiles"], ["B-PER", "O"])]


def test_an_empty_token_names_the_line(tmp_path):
    path = tmp_path / "bad.conll"
    path.write_text("EU\tB-ORG\n\tO\n", encoding="utf-8")
    with pytest.raises(SeqtasksError) as error:
        read_conll(path)
    assert str(error.value) == f"{path}:2: empty token"


def _documents_file(tmp_path, sizes):
    """A CoNLL file whose document d has sizes[d] one-token sentences `d.s`, each after a -DOCSTART- line."""
    text = "".join(
        "-DOCSTART- O\n\n" + "".join(f"{d}.{s}\tB-PER\n\n" for s in range(size)) for d, size in enumerate(sizes)
    )
    path = tmp_path / "docs.conll"
    path.write_text("w\tO\n\n" + text, encoding="utf-8")  # a sentence before the first -DOCSTART-: its own document
    return path


def test_documents_are_the_sentences_between_docstart_lines(tmp_path):
    from seqtasks.data.conll import read_conll_documents

    path = _documents_file(tmp_path, [2, 0, 3])
    documents = read_conll_documents(path, tag_column=1)
    assert [[tokens[0] for tokens, _ in document] for document in documents] == [["w"], ["0.0", "0.1"], ["2.0", "2.1", "2.2"]]
    assert read_conll(path, tag_column=1) == [sentence for document in documents for sentence in document]


def test_documents_set_aside_are_whole_disjoint_and_picked_by_the_seed(tmp_path):
    from seqtasks.data.conll import read_conll_documents, split_documents

    documents = read_conll_documents(_documents_file(tmp_path, [1 + d % 4 for d in range(30)]), tag_column=1)
    kept, aside = split_documents(documents, 6, seed=3)
    names = lambda sentences: [tokens[0] for tokens, _ in sentences]  # noqa: E731
    assert sorted(names(kept) + names(aside)) == sorted(names(s for d in documents for s in d))
    aside_documents = {name.split(".")[0] for name in names(aside)}
    assert len(aside_documents) == 6 and not aside_documents & {name.split(".")[0] for name in names(kept)}
    assert names(kept) == sorted(names(kept), key=names(s for d in documents for s in d).index)  # file order kept
    assert split_documents(documents, 6, seed=3) == (kept, aside)
    assert split_documents(documents, 6, seed=4)[1] != aside
    with pytest.raises(SeqtasksError, match="cannot set 31 documents aside: the file has 31"):
        split_documents(documents, 31, seed=3)


def test_documents_are_read_as_utf8_by_default_like_sentences(tmp_path):
    from seqtasks.data.conll import read_conll_documents

    path = tmp_path / "deu.train"
    path.write_bytes("Köln B-LOC\n".encode("latin-1"))
    with pytest.raises(SeqtasksError) as error:
        read_conll_documents(path)
    assert str(error.value) == f"{path}:1: not valid utf-8 (byte 2 of the line)"
    assert read_conll_documents(path, encoding="latin-1") == [[(["Köln"], ["B-LOC"])]]
