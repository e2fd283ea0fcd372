"""The batcher of `seqtasks serve`: requests merged by their settings, large ones in calls that take turns,
a bounded queue.
"""

import asyncio

import numpy as np
import pytest

from seqtasks.serving.batching import Batcher, QueueFull, _join


def _echo(calls):
    def run(signature, columns):
        calls.append((signature, {key: list(value) for key, value in columns.items()}))
        texts = columns["text"]
        return {"echo": np.array([text.upper() for text in texts]), "width": np.array([columns.get("w", [0])[0]] * len(texts))}

    return run


def _in_loop(scenario):
    return asyncio.run(scenario())


def test_the_batcher_merges_requests_with_the_same_settings_and_splits_the_answers():
    calls = []

    async def scenario():
        batcher = Batcher(_echo(calls), "text", {"serving_default", "with_settings"}, max_batch_size=6,
                          timeout_seconds=0.05)
        batcher.start()
        requests = [
            ("serving_default", {"text": ["a", "b"]}),
            ("serving_default", {"text": ["c"]}),
            ("with_settings", {"text": ["d"], "w": [3]}),
            ("with_settings", {"text": ["e", "f"], "w": [3, 3]}),
            ("with_settings", {"text": ["g"], "w": [5]}),  # other settings: never merged with d, e, f
            ("serving_default", {"text": ["h", "i"]}),  # the first window closed at 6 examples: the next one
            ("attention", {"text": ["j"]}),  # never merged
        ]
        answers = await asyncio.gather(*(batcher.submit(*request) for request in requests))
        await batcher.stop()
        return answers

    answers = _in_loop(scenario)
    assert [list(outputs["echo"]) for outputs, _ in answers] == [
        ["A", "B"], ["C"], ["D"], ["E", "F"], ["G"], ["H", "I"], ["J"]]
    assert [examples for _, examples in answers] == [3, 3, 3, 3, 1, 2, 1]
    assert [list(outputs["width"]) for outputs, _ in answers[2:5]] == [[3], [3, 3], [5]]
    assert sorted(tuple(call[1]["text"]) for call in calls) == sorted(
        [("a", "b", "c"), ("d", "e", "f"), ("g",), ("h", "i"), ("j",)])
    merged = next(call for call in calls if call[1]["text"] == ["d", "e", "f"])
    assert merged[1]["w"] == [3]  # one value of a setting stands for the merged call


def test_requests_whose_settings_differ_row_by_row_run_alone_with_their_own_settings():
    calls = []

    async def scenario():
        batcher = Batcher(_echo(calls), "text", {"with_settings"}, max_batch_size=8, timeout_seconds=0.05)
        batcher.start()
        answers = await asyncio.gather(
            batcher.submit("with_settings", {"text": ["a", "b"], "w": [3, 4]}),
            batcher.submit("with_settings", {"text": ["c"], "w": [3]}),
            batcher.submit("with_settings", {"text": ["d"], "w": [4]}),
        )
        await batcher.stop()
        return answers

    first, second, third = _in_loop(scenario)
    assert list(first[0]["echo"]) == ["A", "B"] and list(second[0]["width"]) == [3] and list(third[0]["width"]) == [4]
    assert sorted(tuple(call[1]["text"]) for call in calls) == [("a", "b"), ("c",), ("d",)]
    assert next(call for call in calls if call[1]["text"] == ["a", "b"])[1]["w"] == [3, 4]


@pytest.mark.parametrize("columnar", [False, True])
def test_a_request_larger_than_a_batch_runs_as_several_calls_whose_answers_join(columnar):
    calls = []
    texts = [str(index) for index in range(10)]

    async def scenario():
        batcher = Batcher(_echo(calls), "text", {"with_settings"}, max_batch_size=4, timeout_seconds=0.0)
        batcher.start()
        settings = [7] if columnar else [7] * 10
        outputs, examples = await batcher.submit("with_settings", {"text": texts, "w": settings})
        exact, _ = await batcher.submit("with_settings", {"text": texts[:4], "w": [7]})
        await batcher.stop()
        return outputs, examples, exact

    outputs, examples, exact = _in_loop(scenario)
    assert list(outputs["echo"]) == texts and list(outputs["width"]) == [7] * 10 and examples == 4
    assert [call[1]["text"] for call in calls] == [texts[:4], texts[4:8], texts[8:], texts[:4]]  # 4 fit in one call
    assert all(len(call[1]["w"]) in (1, len(call[1]["text"])) for call in calls)


