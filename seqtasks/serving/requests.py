"""TensorFlow Serving's REST predict format: JSON in, input columns out; outputs back to JSON.

A request names a signature (`signature_name`; absent or `""` is
`serving_default`) and gives its inputs in the row format (`instances`: a
list, one entry per example; an object of every input for a signature of
several inputs) or the columnar format (`inputs`: an object of lists, or the
one input's list), answered with `predictions` or `outputs`. Strings are JSON
strings or `{"b64": "..."}`; a binary input (an image) takes only
`{"b64": ...}`: the server never treats a request's string as a file path.
Every mistake is a `BadRequest` that names the field; every size is checked
before the work it bounds.
"""

import base64
import binascii
import json
import math
import re

from seqtasks.data.image_headers import BadImage
from seqtasks.decoding.settings import SAMPLING_SWITCH, filled, samples
from seqtasks.serving.limits import TooLarge

DEFAULT_SIGNATURE = "serving_default"
# Longest field name or value an error message repeats.
SHOWN_CHARACTERS = 40
# A string literal of JSON, escapes included, written so the regular expression never backtracks.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# The smallest magnitude each float type rounds to infinity (its largest value and half a step more), as integers so
# a comparison is exact: a number of at least this is out of the type's range.
_FLOAT_OVERFLOW = {"float16": 2**16 - 2**4, "float32": 2**128 - 2**103, "float64": 2**1024 - 2**970}
# Longest JSON integer read as a number: one longer is beyond every input type's range (float64's largest has 309
# digits), and Python would refuse to read one of over 4300 digits (`sys.get_int_max_str_digits`).
LONGEST_INTEGER = 320


class BadRequest(Exception):
    """A malformed request: answered 400 with this message."""


class _LongInteger:
    """A JSON integer of more than `LONGEST_INTEGER` characters, kept as its text: out of every input type's range."""

    def __init__(self, text):
        self.text = text

    def __str__(self):
        return self.text


def _integer(text):
    """`json.loads`' reading of an integer literal: an `int`, or a `_LongInteger` when it is too long to be one."""
    return int(text) if len(text) <= LONGEST_INTEGER else _LongInteger(text)


def shown(name):
    """`name` as an error message repeats it: quoted, and cut to `SHOWN_CHARACTERS`."""
    text = str(name)
    return repr(text) if len(text) <= SHOWN_CHARACTERS else repr(text[:SHOWN_CHARACTERS]) + "..."


def parse_predict(raw, signatures, limits, binary_inputs=()):
    """`read_predict` of a request's raw body: bounded, then parsed, then read (see `parse_json`)."""
    widest = max(len(signature["inputs"]) for signature in signatures.values())
    return read_predict(parse_json(raw, limits, widest), signatures, limits, binary_inputs)


def parse_attention(raw, signature, limits, binary_inputs=()):
    """`(signature, columns)` of an `:attention` request: `{"instances": [...]}` of the example input only."""
    body = parse_json(raw, limits, len(signature["inputs"]))
    if not isinstance(body, dict) or set(body) != {"instances"}:
        raise BadRequest("expected a JSON object with 'instances' only")
    name, columns, _ = read_predict(
        {"signature_name": "attention", "instances": body["instances"]}, {"attention": signature}, limits, binary_inputs
    )
    return name, columns


