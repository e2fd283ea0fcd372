"""The routes of `seqtasks serve`: TensorFlow Serving's REST API, one extra endpoint, health and the page.

- `GET|HEAD /v1/models/NAME[/versions/N]`: version status;
- `GET|HEAD /v1/models/NAME[/versions/N]/metadata`: the signatures;
- `POST /v1/models/NAME[/versions/N]:predict`: TensorFlow Serving's predict;
- `POST /v1/models/NAME[/versions/N]:attention` (seqtasks' own): tokens and
  attention weights, per input, for the page;
- `GET /healthz`: each model's work, without waiting on a busy one (503
  when one is stuck, or an idle one fails its probe; `seqtasks.serving.health`),
  `GET /seqtasks/models` (what the page shows), `GET /` and `/static/*`.

Every answer is JSON `{"error": message}` on failure (at most
`MAX_ERROR_CHARACTERS`): 400 for a malformed request or a Host not served,
404 for an unknown model, version or route, 405 (with `Allow`) for a wrong
method, 408 for a body too slow, 413 over a limit, 415 for a body that is
not `application/json`, 503 (with `Retry-After`) when the queue or the
server is full, 504 past the request's deadline; a model's own failure gets
the status TensorFlow Serving gives its error code. The security headers of
`SECURITY_HEADERS` go on every answer.
"""

import asyncio
import json
import re
import traceback
from importlib import resources

from seqtasks.errors import ModelFailure, SeqtasksError
from seqtasks.serving.batching import Batcher, QueueFull
from seqtasks.serving.health import Health, Unhealthy
from seqtasks.serving.limits import Capacity, TooLarge
from seqtasks.serving.parsing import Parser, ParserFailed
from seqtasks.serving.requests import BadRequest, shown, to_json

_MODEL_PATH = re.compile(
    r"^(?P<name>[^/:]+)(?:/versions/(?P<version>\d+)|/labels/(?P<label>[^/:]+))?(?P<rest>/metadata|:[A-Za-z]+)?$"
)
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
# The methods the model routes answer themselves (405 with the right `Allow` for the wrong one).
_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
MAX_ERROR_CHARACTERS = 500
RETRY_AFTER_SECONDS = 1
SECURITY_HEADERS = {
    # The page loads only its own files and talks only to this server; no other site may frame it.
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}
# TensorFlow Serving's HTTP status for each error code (its http_server.cc), by TensorFlow's error class.
_MODEL_FAILURE_STATUS = {
    "CancelledError": 499, "DeadlineExceededError": 504, "NotFoundError": 404, "AlreadyExistsError": 409,
    "PermissionDeniedError": 403, "ResourceExhaustedError": 429, "FailedPreconditionError": 400,
    "AbortedError": 409, "OutOfRangeError": 400, "UnimplementedError": 501, "UnavailableError": 503,
    "UnauthenticatedError": 401,
}


class HttpError(Exception):
    def __init__(self, status, message, headers=None):
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


class _ClientGone(Exception):
    """The client closed its connection: nobody reads an answer, and nothing is logged."""


