"""TensorFlow Serving's JSON read and written by `seqtasks serve`, the request limits, and the batcher's grouping.

Every limit is tested in both request formats (row `instances`, columnar
`inputs`) at its exact boundary: the largest request it takes and the
smallest it refuses.
"""

import base64
import io
import json
import struct
import time

import numpy as np
import pytest

from seqtasks.serving.limits import Limits, TooLarge
from seqtasks.serving.parsing import parse, serve_frames
from seqtasks.serving.requests import BadRequest, parse_json, parse_predict, read_predict, shown, to_json


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


def b64(data):
    return {"b64": base64.b64encode(data).decode()}


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
    image = {"signature_name": "images", "instances": [b64(png)]}
    assert read_predict(image, SIGNATURES, Limits(), ("image",))[1] == {"image": [png]}


def test_tensorflow_serving_s_conventions_an_empty_signature_name_and_base64_for_any_string():
    # TensorFlow Serving reads "" as the default signature, and takes {"b64": ...} for any DT_STRING input.
    assert read_predict({"signature_name": "", "instances": ["a"]}, SIGNATURES, Limits())[0] == "serving_default"
    assert read_predict({"instances": [b64("é".encode())]}, SIGNATURES, Limits())[1] == {"text": ["é".encode()]}
    assert read_predict({"inputs": {"text": [b64(b"x"), "y"]}}, SIGNATURES, Limits())[1] == {"text": [b"x", "y"]}


@pytest.mark.parametrize("body", [
    {"signature_name": "images", "instances": ["/etc/passwd"]},
    {"signature_name": "images", "instances": [{"image": "/etc/passwd"}]},
    {"signature_name": "images", "inputs": ["/etc/passwd"]},
    {"signature_name": "images", "inputs": {"image": "photo.png"}},
])
def test_a_binary_input_takes_base64_only_never_a_string_that_could_name_a_file(body):
    with pytest.raises(BadRequest) as raised:
        read_predict(body, SIGNATURES, Limits(), ("image",))
    assert str(raised.value) == (
        'image[0]: expected {"b64": ...}, the image\'s bytes in base64 (a server never reads a file path)')


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
        ({"signature_name": "with_settings", "inputs": {"text": ["a"], "beam_width": [1], "length_penalty": [1e999]}},
         "length_penalty[0]: expected a number"),
        ({"instances": [{"b64": "%%%"}]}, "text[0]: 'b64' is not valid base64"),
        ({"instances": ["a"], "x" * 100_000: 1}, "'" + "x" * 40 + "'...: unknown field"),
        ({"signature_name": "y" * 100_000, "instances": ["a"]}, "no signature '" + "y" * 40 + "'..."),
        ({"inputs": {"text": ["a"], "z" * 100_000: [1]}}, "inputs: unknown field '" + "z" * 40 + "'..."),
    ],
)
def test_malformed_requests_name_the_field_in_a_bounded_message(body, message):
    with pytest.raises(BadRequest) as raised:
        read_predict(body, SIGNATURES, Limits())
    assert message in str(raised.value) and len(str(raised.value)) < 300


# Decoding settings of every numeric type, as an export's `with_settings` has them.
NUMBERS = {"numbers": {"inputs": {"text": ("string", [None]), "beam_width": ("int32", [None]),
                                  "seed": ("int64", [None]), "temperature": ("float32", [None]),
                                  "half": ("float16", [None]), "double": ("float64", [None])}}}
ACCEPTED = {"beam_width": "2", "seed": "0", "temperature": "1.0", "half": "1", "double": "1"}
# A number of 400 digits, and of 5000 (more than Python reads as an int: sys.get_int_max_str_digits() is 4300).
HUGE, LONGER = "9" * 400, "9" * 5000


def _numbers(**literals):
    """The raw body of one `numbers` instance whose settings are the JSON literals given (the others accepted)."""
    settings = ", ".join(f'"{key}": {value}' for key, value in {**ACCEPTED, **literals}.items())
    return ('{"signature_name": "numbers", "instances": [{"text": "a", ' + settings + "}]}").encode()


