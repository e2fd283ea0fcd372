"""A body large enough for the worker process is held to every rule a small one is, with the same answers.

`seqtasks serve` parses a body of more than `parsing.INLINE_BYTES` in its
worker process (`seqtasks.serving.parse_worker`), and a smaller one in place.
Each rule below (images as `{"b64": ...}` only, every limit, unknown and
missing fields, types, the JSON bound) is checked on both paths: the same
request is sent small, and padded with leading whitespace past the threshold
(JSON reads it the same). The fast tests run the worker's loop in this
process, through the parser's own exchange; the slow ones start the worker
process behind a real server, and with the tiny translation export check
the decoding settings' bounds and the n-best lists, which the model checks.
"""

import asyncio
import base64
import io
import json
import struct

import pytest

from seqtasks.serving.limits import Limits, TooLarge
from seqtasks.serving.parsing import INLINE_BYTES, MAX_ANSWER_LINE, Parser, parse, serve_frames
from seqtasks.serving.requests import BadRequest, shown
from tests.support.serving_support import FakeModel, fake_served, in_process_server, request, tiny_translation_export

LIMITS = Limits(max_instances=4, max_text_characters=50, max_image_bytes=2000, max_image_pixels=100)
SETTINGS = {"beam_width": 2, "n_best": 1, "max_length": 5, "length_penalty": 0.0}
SETTING_NAMES = "['beam_width', 'length_penalty', 'max_length', 'n_best', 'text']"
NO_PATHS = 'image[0]: expected {"b64": ...}, the image\'s bytes in base64 (a server never reads a file path)'


def b64(data):
    return {"b64": base64.b64encode(data).decode()}


def _png(width, height, size=None):
    header = b"\x89PNG\r\n\x1a\n" + struct.pack(">I4sII", 13, b"IHDR", width, height) + bytes(5)
    return header + bytes((size or len(header)) - len(header))


def _with_settings(**changed):
    return {"signature_name": "with_settings", "instances": [{"text": "a", **SETTINGS, **changed}]}


# Numbers of 400 digits, and of 5000 (more than Python reads as an int), as a JSON body gives them.
HUGE, LONGER = "9" * 400, "9" * 5000


def _raw_settings(**literals):
    """The raw body of a `with_settings` instance whose settings are these JSON literals (the others `SETTINGS`)."""
    settings = {key: json.dumps(value) for key, value in SETTINGS.items()} | literals
    return ('{"signature_name": "with_settings", "instances": [{"text": "a", '
            + ", ".join(f'"{key}": {value}' for key, value in settings.items()) + "}]}").encode()


def _out_of_range(field, literal, dtype):
    return f"{field}[0]: {shown(literal)} is out of the {dtype} range"


