"""What `seqtasks serve` serves: models by name and version, loaded with `seqtasks.load`."""

import re
from dataclasses import dataclass, field
from pathlib import Path

from seqtasks.errors import SeqtasksError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass
class ServedModel:
    """One loaded model: `name` and `version` as TensorFlow Serving would name them, and its signatures."""

    name: str
    version: int
    model: object  # a `seqtasks.inference.api.SeqtasksModel`
    signatures: dict = field(default_factory=dict)
    signature_defs: dict = None  # an export's own SignatureDefs, as TensorFlow Serving's metadata shows them
    batcher: object = None  # `seqtasks.serving.batching.Batcher`, set by the application
    health: object = None  # `seqtasks.serving.health.Health`, set by the application

    @property
    def binary_inputs(self):
        """The inputs a request gives as `{"b64": ...}` only: an image model's example input."""
        return (self.model.input_name,) if self.model.binary_input else ()

    def status(self):
        """`GET /v1/models/NAME`: TensorFlow Serving's version status."""
        return {
            "model_version_status": [
                {"version": str(self.version), "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
            ]
        }

    def metadata(self):
        """`GET /v1/models/NAME/metadata`: the signatures as TensorFlow Serving's `signature_def` JSON."""
        defs = self.signature_defs if self.signature_defs is not None else _signature_defs(self.signatures)
        return {
            "model_spec": {"name": self.name, "signature_name": "", "version": str(self.version)},
            "metadata": {"signature_def": {"signature_def": defs}},
        }


def load_served(path, named=()):
    """The models to serve: `path` (may be None) under its own name, and each `NAME=PATH` of `named`.

    A path is an export's base path (its newest version), a version folder
    or a run folder (served as version 1). Two models of one name, or a name
    TensorFlow Serving would not take, are `SeqtasksError`s.
    """
    import seqtasks

    entries = []
    if path is not None:
        entries.append((None, Path(path)))
    for item in named:
        name, separator, model_path = item.partition("=")
        if not separator or not name or not model_path:
            raise SeqtasksError(f"--model {item}: expected NAME=PATH")
        entries.append((name, Path(model_path)))
    if not entries:
        raise SeqtasksError("nothing to serve: give a PATH or --model NAME=PATH")
    served = {}
    for name, model_path in entries:
        model = seqtasks.load(model_path)
        loaded = Path(model.path)
        is_run = (loaded / "recipe.yaml").is_file()
        name = name or _default_name(model_path, loaded, is_run)
        if not _NAME.match(name):
            raise SeqtasksError(f"{name!r}: a model name is letters, digits, '_', '.' and '-'")
        if name in served:
            raise SeqtasksError(f"two models named {name!r}: name them with --model NAME=PATH")
        version = 1 if is_run or not loaded.name.isdigit() else int(loaded.name)
        defs = None if is_run else _saved_signature_defs(loaded)
        served[name] = ServedModel(name, version, model, _with_defaults(model), defs)
    return served


def _with_defaults(model):
    """The model's signatures; `with_settings` and `with_prefix` get the export's own settings (its recipe's) for the
    inputs a request leaves out."""
    from seqtasks.export.signatures import PREFIX_SIGNATURE, SETTINGS_SIGNATURE

    signatures = model.signatures()
    for name in (SETTINGS_SIGNATURE, PREFIX_SIGNATURE):
        if name in signatures:
            defaults = model.decoding_defaults()
            inputs = signatures[name]["inputs"]
            signatures[name]["defaults"] = {key: defaults[key] for key in inputs if key in defaults}
    return signatures


def _default_name(path, loaded, is_run):
    if is_run:
        return loaded.parent.name  # runs/<name>/<time>
    if loaded.name.isdigit():
        return loaded.parent.name  # saved_models/<name>/<version>
    return loaded.name


_DTYPES = {"string": "DT_STRING", "int32": "DT_INT32", "int64": "DT_INT64", "float32": "DT_FLOAT", "float16": "DT_HALF"}


def _tensor_info(name, dtype, shape):
    dims = [{"size": str(-1 if size is None else size), "name": ""} for size in shape]
    return {"dtype": _DTYPES.get(dtype, "DT_INVALID"), "tensor_shape": {"dim": dims, "unknown_rank": False}, "name": name}


def _signature_defs(signatures):
    """SignatureDefs in TensorFlow Serving's JSON, for a run folder's model (there is no saved_model.pb)."""
    return {
        name: {
            "inputs": {key: _tensor_info(f"{name}_{key}:0", *spec) for key, spec in sig["inputs"].items()},
            "outputs": {
                key: _tensor_info(f"StatefulPartitionedCall:{index}", *spec)
                for index, (key, spec) in enumerate(sig["outputs"].items())
            },
            "method_name": "tensorflow/serving/predict",
            "defaults": {},
        }
        for name, sig in signatures.items()
    }


def _saved_signature_defs(folder):
    """The SignatureDefs in `folder/saved_model.pb`, converted to JSON as TensorFlow Serving converts them."""
    from google.protobuf import json_format
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((folder / "saved_model.pb").read_bytes())
    graph = saved.meta_graphs[0]
    try:  # TensorFlow Serving prints fields left at their defaults too ("name": "", "unknown_rank": false)
        options = {"preserving_proto_field_name": True, "always_print_fields_with_no_presence": True}
        json_format.MessageToDict(graph.signature_def["serving_default"], **options)
    except TypeError:  # protobuf before 5.26
        options = {"preserving_proto_field_name": True, "including_default_value_fields": True}
    return {name: json_format.MessageToDict(signature, **options) for name, signature in graph.signature_def.items()}
