"""Concurrent requests to one model, served a model call at a time from a bounded queue, on the model's own thread.

A request joins a call only with requests for the same signature and the
same values of every other input (the decoding settings), and only where
merging cannot change its answer: where every output has one row per
example and no axis sized by the batch's longest input (NER's padded tokens
are, so NER requests run one by one).

A model call takes at most `max_batch_size` examples. A request of more runs
as several calls, one piece of it at a time: after each piece it goes back
to the end of the queue, so the requests that came meanwhile, and the pieces
of other large requests, take their turn first (round-robin between
requests). A small request sent while a large one runs therefore waits for
the call that is running, not for the whole large request. The pieces'
outputs are joined (padded to the longest where an axis follows the inputs)
into one answer.

At most `max_queued` requests wait (`QueueFull` beyond); a request whose
future is cancelled (its client left, or its deadline passed) is dropped
from the queue, its remaining pieces never run, and its answer is discarded
if its call had started. Each model runs one call at a time on its own
daemon thread, so TensorFlow's threads are not shared between calls and a
stuck call cannot keep the process from exiting. `Batcher.progress` says,
without waiting on the model, whether it has work and how long ago a call
last finished (`/healthz`, `seqtasks.serving.health`).
"""

import asyncio
import collections
import itertools
import queue
import threading
import time
from dataclasses import dataclass, field

import numpy as np


class QueueFull(Exception):
    """The model's queue holds `max_queued` requests: answered 503 with `Retry-After`."""


@dataclass(eq=False)
class _Job:
    """One request: its inputs, its future, and how far its calls have got."""

    signature: str
    columns: dict
    future: asyncio.Future
    rows: int
    key: object = None  # what it merges on (`Batcher._key`); None: it runs alone
    probe: bool = False  # a health probe, not a client's request
    done: int = 0  # rows answered by the calls so far
    parts: list = field(default_factory=list)  # those calls' outputs, its rows only
    examples: int = 0  # most examples one of those calls had
    waited: bool = False  # it has been in a batch window that closed: it waits for company no more

    def piece(self, most):
        """Rows of its next call."""
        return min(self.rows - self.done, most)


class ModelThread:
    """One daemon thread that runs calls one after the other; `call` returns an asyncio future of the result."""

    def __init__(self, name="seqtasks-model"):
        self._calls = queue.SimpleQueue()
        self.started_at = None  # `time.monotonic()` when the running call began; None when idle
        self.finished_at = None  # `time.monotonic()` when the last call ended; None before the first
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def call(self, function, *args):
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._calls.put((loop, future, function, args))
        return future

    def busy_seconds(self):
        """How long the running call has run; 0 when idle."""
        started = self.started_at
        return 0.0 if started is None else time.monotonic() - started

    def stop(self):
        self._calls.put(None)

    def _serve(self):
        while True:
            item = self._calls.get()
            if item is None:
                return
            loop, future, function, args = item
            self.started_at = time.monotonic()
            try:
                settle = (future.set_result, function(*args))
            except Exception as error:  # the caller's to report
                settle = (future.set_exception, error)
            finally:
                self.finished_at = time.monotonic()
                self.started_at = None
            try:
                loop.call_soon_threadsafe(_settle, future, *settle)
            except RuntimeError:  # the event loop has closed: nobody waits for this answer
                return


def _settle(future, setter, value):
    if not future.done():
        setter(value)