def _out_of_range(field, literal, dtype):
    return f"{field}[0]: {shown(literal)} is out of the {dtype} range"


@pytest.mark.parametrize("field, literal, message", [
    # A float setting of a huge integer overflowed float(): answered 500, not 400 (issue 64).
    ("temperature", HUGE, _out_of_range("temperature", HUGE, "float32")),
    ("temperature", "-" + HUGE, _out_of_range("temperature", "-" + HUGE, "float32")),
    ("temperature", "1" + "0" * 309, _out_of_range("temperature", "1" + "0" * 309, "float32")),
    ("temperature", LONGER, _out_of_range("temperature", LONGER, "float32")),
    ("temperature", "1e39", "temperature[0]: '1e+39' is out of the float32 range"),
    ("temperature", "-3.5e38", "temperature[0]: '-3.5e+38' is out of the float32 range"),
    ("temperature", "1e400", "temperature[0]: expected a number"),
    ("temperature", "-1e400", "temperature[0]: expected a number"),
    ("temperature", "Infinity", "temperature[0]: expected a number"),
    ("temperature", "NaN", "temperature[0]: expected a number"),
    ("half", "65520", "half[0]: '65520' is out of the float16 range"),
    # One less is read as float64's nearest value, which float32 rounds to infinity too.
    ("temperature", str(2**128 - 2**103 - 1), _out_of_range("temperature", str(2**128 - 2**103 - 1), "float32")),
    ("double", HUGE, _out_of_range("double", HUGE, "float64")),
    ("double", str(2**1024 - 2**970), _out_of_range("double", str(2**1024 - 2**970), "float64")),
    ("beam_width", HUGE, _out_of_range("beam_width", HUGE, "int32")),
    ("beam_width", "-" + HUGE, _out_of_range("beam_width", "-" + HUGE, "int32")),
    ("beam_width", LONGER, _out_of_range("beam_width", LONGER, "int32")),
    ("beam_width", "1e400", "beam_width[0]: expected an integer"),
    ("seed", HUGE, _out_of_range("seed", HUGE, "int64")),
    ("seed", str(2**63), "seed[0]: '9223372036854775808' is out of the int64 range"),
])
def test_a_number_out_of_its_setting_s_range_of_any_size_is_a_bad_request_naming_the_field(field, literal, message):
    with pytest.raises(BadRequest) as raised:
        parse_predict(_numbers(**{field: literal}), NUMBERS, Limits())
    assert str(raised.value) == message and len(message) < 300
    assert shown(HUGE) == repr("9" * 40) + "..."


def test_numbers_just_inside_each_setting_s_range_are_read():
    largest = {"temperature": str(2**128 - 2**104), "half": "65519", "double": str(2**1024 - 2**970 - 1),
               "beam_width": str(2**31 - 1), "seed": str(-(2**63))}
    _, columns, _ = parse_predict(_numbers(**largest), NUMBERS, Limits())
    assert columns["temperature"] == [3.4028234663852886e38] and columns["half"] == [65519.0]
    assert columns["double"] == [1.7976931348623157e308]
    assert columns["beam_width"] == [2**31 - 1] and columns["seed"] == [-(2**63)]
    # A float literal within float32's rounding of its largest value, and one too small to be anything but 0.
    _, columns, _ = parse_predict(_numbers(temperature="3.4028235e38", half="-1e-50"), NUMBERS, Limits())
    assert columns["temperature"] == [3.4028235e38] and columns["half"] == [-1e-50]
    # A long integer given to a string input is still not a string.
    with pytest.raises(BadRequest, match=r"^text\[0\]: expected a string"):
        parse_predict(('{"instances": [' + HUGE + "]}").encode(), SIGNATURES, Limits())
    with pytest.raises(BadRequest, match="^signature_name: expected a string$"):
        parse_predict(('{"signature_name": ' + HUGE + ', "instances": ["a"]}').encode(), SIGNATURES, Limits())