# (model, endpoint, body, status, answer): the model is `tiny` (text) or `captioner` (images); the answer is the
# error message, or the predictions of a request every rule lets through.
RULES = [
    ("tiny", ":predict", {"instances": ["a", b64("é".encode())]}, 200, ["A", "É"]),
    ("tiny", ":predict", {"signature_name": "with_settings", "inputs": {"text": ["a", "b"], **SETTINGS}}, 200,
     None),
    ("tiny", ":predict", {"instances": list("abcde")}, 413, "5 instances; at most 4 per request (--max-instances)"),
    ("tiny", ":predict", {"inputs": list("abcde")}, 413, "5 instances; at most 4 per request (--max-instances)"),
    ("tiny", ":predict", {"signature_name": "with_settings", "inputs": {"text": ["a"], **SETTINGS,
                                                                       "beam_width": [2] * 5}},
     413, "inputs.beam_width: 5 values; at most 4 per request (--max-instances)"),
    ("tiny", ":predict", {"instances": ["x" * 51]}, 413, "instance 0: 51 characters; at most 50 (--max-text-characters)"),
    ("tiny", ":predict", {"inputs": ["ok", b64("é".encode() * 51)]}, 413,
     "instance 1: 51 characters; at most 50 (--max-text-characters)"),
    ("tiny", ":attention", {"instances": ["x" * 51]}, 413, "instance 0: 51 characters; at most 50 (--max-text-characters)"),
    ("tiny", ":attention", {"instances": list("abcde")}, 413, "5 instances; at most 4 per request (--max-instances)"),
    ("tiny", ":attention", {"instances": ["a"], "signature_name": "x"}, 400, "expected a JSON object with 'instances' only"),
    ("tiny", ":predict", {"instances": ["a"], "extra": 1}, 400,
     "'extra': unknown field; expected 'signature_name' and 'instances' or 'inputs'"),
    ("tiny", ":predict", _with_settings(n=1), 400, f"instances[0]: unknown field 'n'; expected {SETTING_NAMES}"),
    ("tiny", ":predict", {"signature_name": "with_settings", "inputs": {"text": ["a"], **SETTINGS, "seed": [1]}}, 400,
     f"inputs: unknown field 'seed'; expected {SETTING_NAMES}"),
    ("tiny", ":predict", {"signature_name": "with_settings", "instances": [{"text": "a", "beam_width": 2}]}, 400,
     "instances[0]: missing field 'length_penalty'"),
    ("tiny", ":predict", _with_settings(beam_width=True), 400, "beam_width[0]: expected an integer"),
    ("tiny", ":predict", _with_settings(n_best=2**40), 400, "n_best[0]: '1099511627776' is out of the int32 range"),
    ("tiny", ":predict", _with_settings(length_penalty="x"), 400, "length_penalty[0]: expected a number"),
    ("tiny", ":predict", (b'{"signature_name": "with_settings", "inputs": {"text": ["a"], "beam_width": [2], '
                          b'"n_best": [1], "max_length": [5], "length_penalty": [1e999]}}'), 400,
     "length_penalty[0]: expected a number"),
    # A number out of its setting's range, of any size (a float setting of 310 digits and more answered 500 inline
    # and killed the worker process: 503).
    ("tiny", ":predict", _raw_settings(beam_width=HUGE), 400, _out_of_range("beam_width", HUGE, "int32")),
    ("tiny", ":predict", _raw_settings(beam_width="-" + HUGE), 400, _out_of_range("beam_width", "-" + HUGE, "int32")),
    ("tiny", ":predict", _raw_settings(n_best=LONGER), 400, _out_of_range("n_best", LONGER, "int32")),
    ("tiny", ":predict", _raw_settings(length_penalty=HUGE), 400, _out_of_range("length_penalty", HUGE, "float32")),
    ("tiny", ":predict", _raw_settings(length_penalty="-" + HUGE), 400,
     _out_of_range("length_penalty", "-" + HUGE, "float32")),
    ("tiny", ":predict", _raw_settings(length_penalty="1" + "0" * 309), 400,
     _out_of_range("length_penalty", "1" + "0" * 309, "float32")),
    ("tiny", ":predict", _raw_settings(length_penalty=LONGER), 400,
     _out_of_range("length_penalty", LONGER, "float32")),
    ("tiny", ":predict", _raw_settings(length_penalty="1e39"), 400,
     "length_penalty[0]: '1e+39' is out of the float32 range"),
    ("tiny", ":predict", _raw_settings(length_penalty="-1e400"), 400, "length_penalty[0]: expected a number"),
    ("tiny", ":predict", {"signature_name": "with_settings", "inputs": {"text": ["a"], **SETTINGS,
                                                                       "beam_width": [int(HUGE)]}},
     400, _out_of_range("beam_width", HUGE, "int32")),
    ("tiny", ":predict", _raw_settings(length_penalty="3.4028235e38"), 200, None),
    ("tiny", ":predict", {"signature_name": "nope", "instances": ["a"]}, 400,
     "signature_name: no signature 'nope'; this model has ['attention', 'serving_default', 'with_settings']"),
    ("tiny", ":predict", {"instances": [{"b64": "%%%"}]}, 400, "text[0]: 'b64' is not valid base64"),
    ("tiny", ":predict", {"instances": [None]}, 400, 'text[0]: expected a string or {"b64": ...}'),
    ("tiny", ":predict", {"instances": "a"}, 400, "instances: expected a non-empty list"),
    ("tiny", ":predict", ["a"], 400, "expected a JSON object with 'instances' or 'inputs'"),
    ("tiny", ":predict", b"[" + b"[]," * 200 + b"[]]", 413,
     "a request of more than 76 JSON values; at most 4 instances (--max-instances) of 5 inputs"),
    ("captioner", ":predict", {"instances": [b64(_png(10, 10))]}, 200, [str(len(_png(10, 10)))]),
    ("captioner", ":predict", {"instances": ["/etc/passwd"]}, 400, NO_PATHS),
    ("captioner", ":predict", {"instances": [{"image": "/etc/passwd"}]}, 400, NO_PATHS),
    ("captioner", ":predict", {"inputs": {"image": ["/etc/hostname"]}}, 400, NO_PATHS),
    ("captioner", ":predict", {"signature_name": "with_settings", "instances": [{"image": "/etc/passwd", **SETTINGS}]},
     400, NO_PATHS),
    ("captioner", ":attention", {"instances": ["/etc/passwd"]}, 400, NO_PATHS),
    ("captioner", ":predict", {"instances": [b64(b"%PDF-1.4")]}, 400,
     "image[0]: not a decodable image (JPEG, PNG or BMP expected)"),
    ("captioner", ":predict", {"instances": [b64(_png(11, 10))]}, 413,
     "instance 0: image of 11 x 10 pixels; at most 100 pixels (--max-image-pixels)"),
    ("captioner", ":predict", {"instances": [b64(_png(1, 1, 2001))]}, 413,
     "instance 0: image of 2001 bytes; at most 2000 (--max-image-bytes)"),
]