def parse_json(raw, limits, inputs=1):
    """The JSON value of a request body, refused before parsing if it holds more values than a request may.

    A request has at most `limits.max_instances` examples of `inputs` values
    each (a `{"b64": ...}` object counting twice), so a body of more commas,
    brackets and braces outside its strings is refused (413) before the
    parser builds millions of objects from it. Nesting too deep for the
    parser is a `BadRequest`. An integer too long for any input type is
    kept as its text (`_LongInteger`) rather than read (Python refuses one
    of over 4300 digits), so that the input it is given to refuses it by
    name.
    """
    bound = (limits.max_instances + 1) * (2 * inputs + 2) + 16
    if _structure(raw, bound) > bound:
        raise TooLarge(
            f"a request of more than {bound} JSON values; at most {limits.max_instances} instances (--max-instances) "
            f"of {inputs} inputs"
        )
    try:
        return json.loads(raw, parse_int=_integer)
    except RecursionError:
        raise BadRequest("malformed JSON: nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as failure:
        raise BadRequest(f"malformed JSON: {str(failure)[:200]}") from None


def _structure(raw, bound):
    """Commas, brackets and braces of `raw` outside its string literals (or a count at most `bound`)."""
    count = raw.count(b",") + raw.count(b"[") + raw.count(b"{")
    if count <= bound:  # those inside strings too: already few enough
        return count
    return sum(_STRING.sub(b"", raw).count(symbol) for symbol in (b",", b"[", b"{"))


def read_predict(body, signatures, limits, binary_inputs=()):
    """`(signature name, {input: list of values}, row format?)` of a parsed JSON predict request.

    `signatures` maps names to `{"inputs": {name: (dtype, shape)}, ...}`
    (`SeqtasksModel.signatures()`), and may give `"defaults": {name: value}`
    for inputs a request may leave out (the decoding settings); `binary_inputs` names the inputs that
    take only `{"b64": ...}` (images). Raises `BadRequest`, or `TooLarge`
    for a request over `limits`; sizes are checked before the values are.
    """
    if not isinstance(body, dict):
        raise BadRequest("expected a JSON object with 'instances' or 'inputs'")
    name = body.get("signature_name", DEFAULT_SIGNATURE)
    if not isinstance(name, str):
        raise BadRequest("signature_name: expected a string")
    name = name or DEFAULT_SIGNATURE  # TensorFlow Serving reads "" as the default signature
    if name not in signatures:
        raise BadRequest(f"signature_name: no signature {shown(name)}; this model has {sorted(signatures)}")
    unknown = sorted(set(body) - {"signature_name", "instances", "inputs"})
    if unknown:
        raise BadRequest(f"{shown(unknown[0])}: unknown field; expected 'signature_name' and 'instances' or 'inputs'")
    if ("instances" in body) == ("inputs" in body):
        raise BadRequest("expected exactly one of 'instances' (row format) or 'inputs' (columnar format)")
    specs = signatures[name]["inputs"]
    defaults = signatures[name].get("defaults", {})
    if "instances" in body:
        columns = _rows_to_columns(body["instances"], specs, limits, defaults)
    else:
        columns = _columns(body["inputs"], specs, limits, defaults)
    for key, values in columns.items():
        binary = key in binary_inputs
        columns[key] = [_value(f"{key}[{index}]", value, specs[key][0], binary) for index, value in enumerate(values)]
    _check_values(columns, specs, limits, binary_inputs)
    return name, columns, "instances" in body


def _rows_to_columns(instances, specs, limits, defaults=None):
    if not isinstance(instances, list) or not instances:
        raise BadRequest("instances: expected a non-empty list")
    limits.check_instances(len(instances))
    names = sorted(specs)
    defaults = defaults or {}
    if len(names) == 1 and not all(isinstance(row, dict) and set(row) == set(names) for row in instances):
        return {names[0]: list(instances)}
    columns = {key: [] for key in names}
    for index, row in enumerate(instances):
        _check_fields(f"instances[{index}]", row, names, defaults)
        own = filled({key: row[key] for key in defaults if key in row}, defaults)
        for key in names:
            columns[key].append(row[key] if key in row else own[key])
    return columns


def _check_fields(where, value, names, defaults=()):
    """Raises `BadRequest` unless `value` is an object of the fields `names`: all but those with `defaults`."""
    if not isinstance(value, dict):
        raise BadRequest(f"{where}: expected an object with {names}")
    missing = sorted(set(names) - set(value) - set(defaults))
    if missing:
        raise BadRequest(f"{where}: missing field {missing[0]!r}")
    extra = sorted(set(value) - set(names))
    if extra:
        raise BadRequest(f"{where}: unknown field {shown(extra[0])}; expected {names}")


def _columns(inputs, specs, limits, defaults=None):
    names = sorted(specs)
    defaults = defaults or {}
    if len(names) == 1 and isinstance(inputs, list):
        inputs = {names[0]: inputs}
    _check_fields("inputs", inputs, names, defaults)
    columns = {}
    # Left out: the export's own values (`filled`), those of a call that samples where every row samples.
    switches = inputs.get(SAMPLING_SWITCH) if SAMPLING_SWITCH in defaults else None
    switches = switches if isinstance(switches, list) else [switches]
    own = filled({SAMPLING_SWITCH: 1}, defaults) if switches and all(map(samples, switches)) else defaults
    for key in names:
        value = inputs[key] if key in inputs else own[key]
        # Every input of a seqtasks signature has one axis: a scalar is a list of one.
        columns[key] = value if isinstance(value, list) else [value]
        if not columns[key]:
            raise BadRequest(f"inputs.{key}: expected a non-empty list")
        limits.check_instances(len(columns[key]), None if len(names) == 1 else f"inputs.{key}")
    return columns


def _value(where, value, dtype, binary=False):
    if dtype == "string":
        if isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str):
            try:
                return base64.b64decode(value["b64"], validate=True)
            except (binascii.Error, ValueError):
                raise BadRequest(f"{where}: 'b64' is not valid base64") from None
        if binary:
            raise BadRequest(
                f"{where}: expected {{\"b64\": ...}}, the image's bytes in base64 (a server never reads a file path)"
            )
        if isinstance(value, str):
            return value
        raise BadRequest(f"{where}: expected a string or {{\"b64\": ...}}")
    if isinstance(value, _LongInteger) and (dtype.startswith("int") or dtype.startswith("float")):
        raise BadRequest(f"{where}: {shown(value)} is out of the {dtype} range")
    if dtype.startswith("int"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadRequest(f"{where}: expected an integer")
        bits = 64 if dtype == "int64" else 32
        if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise BadRequest(f"{where}: {shown(value)} is out of the {dtype} range")
        return value
    if dtype.startswith("float"):
        # Infinity, NaN and a float literal beyond float64 (1e400, which JSON reads as infinity) are no numbers.
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                isinstance(value, float) and not math.isfinite(value)):
            raise BadRequest(f"{where}: expected a number")
        # An integer is compared before float() reads it (which overflows past float64's range), then the float
        # as the model gets it (float32 rounds it again).
        limit = _FLOAT_OVERFLOW.get(dtype, _FLOAT_OVERFLOW["float64"])
        if abs(value) >= _FLOAT_OVERFLOW["float64"] or abs(float(value)) >= limit:
            raise BadRequest(f"{where}: {shown(value)} is out of the {dtype} range")
        return float(value)
    raise BadRequest(f"{where}: inputs of type {dtype} are not supported")


def _check_values(columns, specs, limits, binary_inputs):
    for key, values in columns.items():
        if specs[key][0] != "string":
            continue
        for index, value in enumerate(values):
            if key in binary_inputs:
                try:
                    limits.check_image(index, value)
                except BadImage as error:
                    raise BadRequest(f"{key}[{index}]: {error}") from None
            else:
                limits.check_text(index, value)


def to_json(outputs, count, row_format):
    """Outputs (NumPy arrays with `count` rows) as TensorFlow Serving answers them: `predictions` or `outputs`.

    One output is given bare (a value per row, or the column); several as
    objects by output name. Strings are decoded as UTF-8 (invalid bytes
    replaced).
    """
    plain = {key: _plain(value) for key, value in outputs.items()}
    if row_format:
        rows = [{key: value[index] for key, value in plain.items()} for index in range(count)]
        if len(plain) == 1:
            rows = [next(iter(row.values())) for row in rows]
        return {"predictions": rows}
    return {"outputs": next(iter(plain.values())) if len(plain) == 1 else plain}


def _plain(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


__all__ = ["BadRequest", "TooLarge", "parse_attention", "parse_json", "parse_predict", "read_predict", "to_json"]
