"""The routes of `seqtasks serve`: TensorFlow Serving's REST API, one extra endpoint, health and the page.

- `GET /v1/models/NAME[/versions/N]`: version status;
- `GET /v1/models/NAME[/versions/N]/metadata`: the signatures;
- `POST /v1/models/NAME[/versions/N]:predict`: TensorFlow Serving's predict;
- `POST /v1/models/NAME[/versions/N]:attention` (seqtasks' own): tokens and
  attention weights, per input, for the page;
- `GET /healthz`, `GET /seqtasks/models` (what the page shows), `GET /` and
  `/static/*` (the page).

Errors are `{"error": message}`: 400 for a malformed request, 404 for an
unknown model, version or route, 413 for a request over a limit.
"""

import json
import re
from importlib import resources

from seqtasks.errors import SeqtasksError
from seqtasks.serving.batching import Batcher
from seqtasks.serving.limits import TooLarge
from seqtasks.serving.requests import BadRequest, read_predict, to_json

_MODEL_PATH = re.compile(r"^(?P<name>[^/:]+)(?:/versions/(?P<version>[^/:]+))?(?P<rest>/metadata|:[A-Za-z]+)?$")
# Signatures whose outputs have no axis sized by the batch's longest input (`seqtasks.serving.batching`).
_MERGEABLE = {"translation": ("serving_default", "with_settings"), "toy": ("serving_default", "with_settings"),
              "sentiment": ("serving_default",), "captioning": ("serving_default", "with_settings")}


class HttpError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def make_app(served, limits, max_batch_size=32, batch_timeout_ms=5.0):
    """The Starlette application serving `served` (`seqtasks.serving.models.load_served`)."""
    import contextlib

    from starlette.applications import Starlette
    from starlette.responses import FileResponse, JSONResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    static = resources.files("seqtasks.serving") / "static"
    for model in served.values():
        model.batcher = Batcher(
            model.model.run_signature,
            model.model.input_name,
            _MERGEABLE.get(model.model.task, ()),
            max_batch_size,
            batch_timeout_ms / 1000.0,
        )

    @contextlib.asynccontextmanager
    async def lifespan(app):
        for model in served.values():
            model.batcher.start()
        yield
        for model in served.values():
            await model.batcher.stop()

    def error(status, message):
        return JSONResponse({"error": message}, status_code=status)

    async def models_route(request):
        try:
            model, action = _find(served, request.path_params["rest"])
            if request.method == "GET":
                if action == "":
                    return JSONResponse(model.status())
                if action == "/metadata":
                    return JSONResponse(model.metadata())
                raise HttpError(404, f"no such route: GET {request.url.path}")
            if action == ":predict":
                answer, examples = await _predict(model, await _read_json(request, limits), limits)
                # How many examples the model call that answered had: more than sent when merged.
                return JSONResponse(answer, headers={"X-Seqtasks-Batch-Examples": str(examples)})
            if action == ":attention":
                return JSONResponse(await _attention(model, await _read_json(request, limits), limits))
            if action in ("", "/metadata"):
                raise HttpError(405, f"{request.url.path}: use GET")
            raise HttpError(404, f"no such method {action!r}: expected :predict or :attention")
        except HttpError as failure:
            return error(failure.status, str(failure))
        except BadRequest as failure:
            return error(400, str(failure))
        except TooLarge as failure:
            return error(413, str(failure))
        except SeqtasksError as failure:  # what the model rejected: the input is the caller's to fix
            return error(400, str(failure))

    async def health(request):
        return JSONResponse({"status": "ok", "models": sorted(served)})

    async def listing(request):
        return JSONResponse({"models": [_describe(model, limits) for model in served.values()]})

    async def page(request):
        return FileResponse(str(static / "index.html"), media_type="text/html")

    async def not_found(request, exc):
        return error(getattr(exc, "status_code", 404), f"no such route: {request.method} {request.url.path}")

    routes = [
        Route("/", page),
        Route("/healthz", health),
        Route("/seqtasks/models", listing),
        Route("/v1/models/{rest:path}", models_route, methods=["GET", "POST"]),
        Mount("/static", StaticFiles(directory=str(static)), name="static"),
    ]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found, 405: not_found})


def _find(served, rest):
    match = _MODEL_PATH.match(rest)
    if match is None:
        raise HttpError(404, f"no such route: /v1/models/{rest}")
    name, version, action = match["name"], match["version"], match["rest"] or ""
    model = served.get(name)
    if model is None:
        raise HttpError(404, f"no model named {name!r}; this server has {sorted(served)}")
    if version is not None and version != str(model.version):
        raise HttpError(404, f"model {name!r} has no version {version}; it serves version {model.version}")
    return model, action


async def _read_json(request, limits):
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise TooLarge(f"request body of {declared} bytes; at most {limits.max_body_bytes} (--max-body-bytes)")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise TooLarge(f"request body over {limits.max_body_bytes} bytes (--max-body-bytes)")
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except (ValueError, UnicodeDecodeError) as failure:
        raise BadRequest(f"malformed JSON: {failure}") from None


async def _predict(model, body, limits):
    signature, columns, row_format = read_predict(body, model.signatures, limits)
    outputs, examples = await model.batcher.submit(signature, columns)
    return to_json(outputs, len(columns[model.model.input_name]), row_format), examples


async def _attention(model, body, limits):
    from seqtasks.tasks.decoding_settings import ATTENTION_SIGNATURE

    if ATTENTION_SIGNATURE not in model.signatures:
        raise BadRequest(f"a {model.model.task} model {model.name!r} has no attention weights")
    input_name = model.model.input_name
    specs = {ATTENTION_SIGNATURE: {"inputs": {input_name: model.signatures[ATTENTION_SIGNATURE]["inputs"][input_name]}}}
    _, columns, _ = read_predict({"signature_name": ATTENTION_SIGNATURE, "instances": _instances(body)}, specs, limits)
    rows = await model.batcher.call(model.model.attention, columns[input_name])
    return {"attention": [_attention_json(row) for row in rows]}


def _instances(body):
    if not isinstance(body, dict) or set(body) != {"instances"}:
        raise BadRequest("expected a JSON object with 'instances' only")
    return body["instances"]


def _attention_json(row):
    result = {}
    for key, value in row.items():
        if key == "attention":
            key, value = "weights", value.tolist()
        result[key] = value
    return result


def _describe(model, limits):
    from seqtasks.tasks.decoding_settings import (
        ATTENTION_SIGNATURE,
        MAX_BEAM_WIDTH,
        MAX_DECODE_LENGTH,
        SETTINGS_SIGNATURE,
    )

    settings = None
    if SETTINGS_SIGNATURE in model.signatures:
        settings = {**model.model.decoding_defaults(), "max_beam_width": MAX_BEAM_WIDTH,
                    "max_max_length": MAX_DECODE_LENGTH}
    return {
        "name": model.name,
        "version": model.version,
        "task": model.model.task,
        "input": model.model.input_name,
        "signatures": sorted(model.signatures),
        "attention": ATTENTION_SIGNATURE in model.signatures,
        "labels": model.model.label_names(),
        "settings": settings,
        "limits": limits.as_json(),
    }