def _raw(body):
    return body if isinstance(body, bytes) else json.dumps(body).encode()


def _padded(raw):
    """`raw` with leading whitespace to just past `INLINE_BYTES`: the same JSON, parsed in the worker."""
    return b" " * (INLINE_BYTES + 1) + raw


def _rule_id(rule):
    model, endpoint, _, status, answer = rule
    return f"{model}{endpoint}-{status}-{str(answer)[:40]}"


def _parse_arguments(model_name, endpoint):
    """`(kind, signatures, binary inputs)` as the server passes them to `Parser.run` for this endpoint."""
    model = FakeModel("captioning", binary=True) if model_name == "captioner" else FakeModel()
    signatures, binary = model.signatures(), (model.input_name,) if model.binary_input else ()
    if endpoint == ":attention":
        return "attention", {"attention": {"inputs": signatures["attention"]["inputs"]}}, binary
    return "predict", signatures, binary


def _outcome(call):
    try:
        return "parsed", call()
    except (BadRequest, TooLarge) as error:
        return type(error).__name__, str(error)


class _WorkerInThisProcess:
    """Stands for the worker process behind `Parser`: what is written to its stdin is answered by the worker's
    loop (`serve_frames`) when the parser drains it."""

    def __init__(self):
        self.stdin = self
        self.stdout = asyncio.StreamReader(limit=MAX_ANSWER_LINE)
        self.returncode = None
        self.frames = 0
        self._written = bytearray()

    def write(self, data):
        self._written += data

    async def drain(self):
        answers = io.BytesIO()
        serve_frames(io.BytesIO(bytes(self._written)), answers)
        self.frames += 1
        self._written.clear()
        self.stdout.feed_data(answers.getvalue())


def _through_the_worker(kind, raw, signatures, binary):
    async def exchange():
        parser, worker = Parser(), _WorkerInThisProcess()
        await parser.start()

        async def started():
            return worker

        parser._started = started
        try:
            return await parser.run(kind, raw, signatures, LIMITS, binary)
        finally:
            assert worker.frames == 1  # it went to the worker, once

    return _outcome(lambda: asyncio.run(exchange()))


@pytest.mark.parametrize("rule", RULES, ids=_rule_id)
def test_the_worker_s_path_reads_a_request_as_the_inline_path_does(rule):
    model, endpoint, body, status, answer = rule
    kind, signatures, binary = _parse_arguments(model, endpoint)
    raw = _raw(body)
    small = _outcome(lambda: parse(kind, raw, signatures, LIMITS, binary))
    inline = _outcome(lambda: parse(kind, _padded(raw), signatures, LIMITS, binary))
    worker = _through_the_worker(kind, _padded(raw), signatures, binary)
    assert small == inline == worker
    if status == 200:
        assert small[0] == "parsed"
    else:
        assert small == ("TooLarge" if status == 413 else "BadRequest", answer)


# The decoding settings of a translation export, two of them: an int and a float.
DECODING = {"with_settings": {"inputs": {"text": ("string", [None]), "beam_width": ("int32", [None]),
                                         "temperature": ("float32", [None])}}}