def make_app(served, limits, capacity=Capacity(), allowed_hosts=(), log=print, log_batches=False):
    """The ASGI application serving `served` (`seqtasks.serving.models.load_served`).

    `allowed_hosts` are the names a request's Host header may give besides
    `LOCAL_HOSTS` (`"*"`: any, for a proxy that checks them itself).
    """
    import contextlib

    from starlette.applications import Starlette
    from starlette.requests import ClientDisconnect
    from starlette.responses import FileResponse, JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    static = resources.files("seqtasks.serving") / "static"
    parser = Parser()
    for model in served.values():
        on_call = None
        if log_batches:
            on_call = _batch_logger(model.name, log)
        model.batcher = Batcher(
            model.model.run_signature,
            model.model.input_name,
            model.model.mergeable_signatures,
            capacity.max_batch_size,
            capacity.batch_timeout_ms / 1000.0,
            capacity.max_queued,
            on_call,
        )
        model.health = Health(model, capacity.health_timeout_s, capacity.request_timeout_s)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await parser.start()
        for model in served.values():
            model.batcher.start()
        yield
        for model in served.values():
            await model.batcher.stop()
        await parser.stop()

    def error(status, message, headers=None):
        return JSONResponse({"error": _bounded(message)}, status_code=status, headers=headers)

    async def models_route(request):
        try:
            model, action = _find(served, request.path_params["rest"])
            if action in ("", "/metadata"):
                if request.method not in ("GET", "HEAD"):
                    raise HttpError(405, f"{request.method} {_path(request)}: use GET", {"Allow": "GET, HEAD"})
                return JSONResponse(model.status() if action == "" else model.metadata())
            if action not in (":predict", ":attention"):
                raise HttpError(404, f"no such method {shown(action)}: expected :predict or :attention")
            if request.method != "POST":
                raise HttpError(405, f"{request.method} {_path(request)}: use POST", {"Allow": "POST"})
            raw = await _body(request, limits, capacity)
            if action == ":predict":
                return JSONResponse(await _predict(request, model, raw))
            return JSONResponse(await _attention(request, model, raw))
        except HttpError as failure:
            return error(failure.status, str(failure), failure.headers)
        except (ClientDisconnect, _ClientGone):
            return Response(status_code=499)  # nobody reads it
        except BadRequest as failure:
            return error(400, str(failure))
        except TooLarge as failure:
            return error(413, str(failure))
        except (QueueFull, ParserFailed) as failure:
            return error(503, str(failure), {"Retry-After": str(RETRY_AFTER_SECONDS)})
        except ModelFailure as failure:
            return error(_MODEL_FAILURE_STATUS.get(failure.code, 500), str(failure))
        except SeqtasksError as failure:  # what the model rejected: the input is the caller's to fix
            return error(400, str(failure))

    async def _predict(request, model, raw):
        signature, columns, row_format = await parser.run("predict", raw, model.signatures, limits, model.binary_inputs)
        outputs, _ = await _answer(request, model.batcher.submit(signature, columns), capacity)
        return to_json(outputs, len(columns[model.model.input_name]), row_format)

    async def _attention(request, model, raw):
        from seqtasks.inference.api import attention_rows
        from seqtasks.export.signatures import ATTENTION_SIGNATURE

        if ATTENTION_SIGNATURE not in model.signatures:
            raise BadRequest(f"a {model.model.task} model {model.name!r} has no attention weights")
        input_name = model.model.input_name
        spec = {"inputs": {input_name: model.signatures[ATTENTION_SIGNATURE]["inputs"][input_name]}}
        signature, columns = await parser.run("attention", raw, {"attention": spec}, limits, model.binary_inputs)
        outputs, _ = await _answer(request, model.batcher.submit(signature, columns), capacity)
        return {"attention": [_attention_json(row) for row in attention_rows(outputs)]}

    async def health(request):
        names = sorted(served)
        checks = await asyncio.gather(*(served[name].health.check() for name in names), return_exceptions=True)
        failures, work = [], {}
        for name, check in zip(names, checks):
            if isinstance(check, Unhealthy):
                failures.append(str(check))
                check = check.report
            elif isinstance(check, BaseException):
                raise check
            work[name] = check
        if failures:
            payload = {"status": "unavailable", "models": names, "work": work, "error": _bounded("; ".join(failures))}
            return JSONResponse(payload, status_code=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
        return JSONResponse({"status": "ok", "models": names, "work": work})

    async def listing(request):
        return JSONResponse({"models": [_describe(model, limits) for model in served.values()]})

    async def page(request):
        return FileResponse(str(static / "index.html"), media_type="text/html")

    async def not_found(request, exc):
        status = getattr(exc, "status_code", 404)
        headers = dict(getattr(exc, "headers", None) or {})
        if status == 405:
            path = request.url.path
            headers["Allow"] = "POST" if path.startswith("/v1/models/") and ":" in path else "GET, HEAD"
            return error(405, f"{request.method} {_path(request)}: use {headers['Allow']}", headers)
        return error(status, f"no such route: {request.method} {_path(request)}", headers)

    async def server_error(request, exc):
        return error(500, f"internal error: {type(exc).__name__}")  # the Guard logs the traceback

    routes = [
        Route("/", page),
        Route("/healthz", health),
        Route("/seqtasks/models", listing),
        Route("/v1/models/{rest:path}", models_route, methods=_METHODS),
        Mount("/static", StaticFiles(directory=str(static)), name="static"),
    ]
    app = Starlette(
        routes=routes, lifespan=lifespan, exception_handlers={404: not_found, 405: not_found, Exception: server_error}
    )
    hosts = set(LOCAL_HOSTS) | {host.lower() for host in allowed_hosts}
    return Guard(app, hosts, capacity.max_concurrent_requests, log)


class Guard:
    """ASGI middleware in front of the routes: the Host check, the in-flight bound, security headers, and a
    JSON 500 (with the traceback logged) for anything the routes did not answer."""

    def __init__(self, app, hosts, max_concurrent, log=print):
        self.app = app
        self.hosts = hosts
        self.max_concurrent = max_concurrent
        self.log = log
        self.active = 0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def secured(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items() if k.encode() not in present]
                message = {**message, "headers": list(message.get("headers", [])) + extra}
            await send(message)

        host = _host_of(scope)
        if "*" not in self.hosts and host not in self.hosts:
            named = shown(host) if host else "(none)"
            return await _send_json(secured, 400, (
                f"Host {named} is not served here; expected one of {sorted(self.hosts)} "
                "(seqtasks serve --allowed-host NAME adds one)"
            ))
        if self.active >= self.max_concurrent:
            return await _send_json(
                secured,
                503,
                f"{self.max_concurrent} requests are being handled (--max-concurrent-requests)",
                [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())],
            )
        self.active += 1
        try:
            await self.app(scope, receive, secured)
        except Exception as failure:
            self.log("".join(traceback.format_exception(failure)).rstrip())
            if not started:
                await _send_json(secured, 500, f"internal error: {type(failure).__name__}")
        finally:
            self.active -= 1


