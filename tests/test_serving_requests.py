"""TensorFlow Serving's JSON read and written by `seqtasks serve`, the request limits, and the batcher's grouping."""

import asyncio
import base64
import io
import struct

import numpy as np
import pytest

from seqtasks.serving.batching import Batcher
from seqtasks.serving.limits import Limits, TooLarge, declared_image_size
from seqtasks.serving.requests import BadRequest, read_predict, to_json

SIGNATURES = {
    "serving_default": {"inputs": {"text": ("string", [None])}},
    "with_settings": {
        "inputs": {
            "text": ("string", [None]),
            "beam_width": ("int32", [None]),
            "length_penalty": ("float32", [None]),
        }
    },
    "images": {"inputs": {"image": ("string", [None])}},
}


def test_the_row_and_columnar_formats_give_the_same_columns():
    assert read_predict({"instances": ["a", "b"]}, SIGNATURES, Limits()) == (
        "serving_default", {"text": ["a", "b"]}, True)
    assert read_predict({"instances": [{"text": "a"}]}, SIGNATURES, Limits())[1] == {"text": ["a"]}
    assert read_predict({"inputs": ["a", "b"]}, SIGNATURES, Limits()) == ("serving_default", {"text": ["a", "b"]}, False)
    assert read_predict({"inputs": {"text": ["a"]}}, SIGNATURES, Limits())[1] == {"text": ["a"]}
    body = {"signature_name": "with_settings", "instances": [
        {"text": "a", "beam_width": 2, "length_penalty": 1},
        {"text": "b", "beam_width": 2, "length_penalty": 0.5},
    ]}
    assert read_predict(body, SIGNATURES, Limits())[1] == {
        "text": ["a", "b"], "beam_width": [2, 2], "length_penalty": [1.0, 0.5]}
    columnar = {"signature_name": "with_settings", "inputs": {"text": ["a"], "beam_width": 3, "length_penalty": [0]}}
    assert read_predict(columnar, SIGNATURES, Limits())[1] == {"text": ["a"], "beam_width": [3], "length_penalty": [0.0]}
    png = b"\x89PNG\r\n\x1a\n" + bytes(20)
    image = {"signature_name": "images", "instances": [{"b64": base64.b64encode(png).decode()}]}
    assert read_predict(image, SIGNATURES, Limits())[1] == {"image": [png]}


@pytest.mark.parametrize(
    "body, message",
    [
        ({"instances": "a"}, "instances: expected a non-empty list"),
        ({"instances": [None]}, "text[0]: expected a string"),
        ({"instances": [{"b64": 3}]}, "text[0]: expected a string"),
        ({"inputs": {"txt": ["a"]}}, "inputs: missing field 'text'"),
        ({"inputs": {"text": []}}, "inputs.text: expected a non-empty list"),
        ({"signature_name": 3, "inputs": ["a"]}, "signature_name: expected a string"),
        ({"signature_name": "with_settings", "instances": ["a"]}, "instances[0]: expected an object"),
        ({"signature_name": "with_settings", "instances": [{"text": "a", "beam_width": 1, "length_penalty": 0,
                                                            "n": 1}]}, "instances[0]: unknown field 'n'"),
        ({"signature_name": "with_settings", "instances": [{"text": "a", "beam_width": True, "length_penalty": 0}]},
         "beam_width[0]: expected an integer"),
        ({"signature_name": "with_settings", "instances": [{"text": "a", "beam_width": 2**40, "length_penalty": 0}]},
         "out of the int32 range"),
        ({"signature_name": "with_settings", "instances": [{"text": "a", "beam_width": 1, "length_penalty": "x"}]},
         "length_penalty[0]: expected a number"),
        ({"instances": [{"b64": base64.b64encode(b"abc").decode()}]}, "text[0]: expected text"),
    ],
)
def test_malformed_requests_name_the_field(body, message):
    with pytest.raises(BadRequest, match=None) as raised:
        read_predict(body, SIGNATURES, Limits())
    assert message in str(raised.value)


def _png(width, height):
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I4sII", 13, b"IHDR", width, height) + bytes(5)


def _jpeg(width, height):
    import tensorflow as tf

    return tf.io.encode_jpeg(tf.zeros([height, width, 3], tf.uint8)).numpy()


def _bmp(width, height):
    return b"BM" + bytes(16) + struct.pack("<ii", width, -height) + bytes(30)


def test_declared_image_sizes_are_read_from_headers_without_decoding():
    assert declared_image_size(_png(640, 480)) == (640, 480)
    assert declared_image_size(_jpeg(33, 17)) == (33, 17)
    assert declared_image_size(_bmp(20, 10)) == (20, 10)  # a negative height: rows stored top-down
    assert declared_image_size(b"GIF89a....") is None
    # A PNG encoded by a real encoder, not just our own header.
    from matplotlib import pyplot as plt

    buffer = io.BytesIO()
    plt.imsave(buffer, np.zeros((12, 34, 3)), format="png")
    assert declared_image_size(buffer.getvalue()) == (34, 12)


