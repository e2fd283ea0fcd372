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