def _host_of(scope):
    """The Host header's name, lower-cased, without its port; None without one."""
    for name, value in scope.get("headers", []):
        if name == b"host":
            host = value.decode("latin-1").strip().lower()
            if host.startswith("["):  # [::1]:8501
                return host[1 : host.find("]")] if "]" in host else host
            name, colon, port = host.rpartition(":")
            return name if colon and port.isdigit() else host
    return None


async def _send_json(send, status, message, headers=()):
    body = json.dumps({"error": _bounded(message)}).encode()
    start_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": start_headers + list(headers)})
    await send({"type": "http.response.body", "body": body})


def _bounded(message):
    message = str(message)
    return message if len(message) <= MAX_ERROR_CHARACTERS else message[: MAX_ERROR_CHARACTERS - 3] + "..."


def _path(request):
    path = request.url.path
    return path if len(path) <= 80 else path[:80] + "..."


def _batch_logger(name, log):
    def on_call(signature, examples, requests):
        log(f"{name}: {signature} call of {examples} examples from {requests} requests")

    return on_call


def _find(served, rest):
    match = _MODEL_PATH.match(rest)
    if match is None:
        raise HttpError(404, f"no such route: /v1/models/{rest[:80]}")
    name, version, label, action = match["name"], match["version"], match["label"], match["rest"] or ""
    model = served.get(name)
    if model is None:
        raise HttpError(404, f"no model named {shown(name)}; this server has {sorted(served)}")
    # Versions are numbers, as TensorFlow Serving reads them: /versions/01 is version 1.
    if version is not None and (len(version) > 18 or int(version) != model.version):
        raise HttpError(404, f"model {name!r} has no version {shown(version)[1:-1]}; it serves version {model.version}")
    if label is not None:
        raise HttpError(404, f"model {name!r} has no version label {shown(label)}; it serves version {model.version}")
    return model, action


async def _body(request, limits, capacity):
    """The request's body once it is whole: JSON only, within `--max-body-bytes` and `--body-timeout-s`."""
    kind = request.headers.get("content-type", "")
    if kind.split(";")[0].strip().lower() != "application/json":
        raise HttpError(415, (
            f"Content-Type: expected application/json; got {shown(kind) if kind else 'none'} "
            "(curl: -H 'Content-Type: application/json')"
        ))
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise TooLarge(f"request body of {declared[:20]} bytes; at most {limits.max_body_bytes} (--max-body-bytes)")

    async def read():
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limits.max_body_bytes:
                # The exception's traceback holds this frame until the garbage collector finds the cycle
                # through the task that ran it: the bytes read so far go now, not then.
                chunks.clear()
                raise TooLarge(f"request body over {limits.max_body_bytes} bytes (--max-body-bytes)")
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        return await asyncio.wait_for(read(), capacity.body_timeout_s)
    except asyncio.TimeoutError:
        raise HttpError(408, f"the request body took over {capacity.body_timeout_s:g} s (--body-timeout-s)") from None


async def _answer(request, future, capacity):
    """The queued request's result; it is cancelled (dropped from the queue) if the client leaves or the
    deadline passes (504)."""
    gone = asyncio.ensure_future(_disconnected(request.receive))
    try:
        done, _ = await asyncio.wait({future, gone}, timeout=capacity.request_timeout_s,
                                     return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if future in done:
        return future.result()
    future.cancel()
    if gone in done:
        raise _ClientGone()
    raise HttpError(504, f"no answer within {capacity.request_timeout_s:g} s (--request-timeout-s)")


async def _disconnected(receive):
    while (await receive())["type"] != "http.disconnect":
        pass


def _attention_json(row):
    result = {}
    for key, value in row.items():
        if key == "attention":
            key, value = "weights", value.tolist()
        result[key] = value
    return result


def _describe(model, limits):
    from seqtasks.decoding.settings import as_json
    from seqtasks.export.signatures import ATTENTION_SIGNATURE, PREFIX_SIGNATURE, SETTINGS_SIGNATURE

    settings = fields = None
    if SETTINGS_SIGNATURE in model.signatures:
        # The settings this export takes (older ones: four), with its own values, and the page's controls for them.
        accepted = model.model.settings_accepted()
        settings = {key: value for key, value in model.model.decoding_defaults().items() if key in accepted}
        fields = as_json(accepted, attends=ATTENTION_SIGNATURE in model.signatures)
    return {
        "name": model.name,
        "version": model.version,
        "task": model.model.task,
        "input": model.model.input_name,
        "signatures": sorted(model.signatures),
        "prefix": PREFIX_SIGNATURE in model.signatures,
        "attention": ATTENTION_SIGNATURE in model.signatures,
        "labels": model.model.label_names(),
        "settings": settings,
        "setting_fields": fields,
        "limits": limits.as_json(),
    }
