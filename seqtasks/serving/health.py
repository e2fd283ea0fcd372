"""`/healthz`: tells a working model (idle or busy) from a stuck or failing one, without waiting on a busy one.

A model with work (a call running, or requests waiting) is judged by its
progress, read from its batcher at once (`Batcher.progress`): it is busy
while a call has finished (or the work began) within `stuck_seconds`, and
stuck past that, answered 503. The bound is `--request-timeout-s`: a model
that finishes no call for that long can answer none of the requests waiting
for it. An idle model is sent a one-example probe, which goes ahead of the
queue (`Batcher.submit(priority=True)`), and must answer it within
`timeout_seconds` (`--health-timeout-s`), or fail it, to be unavailable
(503). One probe per model runs at a time, shared by the health checks that
arrive meanwhile, and its answer holds for `FRESH_SECONDS`.
"""

import asyncio
import struct
import time
import zlib

FRESH_SECONDS = 1.0


class Unhealthy(Exception):
    """A model is stuck, did not answer its probe in time, or failed it; the message says which and how.

    `report` is the model's entry of `/healthz`'s `work` (see `Health.check`).
    """

    def __init__(self, message, report):
        super().__init__(message)
        self.report = report


def tiny_png(side=8):
    """A `side` x `side` grey PNG: the probe of a model that reads images."""

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)  # 8-bit greyscale
    pixels = zlib.compress(b"".join(b"\x00" + bytes([128]) * side for _ in range(side)))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


class Health:
    """The health of one served model (`seqtasks.serving.models.ServedModel`), read from its batcher.

    Args:
        served: the model; its `batcher` is started before `check` is called.
        timeout_seconds: how long an idle model's probe may take.
        stuck_seconds: how long a model with work may go without finishing
            a call before it is stuck.
    """

    def __init__(self, served, timeout_seconds, stuck_seconds):
        self.served = served
        self.timeout_seconds = timeout_seconds
        self.stuck_seconds = stuck_seconds
        self._probe = None
        self._probe_deadline = 0.0
        self._fresh_until = 0.0
        self._value = tiny_png() if served.model.binary_input else "health check"

    async def check(self):
        """The model's entry of `/healthz`'s `work`, or `Unhealthy` carrying it.

        The entry is `{"state", "requests", "call_s", "since_progress_s"}`:
        `state` is `idle`, `busy`, `stuck` or `unavailable`; the others are
        `Batcher.progress`'s. A busy model is never waited on.
        """
        name = self.served.name
        probing = self._probe is not None and not self._probe.done()
        progress = self.served.batcher.progress()
        if not probing and progress["busy"]:
            if progress["since_progress_s"] > self.stuck_seconds:
                raise Unhealthy(
                    f"model {name!r} is stuck: it has work and no call has finished for "
                    f"{progress['since_progress_s']:.1f} s (at most {self.stuck_seconds:g} s, --request-timeout-s); "
                    f"its current call has run {progress['call_s']:.1f} s, {progress['requests']} requests wait",
                    _report("stuck", progress),
                )
            return _report("busy", progress)
        if not probing and time.monotonic() < self._fresh_until:
            return _report("idle", progress)
        if not probing:
            self._probe = asyncio.ensure_future(self._run())
            self._probe.add_done_callback(lambda probe: probe.cancelled() or probe.exception())  # read once, here
            self._probe_deadline = time.monotonic() + self.timeout_seconds
        try:
            await asyncio.wait_for(asyncio.shield(self._probe), max(0.0, self._probe_deadline - time.monotonic()))
        except asyncio.TimeoutError:
            progress = self.served.batcher.progress()
            raise Unhealthy(
                f"model {name!r} did not answer a one-example request within {self.timeout_seconds:g} s "
                f"(its current call has run {progress['call_s']:.1f} s)",
                _report("unavailable", progress),
            ) from None
        except Exception as error:
            raise Unhealthy(f"model {name!r} failed a one-example request: {error}",
                            _report("unavailable", self.served.batcher.progress())) from None
        progress = self.served.batcher.progress()
        return _report("busy" if progress["busy"] else "idle", progress)

    async def _run(self):
        await self.served.batcher.submit("serving_default", {self.served.model.input_name: [self._value]}, True)
        self._fresh_until = time.monotonic() + FRESH_SECONDS


def _report(state, progress):
    return {"state": state, **{key: value for key, value in progress.items() if key != "busy"}}
