import gzip
import json

import pytest

from seqtasks.data.captions import read_coco_captions, read_flickr_tokens, read_split_list, select_split
from seqtasks.errors import SeqtasksError

TOKENS = (
    "a.jpg#0\tA dog runs .\n"
    "a.jpg#1\tA brown dog .\n"
    "b.jpg#0\tTwo kids play .\n"
    "b.jpg.1#0\tA quirk of the original file .\n"
)


def test_flickr_tokens_group_captions_by_image_plain_or_gzip(tmp_path):
    plain = tmp_path / "Flickr8k.token.txt"
    plain.write_text(TOKENS, encoding="utf-8")
    packed = tmp_path / "Flickr8k.token.txt.gz"
    packed.write_bytes(gzip.compress(TOKENS.encode()))
    expected = {
        "a.jpg": ["A dog runs .", "A brown dog ."],
        "b.jpg": ["Two kids play ."],
        "b.jpg.1": ["A quirk of the original file ."],
    }
    assert read_flickr_tokens(plain) == expected
    assert read_flickr_tokens(packed) == expected


def test_split_lists_select_images_in_their_order(tmp_path):
    split = tmp_path / "dev.txt"
    split.write_text("b.jpg\n\na.jpg\n", encoding="utf-8")
    captions = {"a.jpg": ["x"], "b.jpg": ["y"], "c.jpg": ["z"]}
    names = read_split_list(split)
    assert list(select_split(captions, names, "tokens.txt", split)) == ["b.jpg", "a.jpg"]
    with pytest.raises(SeqtasksError, match=r"dev.txt: 1 image\(s\) without captions in tokens.txt, e.g. 'd.jpg'"):
        select_split(captions, names + ["d.jpg"], "tokens.txt", split)


@pytest.mark.parametrize(
    "content, message",
    [
        ("a.jpg#0\tfine\na.jpg A dog\n", ":2: expected '<image>#<n><TAB><caption>'"),
        ("a.jpg#x\tA dog\n", ":1: expected '<image>#<n><TAB><caption>'"),
        ("a.jpg#0\t  \n", ":1: empty caption"),
        ("\n", ": no captions in the file"),
    ],
)
def test_bad_token_files_name_the_line(tmp_path, content, message):
    path = tmp_path / "tokens.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SeqtasksError) as error:
        read_flickr_tokens(path)
    assert str(error.value) == f"{path}{message}"


def test_coco_captions_json(tmp_path):
    path = tmp_path / "captions_val.json"
    path.write_text(
        json.dumps(
            {
                "images": [{"id": 7, "file_name": "COCO_7.jpg"}, {"id": 9, "file_name": "COCO_9.jpg"}],
                "annotations": [
                    {"image_id": 9, "caption": "A cat. "},
                    {"image_id": 7, "caption": "A train."},
                    {"image_id": 9, "caption": "A cat on a mat."},
                ],
            }
        ),
        encoding="utf-8",
    )
    assert read_coco_captions(path) == {"COCO_9.jpg": ["A cat.", "A cat on a mat."], "COCO_7.jpg": ["A train."]}


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"images": [}', ":1: invalid JSON"),
        ("[]", ": expected a JSON object with 'images' and 'annotations' lists"),
        ('{"images": [{"id": 1}], "annotations": []}', ": images[0]: expected an object with 'id' and 'file_name'"),
        (
            '{"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": [{"image_id": 2, "caption": "x"}]}',
            ": annotations[0]: image_id 2 is not in 'images'",
        ),
    ],
)
def test_bad_coco_files_are_named(tmp_path, content, message):
    path = tmp_path / "captions.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SeqtasksError) as error:
        read_coco_captions(path)
    assert str(error.value).startswith(f"{path}{message}")


def test_flickr_tokens_read_past_blank_lines_and_keep_tabs_inside_captions(tmp_path):
    path = tmp_path / "tokens.txt"
    path.write_text("a.jpg#0\tA dog\tin snow .\n\n \nb.jpg#0\t Kids .\n", encoding="utf-8")
    assert read_flickr_tokens(path) == {"a.jpg": ["A dog\tin snow ."], "b.jpg": ["Kids ."]}