def test_the_worker_process_answers_a_huge_number_as_a_bad_request_and_reads_the_next_frame():
    # The worker's loop ended on the OverflowError, so its process died and the request was answered 503.
    raws = (_numbers(temperature=HUGE), _numbers(beam_width="-" + LONGER), _numbers(temperature="1e400"), _numbers())
    answers = _served_frames([("predict", raw, ()) for raw in raws], NUMBERS)
    assert json.loads(answers.readline()) == {
        "error": "bad_request", "message": _out_of_range("temperature", HUGE, "float32")}
    assert json.loads(answers.readline()) == {
        "error": "bad_request", "message": _out_of_range("beam_width", "-" + LONGER, "int32")}
    assert json.loads(answers.readline()) == {"error": "bad_request", "message": "temperature[0]: expected a number"}
    last = json.loads(answers.readline())
    assert last["columns"]["temperature"] == [1.0] and last["columns"]["beam_width"] == [2]

def test_names_are_cut_where_errors_repeat_them():
    assert shown("a" * 40) == repr("a" * 40)
    assert shown("a" * 41) == repr("a" * 40) + "..."
    assert shown(12) == "'12'"


def _png(width, height):
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I4sII", 13, b"IHDR", width, height) + bytes(5)


def _jpeg(width, height):
    import tensorflow as tf

    return tf.io.encode_jpeg(tf.zeros([height, width, 3], tf.uint8)).numpy()


