"""Concurrent requests to one model, merged into batches: up to a batch size, or a few milliseconds' wait.

A request joins a batch only with requests for the same signature and the
same values of every other input (the decoding settings), and only where
merging cannot change its answer: where every output has one row per
example and no axis sized by the batch's longest input (NER's padded tokens
are, so NER requests run one by one). Each model runs one call at a time on
its own thread, so TensorFlow's threads are not shared between calls.
"""

import asyncio
import concurrent.futures


class Batcher:
    """Runs `run(signature, columns) -> outputs` for queued requests, batch by batch.

    Args:
        run: the model's call, `SeqtasksModel.run_signature`.
        batch_input: the input that examples are stacked along (`text`, `image`).
        mergeable: the signature names whose requests may be merged.
        max_batch_size: most examples in one merged call.
        timeout_seconds: how long the first request of a batch waits for others.
    """

    def __init__(self, run, batch_input, mergeable, max_batch_size=32, timeout_seconds=0.005):
        self.run = run
        self.batch_input = batch_input
        self.mergeable = set(mergeable)
        self.max_batch_size = max_batch_size
        self.timeout_seconds = timeout_seconds
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="seqtasks-model")
        self.queue = None
        self.worker = None
        self.calls = 0

    def start(self):
        self.queue = asyncio.Queue()
        self.worker = asyncio.get_running_loop().create_task(self._work())

    async def stop(self):
        if self.worker is not None:
            self.worker.cancel()
        self.executor.shutdown(wait=True)

    async def call(self, function, *args):
        """`function(*args)` on the model's thread: for calls that are not merged (`SeqtasksModel.attention`)."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)

    async def submit(self, signature, columns):
        """`(outputs, examples)`: this request's outputs (NumPy arrays, one row per example) once its batch has
        run, and how many examples that model call had (the request's own, and any merged with them)."""
        future = asyncio.get_running_loop().create_future()
        await self.queue.put((signature, columns, future))
        return await future

    async def _work(self):
        while True:
            batch = [await self.queue.get()]
            deadline = asyncio.get_running_loop().time() + self.timeout_seconds
            while sum(len(item[1][self.batch_input]) for item in batch) < self.max_batch_size:
                # Requests that queued while the last batch ran join at once: the window may be spent already.
                if not self.queue.empty():
                    batch.append(self.queue.get_nowait())
                    continue
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(self.queue.get(), left))
                except asyncio.TimeoutError:
                    break
            for group in self._groups(batch):
                await self._run_group(group)

    def _groups(self, batch):
        """`batch` split into the calls it runs as: mergeable requests together, up to `max_batch_size` each."""
        groups, open_groups = [], {}
        for item in batch:
            key = self._key(item)
            group = open_groups.get(key) if key is not None else None
            if group is None or self._rows(group) + self._rows([item]) > self.max_batch_size:
                group = []
                groups.append(group)
                if key is not None:
                    open_groups[key] = group
            group.append(item)
        return groups

    def _key(self, item):
        signature, columns, _ = item
        if signature not in self.mergeable:
            return None
        others = []
        for name, values in sorted(columns.items()):
            if name == self.batch_input:
                continue
            if any(value != values[0] for value in values):
                return None  # the model itself reports mixed settings
            others.append((name, values[0]))
        return signature, tuple(others)

    def _rows(self, group):
        return sum(len(item[1][self.batch_input]) for item in group)

    async def _run_group(self, group):
        signature, first, _ = group[0]
        columns = {name: list(values) for name, values in first.items()}
        if len(group) > 1:
            columns[self.batch_input] = [value for item in group for value in item[1][self.batch_input]]
            for name in columns:
                if name != self.batch_input:
                    columns[name] = [first[name][0]]
        self.calls += 1
        try:
            outputs = await self.call(self.run, signature, columns)
        except Exception as error:
            if len(group) > 1:  # one request's bad input must not fail the others: each runs alone
                for item in group:
                    await self._run_group([item])
                return
            for _, _, future in group:
                if not future.done():
                    future.set_exception(error)
            return
        start, examples = 0, len(columns[self.batch_input])
        for _, item_columns, future in group:
            count = len(item_columns[self.batch_input])
            if not future.done():
                rows = {key: value[start : start + count] for key, value in outputs.items()}
                future.set_result((rows, examples))
            start += count
