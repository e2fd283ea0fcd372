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
