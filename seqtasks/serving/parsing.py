"""Request bodies parsed off the event loop: small ones at once, large ones in a worker process.

`json.loads` and the regular expressions that bound a body hold Python's
lock for as long as they run (over a second for 16 MiB of small values), so
a thread would stall every other request and `/healthz` all the same. A
body of at most `INLINE_BYTES` parses in milliseconds and is read in place;
a larger one goes to a worker process (`python -m
seqtasks.serving.parse_worker`, no TensorFlow) that parses, bounds and
checks it (`seqtasks.serving.requests`) and sends back only the request's
values. The worker starts with the first large body (a server that is only
sent small ones never starts it) and again after it failed.

The frames on the worker's pipes are a JSON line, then raw bytes: to the
worker `{"kind", "signatures", "limits", "binary", "size"}` and `size` bytes
of body; back `{"signature", "row_format", "columns", "blobs"}` where each
string or bytes value is `{"text": i}` or `{"bytes": i}`, the `i`-th of the
blobs that follow (their lengths in `blobs`), or `{"error": kind, "message"}`.
Nothing is pickled.
"""

import asyncio
import json
import sys
from dataclasses import asdict

from seqtasks.serving.limits import Limits, TooLarge
from seqtasks.serving.requests import BadRequest, parse_attention, parse_predict

INLINE_BYTES = 64 * 1024
# Longest line the worker answers with: the request's values are blobs, so its JSON is only their shape.
MAX_ANSWER_LINE = 1024**2


class ParserFailed(Exception):
    """The worker process ended or answered nonsense while parsing: answered 503; the next large body starts it anew."""


def parse(kind, raw, signatures, limits, binary_inputs):
    """`parse_predict` (`kind` "predict") or `parse_attention` ("attention") of one body, in this process."""
    if kind == "predict":
        return parse_predict(raw, signatures, limits, binary_inputs)
    return parse_attention(raw, signatures["attention"], limits, binary_inputs)


class Parser:
    """`parse` of a request body: inline when small, else in the worker process, one body at a time."""

    def __init__(self):
        self._process = None
        self._lock = None

    async def start(self):
        self._lock = asyncio.Lock()

    async def _started(self):
        if self._process is None:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "seqtasks.serving.parse_worker",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=MAX_ANSWER_LINE,
            )
        return self._process

    async def stop(self):
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            process.kill()
            await process.wait()

    async def run(self, kind, raw, signatures, limits, binary_inputs=()):
        if len(raw) <= INLINE_BYTES or self._lock is None:
            return parse(kind, raw, signatures, limits, binary_inputs)
        async with self._lock:
            try:
                return await self._exchange(await self._started(), kind, raw, signatures, limits, binary_inputs)
            except (OSError, EOFError, ValueError, KeyError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                await self.stop()
                raise ParserFailed("the request parser stopped while reading this request; try again") from None

    async def _exchange(self, process, kind, raw, signatures, limits, binary_inputs):
        header = {"kind": kind, "signatures": signatures, "limits": asdict(limits), "binary": list(binary_inputs),
                  "size": len(raw)}
        process.stdin.write(json.dumps(header).encode() + b"\n" + raw)
        await process.stdin.drain()
        answer = json.loads(await process.stdout.readuntil(b"\n"))
        if "error" in answer:
            raise {"bad_request": BadRequest, "too_large": TooLarge}[answer["error"]](answer["message"])
        blobs = [await process.stdout.readexactly(size) for size in answer["blobs"]]
        columns = {name: [_unpack(value, blobs) for value in values] for name, values in answer["columns"].items()}
        if kind == "predict":
            return answer["signature"], columns, answer["row_format"]
        return answer["signature"], columns


def _unpack(value, blobs):
    if isinstance(value, dict):
        return blobs[value["text"]].decode("utf-8") if "text" in value else blobs[value["bytes"]]
    return value


def serve_frames(source, sink):
    """The worker's loop: answers each frame of `source` on `sink` until `source` ends."""
    while True:
        line = source.readline()
        if not line:
            return
        header = json.loads(line)
        raw = source.read(header["size"])
        signatures = {name: {"inputs": {key: tuple(spec) for key, spec in sig["inputs"].items()},
                             "defaults": sig.get("defaults", {})}
                      for name, sig in header["signatures"].items()}
        try:
            result = parse(header["kind"], raw, signatures, Limits(**header["limits"]), tuple(header["binary"]))
        except BadRequest as error:
            _write(sink, {"error": "bad_request", "message": str(error)})
            continue
        except TooLarge as error:
            _write(sink, {"error": "too_large", "message": str(error)})
            continue
        blobs = []

        def pack(value):
            if isinstance(value, (str, bytes)):
                blobs.append(value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value)
                return {"text" if isinstance(value, str) else "bytes": len(blobs) - 1}
            return value

        columns = {name: [pack(value) for value in values] for name, values in result[1].items()}
        answer = {"signature": result[0], "columns": columns, "blobs": [len(blob) for blob in blobs]}
        if header["kind"] == "predict":
            answer["row_format"] = result[2]
        _write(sink, answer, blobs)


def _write(sink, answer, blobs=()):
    sink.write(json.dumps(answer).encode() + b"\n")
    for blob in blobs:
        sink.write(blob)
    sink.flush()