def test_flickr_tokens_in_their_encoding_and_bytes_not_utf8_by_default(tmp_path):
    path = tmp_path / "tokens.txt"
    path.write_bytes("a.jpg#0\tUn café .\n".encode("latin-1"))
    assert read_flickr_tokens(path, encoding="latin-1") == {"a.jpg": ["Un café ."]}
    with pytest.raises(SeqtasksError) as error:
        read_flickr_tokens(path)
    assert str(error.value) == f"{path}:1: not valid utf-8 (byte 15 of the line)"
    with pytest.raises(SeqtasksError) as error:
        read_flickr_tokens(path, encoding="klingon")
    assert str(error.value) == f"{path}: unknown text encoding 'klingon'"


def test_a_flickr_line_without_a_tab_is_malformed_even_with_an_image_number(tmp_path):
    path = tmp_path / "tokens.txt"
    path.write_text("a.jpg#0\n", encoding="utf-8")
    with pytest.raises(SeqtasksError) as error:
        read_flickr_tokens(path)
    assert str(error.value) == f"{path}:1: expected '<image>#<n><TAB><caption>'"


def test_an_image_name_with_a_hash_sign_is_read(tmp_path):
    path = tmp_path / "tokens.txt"
    path.write_text("dog#1.jpg#0\tA dog .\n", encoding="utf-8")
    assert read_flickr_tokens(path) == {"dog#1.jpg": ["A dog ."]}


def test_split_lists_must_name_images_in_utf8(tmp_path):
    path = tmp_path / "dev.txt"
    path.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(SeqtasksError) as error:
        read_split_list(path)
    assert str(error.value) == f"{path}: no image names in the file"
    path.write_bytes(b"a.jpg\n\xe9.jpg\n")
    with pytest.raises(SeqtasksError) as error:
        read_split_list(path)
    assert str(error.value) == f"{path}:2: not valid utf-8 (byte 1 of the line)"


@pytest.mark.parametrize(
    "content, message",
    [
        (b'{"a": "caf\xe9"}', ": not valid utf-8 (byte 11)"),
        (b'{"images": {}, "annotations": []}', ": expected a JSON object with 'images' and 'annotations' lists"),
        (b'{"annotations": []}', ": expected a JSON object with 'images' and 'annotations' lists"),
        (b'{"images": [], "annotations": {}}', ": expected a JSON object with 'images' and 'annotations' lists"),
        (b'{"images": [{"file_name": "a.jpg"}], "annotations": []}', ": images[0]: expected an object with 'id' and 'file_name'"),
        (b'{"images": [7], "annotations": []}', ": images[0]: expected an object with 'id' and 'file_name'"),
        (
            b'{"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": [{"image_id": 1}]}',
            ": annotations[0]: expected an object with 'image_id' and 'caption'",
        ),
        (
            b'{"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": ["x"]}',
            ": annotations[0]: expected an object with 'image_id' and 'caption'",
        ),
        (b'{"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": []}', ": no captions in the file"),
        (
            b'{"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": [{"image_id": 1, "caption": " "}]}',
            ": no captions in the file",
        ),
    ],
)
def test_bad_coco_files_are_named_exactly(tmp_path, content, message):
    path = tmp_path / "captions.json"
    path.write_bytes(content)
    with pytest.raises(SeqtasksError) as error:
        read_coco_captions(path)
    assert str(error.value) == f"{path}{message}"


def test_coco_json_is_utf8_whatever_the_locale(tmp_path, ascii_locale):
    path = tmp_path / "captions.json"
    path.write_bytes('{"images": [{"id": 1, "file_name": "é.jpg"}], "annotations": [{"image_id": 1, "caption": "Un café."}]}'.encode())
    assert read_coco_captions(path) == {"é.jpg": ["Un café."]}


def test_coco_captions_json_may_be_gzip(tmp_path):
    path = tmp_path / "captions_train.json.gz"
    content = {"images": [{"id": 7, "file_name": "COCO_7.jpg"}], "annotations": [{"image_id": 7, "caption": "A train."}]}
    path.write_bytes(gzip.compress(json.dumps(content).encode()))
    assert read_coco_captions(path) == {"COCO_7.jpg": ["A train."]}
