"""A large request's calls take turns with other clients' work, and `/healthz` tells a busy model from a stuck one.

Against the application `seqtasks serve` runs, on uvicorn in a thread of
this process, with test doubles of the model whose calls end when the test
says (`serving_support.SteppedModel`) or block (`FakeModel.gate`): every
assertion is about order and state, none about how long something took.
"""

import threading
import time

from seqtasks.errors import ModelFailure
from seqtasks.serving.limits import Capacity
from tests.support.serving_support import FakeModel, SteppedModel, fake_served, get_json, in_process_server, post_json


def _post_in_thread(url, body, answers, key):
    thread = threading.Thread(target=lambda: answers.__setitem__(key, post_json(url, body)))
    thread.start()
    return thread


def _until(condition, what, seconds=10):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def test_a_small_request_is_answered_while_a_large_one_is_still_in_progress_and_healthz_says_busy():
    model = SteppedModel()
    served = fake_served(("tiny", model))
    capacity = Capacity(max_batch_size=2, batch_timeout_ms=0.0)
    texts = [f"t{index}" for index in range(6)]
    with in_process_server(served, capacity=capacity, log_batches=True) as (url, log):
        predict, answers = url + "/v1/models/tiny:predict", {}
        large = _post_in_thread(predict, {"instances": texts}, answers, "large")
        assert model.next_call() == ("serving_default", texts[:2])
        # The model's call blocks: /healthz answers at once that it is busy with one request.
        status, health = get_json(url + "/healthz")
        assert (status, health["status"]) == (200, "ok")
        assert health["work"]["tiny"]["state"] == "busy" and health["work"]["tiny"]["requests"] == 1
        small = _post_in_thread(predict, {"instances": ["word"]}, answers, "small")
        _until(lambda: served["tiny"].batcher.queued() == 1, "the small request queued")
        model.step()
        assert model.next_call() == ("serving_default", ["word"])  # before the large request's next call
        model.step()
        small.join(10)
        assert answers == {"small": (200, {"predictions": ["WORD"]})}  # the large one is still in progress
        assert model.next_call() == ("serving_default", texts[2:4])
        status, health = get_json(url + "/healthz")
        assert status == 200 and health["work"]["tiny"]["state"] == "busy" and health["work"]["tiny"]["requests"] == 1
        model.step(2)
        large.join(10)
        assert answers["large"] == (200, {"predictions": [text.upper() for text in texts]})
    assert log == ["tiny: serving_default call of 2 examples from 1 requests",
                   "tiny: serving_default call of 1 examples from 1 requests",
                   "tiny: serving_default call of 2 examples from 1 requests",
                   "tiny: serving_default call of 2 examples from 1 requests"]


def test_healthz_says_a_model_that_finishes_no_call_within_the_request_timeout_is_stuck_then_recovers():
    model = FakeModel()
    model.gate.clear()
    served = fake_served(("tiny", model))
    capacity = Capacity(request_timeout_s=0.5, health_timeout_s=0.5, batch_timeout_ms=0.0)
    with in_process_server(served, capacity=capacity) as (url, _):
        answers = {}
        first = _post_in_thread(url + "/v1/models/tiny:predict", {"instances": ["first"]}, answers, "first")
        _until(lambda: served["tiny"].batcher.thread.busy_seconds() > 0, "the model's call started")
        seen = []
        _until(lambda: seen.append(get_json(url + "/healthz")) or seen[-1][0] != 200, "/healthz not 200")
        status, health = seen[-1]
        # Busy while its call may still finish in time; stuck once it has had work for longer than
        # --request-timeout-s with no call finished (the request itself was answered 504 meanwhile).
        assert all(body["work"]["tiny"]["state"] == "busy" for code, body in seen[:-1])
        assert status == 503 and health["status"] == "unavailable" and health["work"]["tiny"]["state"] == "stuck"
        assert health["error"].startswith("model 'tiny' is stuck: it has work and no call has finished for ")
        assert "(at most 0.5 s, --request-timeout-s)" in health["error"]
        first.join(10)
        assert answers["first"][0] == 504
        model.gate.set()
        _until(lambda: get_json(url + "/healthz")[0] == 200, "/healthz 200 again")
        assert get_json(url + "/healthz")[1]["work"]["tiny"]["state"] == "idle"


def test_an_idle_model_that_does_not_answer_its_probe_stays_unavailable_while_the_probe_blocks():
    model = FakeModel()
    model.gate.clear()  # the next call, the probe, blocks
    with in_process_server(fake_served(("tiny", model)), capacity=Capacity(health_timeout_s=0.3)) as (url, _):
        for _ in range(2):  # the second check finds the probe still running: not a busy model, but the same failure
            status, health = get_json(url + "/healthz")
            assert status == 503 and health["work"]["tiny"]["state"] == "unavailable"
            assert health["error"].startswith("model 'tiny' did not answer a one-example request within 0.3 s")
        model.gate.set()
        _until(lambda: get_json(url + "/healthz")[0] == 200, "/healthz 200 again")


def test_a_model_that_fails_its_probe_is_unavailable_and_the_other_models_are_reported():
    broken, working = FakeModel(), FakeModel()
    broken.failure = ModelFailure("the model failed: gone", "UnavailableError")
    with in_process_server(fake_served(("broken", broken), ("working", working))) as (url, _):
        status, health = get_json(url + "/healthz")
    assert status == 503 and health["models"] == ["broken", "working"]
    assert health["error"] == "model 'broken' failed a one-example request: the model failed: gone"
    assert health["work"]["broken"]["state"] == "unavailable" and health["work"]["working"]["state"] == "idle"