def test_joined_outputs_are_padded_as_an_export_pads_them():
    tokens = _join([np.array([[b"a", b"b"]], object), np.array([[b"c", b"d", b"e"]], object)])
    assert tokens.tolist() == [[b"a", b"b", b""], [b"c", b"d", b"e"]]
    weights = _join([np.ones((1, 1, 2), np.float32), np.ones((2, 3, 1), np.float32)])
    assert weights.shape == (3, 3, 2) and weights[0].sum() == 2 and weights[1:].sum() == 6
    assert _join([np.array([1.5]), np.array([2.5, 3.5])]).tolist() == [1.5, 2.5, 3.5]


def test_one_request_s_bad_input_does_not_fail_the_requests_merged_with_it():
    def run(signature, columns):
        if "bad" in columns["text"]:
            raise ValueError("the model rejected the input: bad")
        return {"echo": np.array(columns["text"])}

    async def scenario():
        batcher = Batcher(run, "text", {"serving_default"}, max_batch_size=8, timeout_seconds=0.05)
        batcher.start()
        answers = await asyncio.gather(
            *(batcher.submit("serving_default", {"text": [text]}) for text in ("ok", "bad", "fine")),
            return_exceptions=True,
        )
        await batcher.stop()
        return answers

    good, bad, fine = _in_loop(scenario)
    assert list(good[0]["echo"]) == ["ok"] and list(fine[0]["echo"]) == ["fine"]
    assert isinstance(bad, ValueError) and "bad" in str(bad)


def test_the_queue_is_bounded_cancelled_requests_leave_it_and_probes_go_first():
    import threading

    gate, calls = threading.Event(), []
    echo = _echo(calls)

    def run(signature, columns):
        gate.wait()
        return echo(signature, columns)

    async def scenario():
        batcher = Batcher(run, "text", set(), max_batch_size=8, timeout_seconds=0.0, max_queued=2)
        batcher.start()
        running = batcher.submit("serving_default", {"text": ["running"]})
        while batcher.thread.busy_seconds() == 0:  # the first call has started and blocks
            await asyncio.sleep(0.01)
        kept = batcher.submit("serving_default", {"text": ["kept"]})
        dropped = batcher.submit("serving_default", {"text": ["dropped"]})
        assert batcher.queued() == 2
        with pytest.raises(QueueFull, match=r"2 requests are waiting for this model \(--max-queued\)"):
            batcher.submit("serving_default", {"text": ["refused"]})
        dropped.cancel()  # its client left: the place is free again, and it never runs
        assert batcher.queued() == 1
        late = batcher.submit("serving_default", {"text": ["late"]})
        probe = batcher.submit("serving_default", {"text": ["probe"]}, priority=True)  # never refused
        gate.set()
        await asyncio.gather(running, kept, late, probe)
        await batcher.stop()

    _in_loop(scenario)
    assert [call[1]["text"] for call in calls] == [["running"], ["probe"], ["kept"], ["late"]]


class _Stepped:
    """A model call that announces itself (`started`, a thread-safe queue of the texts it got) and then waits for a
    permit (`step()`), so a test decides when each call ends."""

    def __init__(self):
        import queue
        import threading

        self.started = queue.Queue()
        self._permits = threading.Semaphore(0)
        self.calls = []
        self._echo = _echo(self.calls)

    def __call__(self, signature, columns):
        self.started.put(list(columns["text"]))
        self._permits.acquire()
        return self._echo(signature, columns)

    def step(self, count=1):
        for _ in range(count):
            self._permits.release()

    async def next_call(self):
        """The texts of the next call once it has started (it then waits for `step`)."""
        return await asyncio.get_running_loop().run_in_executor(None, self.started.get, True, 10)


def _finished_in_order(futures):
    """A list that each future's name joins when it is done."""
    order = []
    for name, future in futures.items():
        future.add_done_callback(lambda _, name=name: order.append(name))
    return order