class Batcher:
    """Runs `run(signature, columns) -> outputs` for queued requests, one model call at a time.

    Args:
        run: the model's call, `SeqtasksModel.run_signature`.
        batch_input: the input that examples are stacked along (`text`, `image`).
        mergeable: the signature names whose requests may be merged.
        max_batch_size: most examples in one call; a request of more runs
            as several, taking turns with the other requests.
        timeout_seconds: how long the first mergeable request of a call
            waits for others.
        max_queued: most requests waiting (health probes are not counted).
        on_call: called with `(signature, examples, requests)` before each
            model call (`seqtasks serve --log-batches`).
    """

    def __init__(self, run, batch_input, mergeable, max_batch_size=32, timeout_seconds=0.005, max_queued=64,
                 on_call=None):
        self.run = run
        self.batch_input = batch_input
        self.mergeable = set(mergeable)
        self.max_batch_size = max_batch_size
        self.timeout_seconds = timeout_seconds
        self.max_queued = max_queued
        self.on_call = on_call
        self.thread = None
        self.worker = None
        self.calls = 0
        self._pending = collections.deque()
        self._probes = collections.deque()
        self._current = []  # the requests of the call being made (or the one gathering company)
        self._work_since = None  # `time.monotonic()` since when it has had work; None when idle

    def start(self):
        self._wakeup = asyncio.Event()
        self.thread = ModelThread()
        self.worker = asyncio.get_running_loop().create_task(self._work())

    async def stop(self):
        if self.worker is not None:
            self.worker.cancel()
            await asyncio.gather(self.worker, return_exceptions=True)
        if self.thread is not None:
            self.thread.stop()
        for job in itertools.chain(self._pending, self._probes, self._current):
            job.future.cancel()

    def queued(self):
        """Requests waiting for the model (a large one between its calls too), cancelled ones not counted."""
        return sum(1 for job in self._pending if not job.future.done())

    def progress(self):
        """The model's work, read without waiting on it: `{"busy", "requests", "call_s", "since_progress_s"}`.

        `busy`: a call runs or requests wait; `requests`: clients' requests
        queued or in the call being made (probes not counted); `call_s`: how
        long the running call has run (0 when none); `since_progress_s`: how
        long ago a call last finished or the model got work, whichever is
        later (0 when idle): a model that makes progress keeps it under its
        longest call.
        """
        busy = self._work_since is not None
        jobs = itertools.chain(self._pending, self._current)
        finished = None if self.thread is None else self.thread.finished_at
        since = max(self._work_since, finished or self._work_since) if busy else None
        return {
            "busy": busy,
            "requests": sum(1 for job in jobs if not job.probe and not job.future.done()),
            "call_s": 0.0 if self.thread is None else round(self.thread.busy_seconds(), 3),
            "since_progress_s": 0.0 if since is None else round(time.monotonic() - since, 3),
        }

    def submit(self, signature, columns, priority=False):
        """A future of `(outputs, examples)`: this request's outputs (NumPy arrays, one row per example) once its
        calls have run, and the most examples one of its model calls had (its own, and any merged with them).

        Cancel the future to drop the request. Raises `QueueFull` when
        `max_queued` requests wait; a `priority` request (a health probe)
        goes first and is never refused.
        """
        if not priority and self.queued() >= self.max_queued:
            raise QueueFull(f"{self.max_queued} requests are waiting for this model (--max-queued)")
        future = asyncio.get_running_loop().create_future()
        job = _Job(signature, columns, future, len(columns[self.batch_input]), probe=priority)
        job.key = self._key(job)
        (self._probes if priority else self._pending).append(job)
        if self._work_since is None:
            self._work_since = time.monotonic()
        self._wakeup.set()
        return future

    def _take(self):
        for jobs in (self._probes, self._pending):
            while jobs:
                job = jobs.popleft()
                if not job.future.done():
                    return job
        return None

    async def _next(self):
        """The next request not cancelled, once there is one."""
        while True:
            job = self._take()
            if job is not None:
                return job
            self._work_since = None  # nothing to do, and no call runs: idle
            self._wakeup.clear()
            await self._wakeup.wait()

    async def _company(self, timeout):
        """Whether a request came within `timeout` seconds."""
        if timeout <= 0:
            return False
        self._wakeup.clear()
        try:
            await asyncio.wait_for(self._wakeup.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def _work(self):
        loop = asyncio.get_running_loop()
        while True:
            first = await self._next()
            self._current = [first]
            if first.key is not None and not first.waited:
                deadline = loop.time() + self.timeout_seconds
                # Requests that queued while the last call ran join at once: the window may be spent already.
                while self._window(first)[1] < self.max_batch_size and await self._company(deadline - loop.time()):
                    pass
            await self._run(self._gather(first))
            self._current = []

    def _window(self, first):
        """The queued requests that share `first`'s batch window, in queue order, and the examples the window holds:
        those that came before it held `max_batch_size`."""
        jobs, rows = [], first.piece(self.max_batch_size)
        for queue_, job in itertools.chain(((self._probes, job) for job in self._probes),
                                           ((self._pending, job) for job in self._pending)):
            if rows >= self.max_batch_size:
                break
            if not job.future.done():
                jobs.append((queue_, job))
                rows += job.piece(self.max_batch_size)
        return jobs, rows

    def _gather(self, first):
        """`first`'s next call: `[(request, rows)]`, with the requests of its window that merge with it and fit.

        Those are taken from the queue; the window's others keep their places
        and start a call of their own without waiting again.
        """
        window, _ = self._window(first)
        call = [(first, first.piece(self.max_batch_size))]
        room = self.max_batch_size - call[0][1]
        first.waited = True
        for queue_, job in window:
            job.waited = True
            rows = job.piece(self.max_batch_size)
            if first.key is not None and job.key == first.key and rows <= room:
                queue_.remove(job)
                call.append((job, rows))
                room -= rows
        return call

    def _key(self, job):
        if job.signature not in self.mergeable:
            return None
        others = []
        for name, values in sorted(job.columns.items()):
            if name == self.batch_input:
                continue
            if any(value != values[0] for value in values):
                return None  # the model itself reports mixed settings
            others.append((name, values[0]))
        return job.signature, tuple(others)

    def _columns(self, call):
        """The inputs of one call: a request's rows as it sent them, or merged requests' examples with one value of
        each setting."""
        first, rows = call[0]
        if len(call) == 1:
            return {
                name: values[first.done : first.done + rows] if len(values) == first.rows else values
                for name, values in first.columns.items()
            }
        columns = {name: [values[0]] for name, values in first.columns.items() if name != self.batch_input}
        columns[self.batch_input] = [
            value for job, rows in call for value in job.columns[self.batch_input][job.done : job.done + rows]
        ]
        return columns

    async def _run(self, call):
        """Makes one model call of `call`'s rows; answers the requests it completes, and sends the others back to
        the end of the queue for their next piece."""
        call = [(job, rows) for job, rows in call if not job.future.done()]
        if not call:
            return
        self._current = [job for job, _ in call]
        columns = self._columns(call)
        first = call[0][0]
        try:
            outputs = await self._call(first.signature, columns, len(call))
        except Exception as error:
            if len(call) > 1:  # one request's bad input must not fail the others: each runs alone
                for item in call:
                    await self._run([item])
                return
            _settle(first.future, first.future.set_exception, error)
            return
        start, examples = 0, len(columns[self.batch_input])
        for job, rows in call:
            job.parts.append({key: value[start : start + rows] for key, value in outputs.items()})
            job.done += rows
            job.examples = max(job.examples, examples)
            start += rows
            if job.done == job.rows:
                parts, job.parts = job.parts, []
                try:
                    joined = parts[0] if len(parts) == 1 else {key: _join([part[key] for part in parts])
                                                               for key in parts[0]}
                except Exception as error:  # outputs that do not join: this request's failure, not the batcher's
                    _settle(job.future, job.future.set_exception, error)
                    continue
                _settle(job.future, job.future.set_result, (joined, job.examples))
            elif not job.future.done():
                self._pending.append(job)  # its next piece after the requests that came meanwhile

    async def _call(self, signature, columns, requests):
        """The model's outputs for `columns`: one call on the model's thread."""
        self.calls += 1
        if self.on_call is not None:
            self.on_call(signature, len(columns[self.batch_input]), requests)
        return await self.thread.call(self.run, signature, columns)


def _join(arrays):
    """Arrays stacked along their first axis, each padded at the end of its other axes to the longest.

    The padding is what an export pads with: `""` for strings, 0 for numbers.
    """
    arrays = [np.asarray(array) for array in arrays]
    shape = np.max([array.shape for array in arrays], axis=0)
    padded = []
    for array in arrays:
        widths = [(0, 0)] + [(0, int(size) - current) for size, current in zip(shape[1:], array.shape[1:])]
        fill = b"" if array.dtype.kind in "SO" else 0
        padded.append(np.pad(array, widths, constant_values=fill) if any(w for _, w in widths) else array)
    return np.concatenate(padded, axis=0)