@pytest.mark.parametrize("field, literal, message", [
    ("temperature", HUGE, _out_of_range("temperature", HUGE, "float32")),
    ("temperature", "-" + HUGE, _out_of_range("temperature", "-" + HUGE, "float32")),
    ("temperature", LONGER, _out_of_range("temperature", LONGER, "float32")),
    ("temperature", "1e400", "temperature[0]: expected a number"),
    ("temperature", "-1e400", "temperature[0]: expected a number"),
    ("beam_width", HUGE, _out_of_range("beam_width", HUGE, "int32")),
    ("beam_width", "-" + HUGE, _out_of_range("beam_width", "-" + HUGE, "int32")),
    ("beam_width", "1e400", "beam_width[0]: expected an integer"),
])
def test_a_huge_setting_is_the_same_bad_request_inline_and_in_the_worker(field, literal, message):
    settings = {"beam_width": "2", "temperature": "1.0", field: literal}
    raw = ('{"signature_name": "with_settings", "instances": [{"text": "a", '
           + ", ".join(f'"{key}": {value}' for key, value in settings.items()) + "}]}").encode()
    small = _outcome(lambda: parse("predict", raw, DECODING, LIMITS, ()))
    inline = _outcome(lambda: parse("predict", _padded(raw), DECODING, LIMITS, ()))
    worker = _through_the_worker("predict", _padded(raw), DECODING, ())
    assert small == inline == worker == ("BadRequest", message)


@pytest.fixture(scope="module")
def fake_server():
    served = fake_served(("tiny", FakeModel()), ("captioner", FakeModel("captioning", binary=True)))
    with in_process_server(served, limits=LIMITS) as (url, log):
        yield url, log


def _post(url, raw):
    return request("POST", url, raw, {"Content-Type": "application/json"})


@pytest.mark.slow  # the padded bodies start the request-parsing process
@pytest.mark.parametrize("rule", RULES, ids=_rule_id)
def test_a_request_parsed_in_the_worker_process_gets_the_answer_of_the_same_request_parsed_inline(fake_server, rule):
    url, log = fake_server
    model, endpoint, body, status, answer = rule
    raw = _raw(body)
    small, large = _post(f"{url}/v1/models/{model}{endpoint}", raw), _post(f"{url}/v1/models/{model}{endpoint}",
                                                                          _padded(raw))
    assert small == large
    if status == 200:
        assert small[0] == 200 and (answer is None or small[1] == {"predictions": answer})
    else:
        assert small == (status, {"error": answer})
    assert log == []


@pytest.fixture(scope="module")
def tiny_server(run_cache):
    from seqtasks.serving.models import load_served

    base, _ = tiny_translation_export(run_cache)
    with in_process_server(load_served(base)) as (url, _):
        yield url + "/v1/models/tiny:predict"


@pytest.mark.slow  # loads the tiny translation export; the padded bodies start the request-parsing process
@pytest.mark.parametrize("instance, status, message", [
    ({"beam_width": 4, "n_best": 3}, 200, None),
    ({"beam_width": 17}, 400, "beam_width: expected 1..16; got 17"),
    ({"beam_width": 2, "n_best": 3}, 400, "n_best: expected 1..2 (beam_width, or num_samples when sampling); got 3"),
    ({"n_best": 0}, 400, "n_best"),
    ({"max_length": 257}, 400, "max_length"),
    ({"max_length": 0}, 400, "max_length"),
    ({"num_samples": 17}, 400, "num_samples"),
    ({"top_p": 0}, 400, "top_p: expected 0.01..1.0; got 0"),
    ({"seed": 2**32}, 400, "seed: expected 0..4294967295; got 4294967296"),
    ({"seed": 2**63}, 400, "seed[0]: '9223372036854775808' is out of the int64 range"),
    ({"beam_width": 2.5}, 400, "beam_width[0]: expected an integer"),
    ({"unknown": 1}, 400, "instances[0]: unknown field 'unknown'"),
    # Numbers out of their setting's type, of any size: no 500 inline, no worker killed (503).
    ({"temperature": int(HUGE)}, 400, _out_of_range("temperature", HUGE, "float32")),
    ({"temperature": -int(HUGE)}, 400, _out_of_range("temperature", "-" + HUGE, "float32")),
    ({"temperature": 1e39}, 400, "temperature[0]: '1e+39' is out of the float32 range"),
    ({"temperature": float("inf")}, 400, "temperature[0]: expected a number"),
    ({"beam_width": int(HUGE)}, 400, _out_of_range("beam_width", HUGE, "int32")),
    ({"beam_width": -int(HUGE)}, 400, _out_of_range("beam_width", "-" + HUGE, "int32")),
])
def test_the_decoding_settings_bounds_and_n_best_hold_for_a_request_parsed_in_the_worker_process(
        tiny_server, instance, status, message):
    raw = json.dumps({"signature_name": "with_settings", "instances": [{"text": "hola", **instance}] * 2}).encode()
    small, large = _post(tiny_server, raw), _post(tiny_server, _padded(raw))
    assert small == large
    assert small[0] == status, small
    if status == 200:
        assert all(len(row["translations"]) == instance["n_best"] for row in small[1]["predictions"])
    else:
        assert message in small[1]["error"]