def test_a_truncated_jpeg_in_a_request_is_a_bad_request():
    jpeg = _jpeg(16, 16)
    body = {"signature_name": "images", "instances": [b64(jpeg[: len(jpeg) // 2])]}
    with pytest.raises(BadRequest, match=r"image\[0\]: a truncated JPEG"):
        read_predict(body, SIGNATURES, Limits(), ("image",))


def _formats(signature, values, settings=None):
    """The same request in the row and the columnar format."""
    if settings is None:
        return [{"signature_name": signature, "instances": values}, {"signature_name": signature, "inputs": values}]
    rows = [{"text": value, **settings} for value in values]
    columns = {"text": values, **{key: [value] for key, value in settings.items()}}
    return [{"signature_name": signature, "instances": rows}, {"signature_name": signature, "inputs": columns}]


@pytest.mark.parametrize("index", [0, 1])
def test_every_limit_holds_at_its_boundary_in_both_formats(index):
    limits = Limits(max_instances=3, max_text_characters=5, max_image_bytes=1000, max_image_pixels=100)
    settings = {"beam_width": 2, "length_penalty": 0.5}
    assert read_predict(_formats("serving_default", ["a", "b", "c"])[index], SIGNATURES, limits)[1]["text"] == [
        "a", "b", "c"]
    with pytest.raises(TooLarge, match=r"^4 instances; at most 3 per request \(--max-instances\)$"):
        read_predict(_formats("serving_default", list("abcd"))[index], SIGNATURES, limits)
    assert read_predict(_formats("with_settings", ["a", "b", "c"], settings)[index], SIGNATURES, limits)
    with pytest.raises(TooLarge, match="at most 3 per request"):
        read_predict(_formats("with_settings", list("abcd"), settings)[index], SIGNATURES, limits)
    assert read_predict(_formats("serving_default", ["abcde"])[index], SIGNATURES, limits)
    with pytest.raises(TooLarge, match=r"instance 1: 6 characters; at most 5 \(--max-text-characters\)"):
        read_predict(_formats("serving_default", ["abc", "abcdef"])[index], SIGNATURES, limits)
    # Base64 text counts its characters too, an invalid UTF-8 byte as one.
    assert read_predict(_formats("serving_default", [b64("ééééé".encode())])[index], SIGNATURES, limits)
    with pytest.raises(TooLarge, match="6 characters"):
        read_predict(_formats("serving_default", [b64(b"abcd\xff\xfe")])[index], SIGNATURES, limits)

    def image(data):
        return _formats("images", [b64(data)])[index]

    assert read_predict(image(_png(10, 10)), SIGNATURES, limits, ("image",))
    with pytest.raises(TooLarge, match=r"image of 11 x 10 pixels; at most 100 pixels \(--max-image-pixels\)"):
        read_predict(image(_png(11, 10)), SIGNATURES, limits, ("image",))
    assert read_predict(image(_png(1, 1) + bytes(1000 - 29)), SIGNATURES, limits, ("image",))
    with pytest.raises(TooLarge, match=r"image of 1001 bytes; at most 1000 \(--max-image-bytes\)"):
        read_predict(image(_png(1, 1) + bytes(1001 - 29)), SIGNATURES, limits, ("image",))


def test_every_value_of_a_columnar_request_counts_settings_included_before_any_is_read():
    limits = Limits(max_instances=3)
    body = {"signature_name": "with_settings", "inputs": {"text": ["a"], "beam_width": [1] * 3, "length_penalty": [0]}}
    assert read_predict(body, SIGNATURES, limits)[1]["beam_width"] == [1, 1, 1]
    flood = {"signature_name": "with_settings",
             "inputs": {"text": ["a"], "beam_width": [1] * 4, "length_penalty": [0]}}
    with pytest.raises(TooLarge, match=r"^inputs.beam_width: 4 values; at most 3 per request \(--max-instances\)$"):
        read_predict(flood, SIGNATURES, limits)
    # A million values are refused before one of them is checked.
    started = time.perf_counter()
    millions = {"signature_name": "with_settings",
                "inputs": {"text": ["a"], "beam_width": [None] * 1_000_000, "length_penalty": [0]}}
    with pytest.raises(TooLarge, match="1000000 values"):
        read_predict(millions, SIGNATURES, Limits())
    with pytest.raises(TooLarge, match="1000000 instances"):
        read_predict({"instances": [None] * 1_000_000}, SIGNATURES, Limits())
    assert time.perf_counter() - started < 0.5


def test_a_body_is_bounded_before_it_is_parsed():
    limits = Limits(max_instances=2)
    bound = (2 + 1) * (2 * 3 + 2) + 16  # instances of the widest signature's 3 inputs, {"b64"} objects counting
    widest = max(len(sig["inputs"]) for sig in SIGNATURES.values())
    assert widest == 3
    at_bound = b"[" + b"1," * (bound - 1) + b"1]"  # one bracket and bound - 1 commas
    assert len(parse_json(at_bound, limits, 3)) == bound
    with pytest.raises(TooLarge, match=f"more than {bound} JSON values"):
        parse_json(b"[" + b"1," * bound + b"1]", limits, 3)
    # Commas and brackets inside strings are text, not values.
    assert parse_json(json.dumps({"instances": ["[,{" * 10_000]}).encode(), limits, 3)
    with pytest.raises(TooLarge):
        parse_predict(b"[" + b"[]," * 5_000_000 + b"[]]", SIGNATURES, Limits())
    with pytest.raises(BadRequest, match="malformed JSON: nested too deeply"):
        parse_json(b"[" * 100_000 + b"]" * 100_000, Limits(max_instances=100_000), 1)
    with pytest.raises(BadRequest, match="malformed JSON"):
        parse_json(b'{"instances": ', limits, 1)
    with pytest.raises(BadRequest, match="malformed JSON"):
        parse_json(b"\xff\xfe", limits, 1)


def test_the_worker_process_protocol_round_trips_values_and_errors():
    requests = [
        ("predict", json.dumps({"signature_name": "with_settings", "instances": [
            {"text": "é \ud800", "beam_width": 2, "length_penalty": 0.5}]}).encode(), ()),
        ("predict", json.dumps({"signature_name": "images", "inputs": [b64(_png(2, 2))]}).encode(), ("image",)),
        ("predict", b'{"instances": []}', ()),
        ("predict", json.dumps({"instances": ["x" * 20_000]}).encode(), ()),
        ("attention", json.dumps({"instances": ["a", "b"]}).encode(), ()),
    ]
    signatures = {**SIGNATURES, "attention": {"inputs": {"text": ("string", [None])}}}
    answers = _served_frames(requests, signatures)
    first = json.loads(answers.readline())
    assert first["columns"] == {"text": [{"text": 0}], "beam_width": [2], "length_penalty": [0.5]}
    assert answers.read(first["blobs"][0]).decode("utf-8", "surrogatepass") == "é \ud800"
    second = json.loads(answers.readline())
    assert second["row_format"] is False and answers.read(second["blobs"][0]) == _png(2, 2)
    assert json.loads(answers.readline()) == {"error": "bad_request", "message": "instances: expected a non-empty list"}
    assert json.loads(answers.readline())["error"] == "too_large"
    fifth = json.loads(answers.readline())
    assert fifth["signature"] == "attention" and fifth["columns"] == {"text": [{"text": 0}, {"text": 1}]}
    assert answers.read() == b"ab"
    # The inline path reads the same values.
    inline = parse("predict", requests[0][1], signatures, Limits(), ())
    assert inline == ("with_settings", {"text": ["é \ud800"], "beam_width": [2], "length_penalty": [0.5]}, True)


def test_outputs_are_written_as_tensorflow_serving_writes_them():
    outputs = {"translation": np.array([b"a", "é".encode()]), "scores": np.array([[0.5, 0.25], [1.0, 2.0]], np.float32)}
    assert to_json(outputs, 2, True) == {"predictions": [
        {"translation": "a", "scores": [0.5, 0.25]}, {"translation": "é", "scores": [1.0, 2.0]}]}
    assert to_json(outputs, 2, False) == {"outputs": {"translation": ["a", "é"], "scores": [[0.5, 0.25], [1.0, 2.0]]}}
    # One output: bare values, per row or as the column.
    assert to_json({"label": np.array([b"pos", b"neg"])}, 2, True) == {"predictions": ["pos", "neg"]}
    assert to_json({"label": np.array([b"pos", b"neg"])}, 2, False) == {"outputs": ["pos", "neg"]}


def test_a_sampling_request_leaves_out_the_export_s_beam_preferences_in_both_formats():
    inputs = {"text": ("string", [None]), "num_samples": ("int32", [None]), "no_repeat_ngram_size": ("int32", [None]),
              "beam_width": ("int32", [None])}
    own = {"num_samples": 0, "no_repeat_ngram_size": 3, "beam_width": 5}
    signatures = {"with_settings": {"inputs": inputs, "defaults": own}}

    def columns(body):
        return read_predict({"signature_name": "with_settings", **body}, signatures, Limits())[1]

    rows = columns({"instances": [{"text": "a"}, {"text": "b", "num_samples": 2}, {"text": "c", "num_samples": 2,
                                                                                    "no_repeat_ngram_size": 4}]})
    assert rows == {"text": ["a", "b", "c"], "num_samples": [0, 2, 2], "no_repeat_ngram_size": [3, 0, 4],
                    "beam_width": [5, 5, 5]}
    assert columns({"inputs": {"text": ["a", "b"], "num_samples": [2, 3]}})["no_repeat_ngram_size"] == [0]
    assert columns({"inputs": {"text": ["a"], "num_samples": 2}})["no_repeat_ngram_size"] == [0]
    # Rows that do not all sample keep the export's own, for the checks to name where it applies.
    assert columns({"inputs": {"text": ["a", "b"], "num_samples": [0, 3]}})["no_repeat_ngram_size"] == [3]
    assert columns({"inputs": {"text": ["a"]}})["no_repeat_ngram_size"] == [3]


def _served_frames(requests, signatures):
    """The worker's answers (a file to read lines of) to `(kind, raw body, binary inputs)` frames, in order."""
    frames = io.BytesIO()
    for kind, raw, binary in requests:
        header = {"kind": kind, "signatures": signatures, "limits": Limits().as_json(), "binary": list(binary),
                  "size": len(raw)}
        frames.write(json.dumps(header).encode() + b"\n" + raw)
    frames.seek(0)
    answers = io.BytesIO()
    serve_frames(frames, answers)
    answers.seek(0)
    return answers