def test_limits_answer_413_naming_the_limit_and_its_option():
    limits = Limits(max_instances=2, max_text_characters=5, max_image_bytes=1000, max_image_pixels=100)
    with pytest.raises(TooLarge, match=r"3 instances; at most 2 per request \(--max-instances\)"):
        read_predict({"instances": ["a", "b", "c"]}, SIGNATURES, limits)
    with pytest.raises(TooLarge, match=r"instance 1: 6 characters; at most 5 \(--max-text-characters\)"):
        read_predict({"instances": ["abc", "abcdef"]}, SIGNATURES, limits)
    assert read_predict({"instances": ["ab", "abcde"]}, SIGNATURES, limits)[1] == {"text": ["ab", "abcde"]}

    def image(data):
        return {"signature_name": "images", "instances": [{"b64": base64.b64encode(data).decode()}]}

    with pytest.raises(TooLarge, match=r"image of 11 x 10 pixels; at most 100 pixels \(--max-image-pixels\)"):
        read_predict(image(_png(11, 10)), SIGNATURES, limits)
    assert read_predict(image(_png(10, 10)), SIGNATURES, limits)
    with pytest.raises(TooLarge, match=r"image of 1100 bytes; at most 1000 \(--max-image-bytes\)"):
        read_predict(image(_png(1, 1) + bytes(1071)), SIGNATURES, limits)


def test_outputs_are_written_as_tensorflow_serving_writes_them():
    outputs = {"translation": np.array([b"a", "é".encode()]), "scores": np.array([[0.5, 0.25], [1.0, 2.0]], np.float32)}
    assert to_json(outputs, 2, True) == {"predictions": [
        {"translation": "a", "scores": [0.5, 0.25]}, {"translation": "é", "scores": [1.0, 2.0]}]}
    assert to_json(outputs, 2, False) == {"outputs": {"translation": ["a", "é"], "scores": [[0.5, 0.25], [1.0, 2.0]]}}
    # One output: bare values, per row or as the column.
    assert to_json({"label": np.array([b"pos", b"neg"])}, 2, True) == {"predictions": ["pos", "neg"]}
    assert to_json({"label": np.array([b"pos", b"neg"])}, 2, False) == {"outputs": ["pos", "neg"]}


def test_the_batcher_merges_requests_with_the_same_settings_and_splits_the_answers():
    calls = []

    def run(signature, columns):
        calls.append((signature, {key: list(value) for key, value in columns.items()}))
        texts = columns["text"]
        return {"echo": np.array([text.upper() for text in texts]), "width": np.array([columns.get("w", [0])[0]] * len(texts))}

    async def scenario():
        batcher = Batcher(run, "text", {"serving_default", "with_settings"}, max_batch_size=6, timeout_seconds=0.05)
        batcher.start()
        requests = [
            ("serving_default", {"text": ["a", "b"]}),
            ("serving_default", {"text": ["c"]}),
            ("with_settings", {"text": ["d"], "w": [3]}),
            ("with_settings", {"text": ["e", "f"], "w": [3, 3]}),
            ("with_settings", {"text": ["g"], "w": [5]}),
            ("serving_default", {"text": ["h", "i"]}),  # the first window closed at 6 examples: the next one
            ("attention", {"text": ["j"]}),  # never merged
        ]
        answers = await asyncio.gather(*(batcher.submit(*request) for request in requests))
        await batcher.stop()
        return answers

    answers = asyncio.run(scenario())
    assert [list(outputs["echo"]) for outputs, _ in answers] == [
        ["A", "B"], ["C"], ["D"], ["E", "F"], ["G"], ["H", "I"], ["J"]]
    assert [examples for _, examples in answers] == [3, 3, 3, 3, 1, 2, 1]
    assert [list(outputs["width"]) for outputs, _ in answers[2:5]] == [[3], [3, 3], [5]]
    assert sorted(tuple(call[1]["text"]) for call in calls) == sorted(
        [("a", "b", "c"), ("d", "e", "f"), ("g",), ("h", "i"), ("j",)])
    merged = next(call for call in calls if call[1]["text"] == ["d", "e", "f"])
    assert merged[1]["w"] == [3]  # one value of a setting stands for the merged call


def test_one_request_s_bad_input_does_not_fail_the_requests_merged_with_it():
    def run(signature, columns):
        if "bad" in columns["text"]:
            raise ValueError("the model rejected the input: bad")
        return {"echo": np.array(columns["text"])}

    async def scenario():
        batcher = Batcher(run, "text", {"serving_default"}, max_batch_size=8, timeout_seconds=0.05)
        batcher.start()
        answers = await asyncio.gather(
            *(batcher.submit("serving_default", {"text": [text]}) for text in ("ok", "bad", "fine")),
            return_exceptions=True,
        )
        await batcher.stop()
        return answers

    good, bad, fine = asyncio.run(scenario())
    assert list(good[0]["echo"]) == ["ok"] and list(fine[0]["echo"]) == ["fine"]
    assert isinstance(bad, ValueError) and "bad" in str(bad)