def test_a_large_request_s_calls_take_turns_with_requests_that_came_while_one_ran():
    model = _Stepped()
    texts = [f"t{index}" for index in range(6)]

    async def scenario():
        batcher = Batcher(model, "text", {"serving_default"}, max_batch_size=2, timeout_seconds=0.0)
        batcher.start()
        large = batcher.submit("serving_default", {"text": texts})
        assert await model.next_call() == texts[:2]  # its first call runs, and holds the model
        small = batcher.submit("serving_default", {"text": ["word"]})
        order = _finished_in_order({"large": large, "small": small})
        model.step()
        assert await model.next_call() == ["word"]  # before the large request's second call
        model.step()
        assert (await small)[0]["echo"].tolist() == ["WORD"]
        assert order == ["small"] and not large.done()  # answered while the large one is still in progress
        assert await model.next_call() == texts[2:4]
        model.step()
        assert await model.next_call() == texts[4:]
        model.step()
        outputs, examples = await large
        await batcher.stop()
        return outputs, examples, order

    outputs, examples, order = _in_loop(scenario)
    assert outputs["echo"].tolist() == [text.upper() for text in texts] and examples == 2  # joined, in order
    assert order == ["small", "large"]


def test_large_requests_take_turns_call_by_call_and_a_cancelled_one_runs_no_further():
    model = _Stepped()

    async def scenario():
        batcher = Batcher(model, "text", {"serving_default"}, max_batch_size=2, timeout_seconds=0.0)
        batcher.start()
        first = batcher.submit("serving_default", {"text": ["a1", "a2", "a3", "a4", "a5"]})
        second = batcher.submit("serving_default", {"text": ["b1", "b2", "b3", "b4"]})
        third = batcher.submit("serving_default", {"text": ["c1", "c2", "c3", "c4", "c5", "c6"]})
        seen = []
        for _ in range(5):
            seen.append(await model.next_call())
            if len(seen) == 5:
                third.cancel()  # its client left after its first call: its other two never run
            model.step()
        seen.append(await model.next_call())  # the first request's last piece, merged with nothing
        model.step()
        answers = await asyncio.gather(first, second)
        assert model.started.empty()
        await batcher.stop()
        return seen, answers

    seen, (first, second) = _in_loop(scenario)
    assert seen == [["a1", "a2"], ["b1", "b2"], ["c1", "c2"], ["a3", "a4"], ["b3", "b4"], ["a5"]]
    assert first[0]["echo"].tolist() == ["A1", "A2", "A3", "A4", "A5"] and second[0]["echo"].tolist() == [
        "B1", "B2", "B3", "B4"]
    assert [call[1]["text"] for call in model.calls] == seen


def test_a_large_request_s_last_piece_merges_with_requests_of_the_same_settings():
    calls = []

    async def scenario():
        batcher = Batcher(_echo(calls), "text", {"with_settings"}, max_batch_size=4, timeout_seconds=0.05)
        batcher.start()
        large = batcher.submit("with_settings", {"text": list("abcdef"), "w": [3] * 6})
        small = batcher.submit("with_settings", {"text": ["g"], "w": [3]})
        other = batcher.submit("with_settings", {"text": ["h"], "w": [5]})
        answers = await asyncio.gather(large, small, other)
        await batcher.stop()
        return answers

    (large, large_examples), (small, small_examples), (other, _) = _in_loop(scenario)
    assert large["echo"].tolist() == list("ABCDEF") and small["echo"].tolist() == ["G"] and other["width"].tolist() == [5]
    # The first call is full; the small request of the same settings goes next, and the large one's last piece
    # joins it; the request of other settings waits for its own call.
    assert [call[1]["text"] for call in calls] == [list("abcd"), ["g", "e", "f"], ["h"]]
    assert (large_examples, small_examples) == (4, 3)


def test_progress_says_whether_the_model_has_work_without_waiting_on_it():
    model = _Stepped()

    async def scenario():
        batcher = Batcher(model, "text", {"serving_default"}, max_batch_size=2, timeout_seconds=0.0)
        batcher.start()
        idle = batcher.progress()
        large = batcher.submit("serving_default", {"text": ["a", "b", "c"]})
        await model.next_call()
        probe = batcher.submit("serving_default", {"text": ["probe"]}, priority=True)
        small = batcher.submit("serving_default", {"text": ["d"]})
        running = batcher.progress()  # read while the call blocks
        model.step(4)
        await asyncio.gather(large, probe, small)
        after = batcher.progress()
        await batcher.stop()
        return idle, running, after

    idle, running, after = _in_loop(scenario)
    assert idle == {"busy": False, "requests": 0, "call_s": 0.0, "since_progress_s": 0.0}
    assert running["busy"] and running["requests"] == 2 and running["call_s"] >= 0  # probes are not requests
    assert running["since_progress_s"] >= running["call_s"]  # no call has finished since the work began
    assert after == idle
