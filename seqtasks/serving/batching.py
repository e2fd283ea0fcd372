"""Concurrent requests to one model, merged into batches, in a bounded queue, run on the model's own thread.

A request joins a batch only with requests for the same signature and the
same values of every other input (the decoding settings), and only where
merging cannot change its answer: where every output has one row per
example and no axis sized by the batch's longest input (NER's padded tokens
are, so NER requests run one by one). A request of more examples than a
batch holds runs as several calls, one after the other, whose outputs are
joined (padded to the longest where an axis follows the inputs).

At most `max_queued` requests wait (`QueueFull` beyond); a request whose
future is cancelled (its client left, or its deadline passed) is dropped
from the queue, and its answer discarded if its call had started. Each
model runs one call at a time on its own daemon thread, so TensorFlow's
threads are not shared between calls and a stuck call cannot keep the
process from exiting.
"""

import asyncio
import collections
import queue
import threading
import time
from dataclasses import dataclass

import numpy as np


class QueueFull(Exception):
    """The model's queue holds `max_queued` requests: answered 503 with `Retry-After`."""


@dataclass
class _Job:
    signature: str
    columns: dict
    future: asyncio.Future
    rows: int


class ModelThread:
    """One daemon thread that runs calls one after the other; `call` returns an asyncio future of the result."""

    def __init__(self, name="seqtasks-model"):
        self._calls = queue.SimpleQueue()
        self.started_at = None  # `time.monotonic()` when the running call began; None when idle
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
                self.started_at = None
            try:
                loop.call_soon_threadsafe(_settle, future, *settle)
            except RuntimeError:  # the event loop has closed: nobody waits for this answer
                return


def _settle(future, setter, value):
    if not future.done():
        setter(value)


class Batcher:
    """Runs `run(signature, columns) -> outputs` for queued requests, batch by batch.

    Args:
        run: the model's call, `SeqtasksModel.run_signature`.
        batch_input: the input that examples are stacked along (`text`, `image`).
        mergeable: the signature names whose requests may be merged.
        max_batch_size: most examples in one call.
        timeout_seconds: how long the first mergeable request of a batch
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

    def start(self):
        self._pending = collections.deque()
        self._probes = collections.deque()
        self._wakeup = asyncio.Event()
        self.thread = ModelThread()
        self.worker = asyncio.get_running_loop().create_task(self._work())

    async def stop(self):
        if self.worker is not None:
            self.worker.cancel()
            await asyncio.gather(self.worker, return_exceptions=True)
        if self.thread is not None:
            self.thread.stop()
        for job in list(self._pending) + list(self._probes):
            job.future.cancel()

    def queued(self):
        """Requests waiting for the model, cancelled ones not counted."""
        return sum(1 for job in self._pending if not job.future.done())

    def submit(self, signature, columns, priority=False):
        """A future of `(outputs, examples)`: this request's outputs (NumPy arrays, one row per example) once its
        calls have run, and how many examples its model call had (its own, and any merged with them).

        Cancel the future to drop the request. Raises `QueueFull` when
        `max_queued` requests wait; a `priority` request (a health probe)
        goes first and is never refused.
        """
        if not priority and self.queued() >= self.max_queued:
            raise QueueFull(f"{self.max_queued} requests are waiting for this model (--max-queued)")
        future = asyncio.get_running_loop().create_future()
        job = _Job(signature, columns, future, len(columns[self.batch_input]))
        (self._probes if priority else self._pending).append(job)
        self._wakeup.set()
        return future

    def _take(self):
        for jobs in (self._probes, self._pending):
            while jobs:
                job = jobs.popleft()
                if not job.future.done():
                    return job
        return None

    async def _next(self, timeout=None):
        """The next request not cancelled; None if none came within `timeout` seconds."""
        loop = asyncio.get_running_loop()
        end = None if timeout is None else loop.time() + timeout
        while True:
            job = self._take()
            if job is not None:
                return job
            self._wakeup.clear()
            if end is None:
                await self._wakeup.wait()
                continue
            left = end - loop.time()
            if left <= 0:
                return None
            try:
                await asyncio.wait_for(self._wakeup.wait(), left)
            except asyncio.TimeoutError:
                return None

    async def _work(self):
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self._next()]
            if self._key(batch[0]) is not None:
                deadline = loop.time() + self.timeout_seconds
                while sum(job.rows for job in batch) < self.max_batch_size:
                    # Requests that queued while the last batch ran join at once: the window may be spent already.
                    job = await self._next(deadline - loop.time())
                    if job is None:
                        break
                    batch.append(job)
            for group in self._groups(batch):
                await self._run_group(group)

    def _groups(self, batch):
        """`batch` split into the calls it runs as: mergeable requests together, up to `max_batch_size` each."""
        groups, open_groups = [], {}
        for job in batch:
            key = self._key(job)
            group = open_groups.get(key) if key is not None else None
            if group is None or sum(item.rows for item in group) + job.rows > self.max_batch_size:
                group = []
                groups.append(group)
                if key is not None:
                    open_groups[key] = group
            group.append(job)
        return groups

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

    async def _run_group(self, group):
        group = [job for job in group if not job.future.done()]
        if not group:
            return
        first = group[0]
        columns = {name: list(values) for name, values in first.columns.items()}
        if len(group) > 1:
            columns[self.batch_input] = [value for job in group for value in job.columns[self.batch_input]]
            for name in columns:
                if name != self.batch_input:
                    columns[name] = [first.columns[name][0]]
        try:
            outputs = await self._call(first.signature, columns, len(group))
        except Exception as error:
            if len(group) > 1:  # one request's bad input must not fail the others: each runs alone
                for job in group:
                    await self._run_group([job])
                return
            _settle(first.future, first.future.set_exception, error)
            return
        start, examples = 0, len(columns[self.batch_input])
        for job in group:
            rows = {key: value[start : start + job.rows] for key, value in outputs.items()}
            _settle(job.future, job.future.set_result, (rows, min(examples, self.max_batch_size)))
            start += job.rows

    async def _call(self, signature, columns, requests):
        """The model's outputs for `columns`, in calls of at most `max_batch_size` examples."""
        rows = len(columns[self.batch_input])
        parts = []
        for start in range(0, rows, self.max_batch_size):
            piece = {
                name: values[start : start + self.max_batch_size] if len(values) == rows else values
                for name, values in columns.items()
            }
            self.calls += 1
            if self.on_call is not None:
                self.on_call(signature, len(piece[self.batch_input]), requests)
            parts.append(await self.thread.call(self.run, signature, piece))
        return parts[0] if len(parts) == 1 else {key: _join([part[key] for part in parts]) for key in parts[0]}


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
