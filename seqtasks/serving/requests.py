"""TensorFlow Serving's REST predict format: JSON in, input columns out; outputs back to JSON.

A request names a signature (`signature_name`, default `serving_default`)
and gives its inputs in the row format (`instances`: a list, one entry per
example; an object of every input for a signature of several inputs) or the
columnar format (`inputs`: an object of lists, or the one input's list),
answered with `predictions` or `outputs`. Strings are JSON strings; binary
values are `{"b64": "..."}`. Every mistake is a `BadRequest` that names the
field.
"""

import base64
import binascii
import math

from seqtasks.serving.limits import TooLarge


class BadRequest(Exception):
    """A malformed request: answered 400 with this message."""


def read_predict(body, signatures, limits):
    """`(signature name, {input: list of values}, row format?)` of a parsed JSON predict request.

    `signatures` maps names to `{"inputs": {name: (dtype, shape)}, ...}`
    (`SeqtasksModel.signatures()`). Raises `BadRequest`, or `TooLarge` for
    a request over `limits`.
    """
    if not isinstance(body, dict):
        raise BadRequest("expected a JSON object with 'instances' or 'inputs'")
    name = body.get("signature_name", "serving_default")
    if not isinstance(name, str):
        raise BadRequest("signature_name: expected a string")
    if name not in signatures:
        raise BadRequest(f"signature_name: no signature {name!r}; this model has {sorted(signatures)}")
    unknown = sorted(set(body) - {"signature_name", "instances", "inputs"})
    if unknown:
        raise BadRequest(f"{unknown[0]}: unknown field; expected 'signature_name' and 'instances' or 'inputs'")
    if ("instances" in body) == ("inputs" in body):
        raise BadRequest("expected exactly one of 'instances' (row format) or 'inputs' (columnar format)")
    specs = signatures[name]["inputs"]
    if "instances" in body:
        columns = _rows_to_columns(body["instances"], specs)
    else:
        columns = _columns(body["inputs"], specs)
    for key, values in columns.items():
        columns[key] = [_value(f"{key}[{index}]", value, specs[key][0]) for index, value in enumerate(values)]
    _check_limits(columns, specs, limits)
    return name, columns, "instances" in body


def _rows_to_columns(instances, specs):
    if not isinstance(instances, list) or not instances:
        raise BadRequest("instances: expected a non-empty list")
    names = sorted(specs)
    if len(names) == 1 and not all(isinstance(row, dict) and set(row) == set(names) for row in instances):
        return {names[0]: list(instances)}
    columns = {key: [] for key in names}
    for index, row in enumerate(instances):
        if not isinstance(row, dict):
            raise BadRequest(f"instances[{index}]: expected an object with {names}")
        missing = sorted(set(names) - set(row))
        if missing:
            raise BadRequest(f"instances[{index}]: missing field {missing[0]!r}")
        extra = sorted(set(row) - set(names))
        if extra:
            raise BadRequest(f"instances[{index}]: unknown field {extra[0]!r}; expected {names}")
        for key in names:
            columns[key].append(row[key])
    return columns


def _columns(inputs, specs):
    names = sorted(specs)
    if len(names) == 1 and isinstance(inputs, list):
        inputs = {names[0]: inputs}
    if not isinstance(inputs, dict):
        raise BadRequest(f"inputs: expected an object with {names}")
    missing = sorted(set(names) - set(inputs))
    if missing:
        raise BadRequest(f"inputs: missing field {missing[0]!r}")
    extra = sorted(set(inputs) - set(names))
    if extra:
        raise BadRequest(f"inputs: unknown field {extra[0]!r}; expected {names}")
    columns = {}
    for key in names:
        value = inputs[key]
        # Every input of a seqtasks signature has one axis: a scalar is a list of one.
        columns[key] = value if isinstance(value, list) else [value]
        if not columns[key]:
            raise BadRequest(f"inputs.{key}: expected a non-empty list")
    return columns


def _value(where, value, dtype):
    if dtype == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str):
            try:
                return base64.b64decode(value["b64"], validate=True)
            except (binascii.Error, ValueError):
                raise BadRequest(f"{where}: 'b64' is not valid base64") from None
        raise BadRequest(f"{where}: expected a string or {{\"b64\": ...}}")
    if dtype.startswith("int"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadRequest(f"{where}: expected an integer")
        if not -(2**31) <= value < 2**31:
            raise BadRequest(f"{where}: {value} is out of the int32 range")
        return value
    if dtype.startswith("float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise BadRequest(f"{where}: expected a number")
        return float(value)
    raise BadRequest(f"{where}: inputs of type {dtype} are not supported")


def _check_limits(columns, specs, limits):
    for key, values in columns.items():
        if specs[key][0] != "string":
            continue
        limits.check_instances(len(values))
        for index, value in enumerate(values):
            if isinstance(value, bytes) and key == "image":
                limits.check_image(index, value)
            elif isinstance(value, str):
                limits.check_text(index, value)
            else:
                raise BadRequest(f"{key}[{index}]: expected text; got {{\"b64\": ...}}")


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


__all__ = ["BadRequest", "TooLarge", "read_predict", "to_json"]
