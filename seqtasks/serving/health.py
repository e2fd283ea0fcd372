"""`/healthz`: each model answers a one-example request within a bound, or the server is unavailable.

A probe goes ahead of the queue (`Batcher.submit(priority=True)`), so a busy
but working model answers within one batch; a stuck model thread does not,
and `/healthz` says so (503). One probe per model runs at a time, shared by
the health checks that arrive meanwhile, and an answer holds for a second.
"""

import asyncio
import struct
import time
import zlib

FRESH_SECONDS = 1.0


class Unhealthy(Exception):
    """A model did not answer its probe in time, or failed it; the message says which and how."""


def tiny_png(side=8):
    """A `side` x `side` grey PNG: the probe of a model that reads images."""

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)  # 8-bit greyscale
    pixels = zlib.compress(b"".join(b"\x00" + bytes([128]) * side for _ in range(side)))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


class Health:
    """The probe of one served model (`seqtasks.serving.models.ServedModel`) through its batcher."""

    def __init__(self, served, timeout_seconds):
        self.served = served
        self.timeout_seconds = timeout_seconds
        self._probe = None
        self._fresh_until = 0.0
        self._value = tiny_png() if served.model.binary_input else "health check"

    async def check(self):
        """Returns once the model has answered a probe within `timeout_seconds`; else raises `Unhealthy`."""
        if time.monotonic() < self._fresh_until:
            return
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(self._run())
            self._probe.add_done_callback(lambda probe: probe.cancelled() or probe.exception())  # read once, here
        try:
            await asyncio.wait_for(asyncio.shield(self._probe), self.timeout_seconds)
        except asyncio.TimeoutError:
            busy = self.served.batcher.thread.busy_seconds()
            raise Unhealthy(
                f"model {self.served.name!r} did not answer a one-example request within {self.timeout_seconds:g} s "
                f"(its current call has run {busy:.1f} s)"
            ) from None
        except Exception as error:
            raise Unhealthy(f"model {self.served.name!r} failed a one-example request: {error}") from None

    async def _run(self):
        await self.served.batcher.submit("serving_default", {self.served.model.input_name: [self._value]}, True)
        self._fresh_until = time.monotonic() + FRESH_SECONDS
