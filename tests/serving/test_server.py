"""`seqtasks serve` read as a hostile client reads it, against a real server on 127.0.0.1.

The server is the application `seqtasks serve` runs, on uvicorn with its
own protocol and options, in a thread of this process; behind it are test
doubles of `SeqtasksModel` (`serving_support.FakeModel`) that record every
call and can be made to block, as a stuck model would. Every test is bounded
in requests and time.
"""

import base64
import concurrent.futures
import http.client
import json
import socket
import threading
import time

import pytest

from seqtasks.errors import ModelFailure, SeqtasksError
from seqtasks.serving.health import tiny_png
from seqtasks.serving.limits import Capacity, Limits
from tests.support.serving_support import FakeModel, fake_served, get_json, in_process_server, post_json, request

JSON = {"Content-Type": "application/json"}
SETTINGS = {"beam_width": 2, "n_best": 1, "max_length": 5, "length_penalty": 0.0}


def _port(url):
    return int(url.rsplit(":", 1)[1])


def _raw(url, data, timeout=10):
    """Sends `data` on a new connection; returns everything the server sent before closing (or timing out)."""
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=timeout) as connection:
        connection.sendall(data)
        received = b""
        try:
            while chunk := connection.recv(65536):
                received += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return received


def _status_and_json(answer):
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body) if body else None


def _work_calls(model):
    """The model's calls other than `/healthz` probes."""
    return [call for call in model.calls if call[1].get(model.input_name) not in (["health check"], [tiny_png()])]


def test_image_inputs_are_bytes_only_on_every_endpoint_and_no_path_reaches_the_model():
    model = FakeModel("captioning", binary=True)
    with in_process_server(fake_served(("captioner", model))) as (url, log):
        base = url + "/v1/models/captioner"
        for body in (
            {"instances": ["/etc/passwd"]},
            {"instances": [{"image": "/etc/passwd"}]},
            {"inputs": ["/etc/hostname"]},
            {"inputs": {"image": ["/"]}},
            {"signature_name": "with_settings", "instances": [{"image": "/etc/passwd", **SETTINGS}]},
            {"signature_name": "with_settings", "inputs": {"image": ["/etc/passwd"], **SETTINGS}},
        ):
            status, answer = post_json(base + ":predict", body)
            assert status == 400 and answer["error"].startswith('image[0]: expected {"b64": ...}'), (body, answer)
            assert "never reads a file path" in answer["error"]
        status, answer = post_json(base + ":attention", {"instances": ["/etc/passwd"]})
        assert status == 400 and "never reads a file path" in answer["error"]
        assert _work_calls(model) == []
        png = tiny_png(4)
        encoded = {"b64": base64.b64encode(png).decode()}
        assert post_json(base + ":predict", {"instances": [encoded]}) == (200, {"predictions": [str(len(png))]})
        assert post_json(base + ":attention", {"instances": [encoded]})[0] == 200
        assert [call[1]["image"] for call in _work_calls(model)] == [[png], [png]]  # the bytes, untouched
        # The image limits hold on the server as in the reader.
        status, answer = post_json(base + ":predict", {"instances": [{"b64": base64.b64encode(b"%PDF").decode()}]})
        assert status == 400 and answer["error"] == "image[0]: not a decodable image (JPEG, PNG or BMP expected)"
        huge = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\x0dIHDR" + (100_000).to_bytes(4, "big") * 2 + bytes(5)
        status, answer = post_json(base + ":predict", {"instances": [{"b64": base64.b64encode(huge).decode()}]})
        assert status == 413 and "(--max-image-pixels)" in answer["error"]


@pytest.mark.parametrize("host, allowed, status", [
    ("evil.example", (), 400),
    ("evil.example:{port}", (), 400),
    ("127.0.0.1.evil.example", (), 400),
    ("localhost.evil.example:{port}", (), 400),
    ("127.0.0.1:{port}", (), 200),
    ("LOCALHOST:{port}", (), 200),
    ("[::1]:{port}", (), 200),
    ("models.internal", ("models.internal",), 200),
    ("models.internal:443", ("Models.Internal",), 200),
    ("other.internal", ("models.internal",), 400),
    ("anything.example", ("*",), 200),
])
def test_requests_for_other_hosts_are_refused_so_dns_rebinding_gets_nothing(host, allowed, status):
    with in_process_server(fake_served(("tiny", FakeModel())), allowed_hosts=allowed) as (url, _):
        host = host.format(port=_port(url))
        body = json.dumps({"instances": ["a"]}).encode()
        for method, path, data in (("GET", "/healthz", b""), ("POST", "/v1/models/tiny:predict", body),
                                   ("GET", "/", b"")):
            answer = _raw(url, (f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                                f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n").encode() + data)
            got = int(answer.split()[1])
            assert got == status, (method, path, answer[:300])
            if status == 400:
                error = _status_and_json(answer)[1]["error"]
                assert error.startswith("Host ") and "is not served here" in error and "--allowed-host" in error


def test_a_request_without_a_host_header_is_refused():
    with in_process_server(fake_served(("tiny", FakeModel()))) as (url, _):
        status, answer = _status_and_json(_raw(url, b"GET /healthz HTTP/1.0\r\n\r\n"))
        assert status == 400 and answer["error"].startswith("Host (none) is not served here")


@pytest.mark.parametrize("content_type, status", [
    ("text/plain", 415),  # a cross-site form post: no preflight, so it must not run the model
    ("application/x-www-form-urlencoded", 415),
    ("multipart/form-data; boundary=x", 415),
    (None, 415),
    ("application/jsonx", 415),
    ("application/json", 200),
    ("Application/JSON; charset=utf-8", 200),
])
def test_post_bodies_must_be_json_so_a_cross_site_form_cannot_use_the_model(content_type, status):
    model = FakeModel()
    with in_process_server(fake_served(("tiny", model))) as (url, _):
        headers = {} if content_type is None else {"Content-Type": content_type}
        for action, body in ((":predict", {"instances": ["a"]}), (":attention", {"instances": ["a"]})):
            answer = request("POST", url + "/v1/models/tiny" + action, json.dumps(body).encode(), headers)
            assert answer[0] == status, answer
            if status == 415:
                assert answer[1]["error"].startswith("Content-Type: expected application/json")
        if status == 415:
            assert _work_calls(model) == []


@pytest.mark.slow  # its large bodies start the request-parsing process
def test_deep_huge_and_odd_json_is_answered_with_short_json_errors():
    with in_process_server(fake_served(("tiny", FakeModel())), limits=Limits(max_body_bytes=2 * 1024**2)) as (url, _):
        predict = url + "/v1/models/tiny:predict"
        cases = [
            (b"[" * 5000 + b"]" * 5000, 413, "JSON values"),  # more brackets than a request may hold
            (b'{"instances": ["a"], "' + b"k" * 1_000_000 + b'": 1}', 400, "unknown field"),
            (b'{"instances": ["\xff"]}', 400, "malformed JSON"),
            (b'{"instances": [1e999999]}', 400, "text[0]: expected a string"),
            (b"\x00" * 100_000, 400, "malformed JSON"),
        ]
        for body, status, message in cases:
            answer = request("POST", predict, body, JSON)
            assert answer[0] == status and message in answer[1]["error"], answer
            assert len(answer[1]["error"]) <= 500
    deep_enough = Limits(max_instances=100_000)  # a bound wide enough for nesting past Python's parser
    with in_process_server(fake_served(("tiny", FakeModel())), limits=deep_enough) as (url, log):
        for size in (5000, 200_000):  # parsed here, and in the worker process
            answer = request("POST", url + "/v1/models/tiny:predict", b"[" * size + b"]" * size, JSON)
            assert answer == (400, {"error": "malformed JSON: nested too deeply"})
        assert log == []


def _poll_health(url, stop, latencies):
    connection = http.client.HTTPConnection("127.0.0.1", _port(url), timeout=10)
    while not stop.is_set():
        started = time.perf_counter()
        connection.request("GET", "/healthz")
        answer = connection.getresponse()
        answer.read()
        latencies.append((started, time.perf_counter() - started, answer.status))
        time.sleep(0.005)
    connection.close()


@pytest.mark.slow  # its large bodies start the request-parsing process
@pytest.mark.parametrize("body", [
    b'{"instances": ["' + b"a," * (8 * 1024**2 - 12) + b'"]}',  # one text of 16 MiB: parsed, then over a limit
    b"[" + b"[]," * (16 * 1024**2 // 3 - 1) + b"[]]",  # 16 MiB of empty lists: counted, never parsed
    json.dumps({"signature_name": "with_settings", "inputs": {  # a columnar flood of setting values
        "text": ["a"], "beam_width": [2] * 1_700_000, "n_best": [1], "max_length": [5], "length_penalty": [0]}}).encode(),
])
def test_healthz_answers_within_100_ms_while_a_16_mib_request_is_parsed(body):
    assert len(body) <= 16 * 1024**2
    with in_process_server(fake_served(("tiny", FakeModel()))) as (url, _):
        get_json(url + "/healthz")
        # A parse on the event loop would hold every poll for its whole length (0.3 to 2 s here) on every try;
        # three tries keep a moment of a machine busy with other tests from failing a server that never stalls.
        attempts = []
        for _ in range(3):
            stop, latencies = threading.Event(), []
            poller = threading.Thread(target=_poll_health, args=(url, stop, latencies))
            poller.start()
            time.sleep(0.2)
            started = time.perf_counter()
            status, answer = request("POST", url + "/v1/models/tiny:predict", body, JSON)
            finished = time.perf_counter()
            time.sleep(0.1)
            stop.set()
            poller.join()
            assert status == 413 and "--max-" in answer["error"], answer
            assert all(code == 200 for _, _, code in latencies)
            during = [latency for begun, latency, _ in latencies if started <= begun <= finished]
            assert len(during) >= 3, (finished - started, during)
            attempts.append(max(during))
            if attempts[-1] < 0.1:
                break
    assert min(attempts) < 0.1, attempts


def _answer_on(connection):
    """`(status, JSON body)` of the answer on `connection`, read as far as its Content-Length."""
    def more():
        data = connection.recv(65536)
        assert data, "the server closed the connection before its answer ended"
        return data

    received = b""
    while b"\r\n\r\n" not in received:
        received += more()
    head, _, body = received.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += more()
    return int(head.split()[1]), json.loads(body)


def _chunk(data):
    return b"%x\r\n" % len(data) + data + b"\r\n"


def test_a_chunked_body_over_max_body_bytes_is_refused_while_it_streams_and_the_server_keeps_serving():
    model = FakeModel()
    head = (b"POST /v1/models/tiny:predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    with in_process_server(fake_served(("tiny", model)), limits=Limits(max_body_bytes=1000)) as (url, log):
        # Chunked and within the limit (1,000 bytes exactly): read whole and answered.
        text = "a" * (1000 - len(json.dumps({"instances": [""]})))
        body = json.dumps({"instances": [text]}).encode()
        assert len(body) == 1000
        with socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as connection:
            connection.sendall(head + _chunk(body[:300]) + _chunk(body[300:]) + b"0\r\n\r\n")
            assert _answer_on(connection) == (200, {"predictions": [text.upper()]})
        # 1,001 bytes, and a body that never ends: refused as soon as the limit is passed, with the JSON 413,
        # without a Content-Length to refuse it by and without waiting for the last chunk.
        for chunks in ([body, b" "], [b'{"instances": ["', b"a" * 600, b"a" * 600]):
            with socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as connection:
                connection.sendall(head + b"".join(_chunk(data) for data in chunks))
                assert _answer_on(connection) == (413, {"error": "request body over 1000 bytes (--max-body-bytes)"})
        assert post_json(url + "/v1/models/tiny:predict", {"instances": ["after"]}) == (200, {"predictions": ["AFTER"]})
        assert get_json(url + "/healthz")[0] == 200
    assert [call[1]["text"] for call in _work_calls(model)] == [[text], ["after"]]  # nothing refused reached it
    assert log == []


def test_slow_clients_cannot_hold_connections():
    capacity = Capacity(header_timeout_s=1.0, body_timeout_s=1.0)
    with in_process_server(fake_served(("tiny", FakeModel())), capacity=capacity) as (url, _):
        trickling = []
        for _ in range(20):  # headers a byte at a time: closed once the header deadline passes
            connection = socket.create_connection(("127.0.0.1", _port(url)), timeout=5)
            trickling.append(connection)
        started = time.monotonic()
        closed = set()
        message = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for index in range(len(message)):
            for position, connection in enumerate(trickling):
                if position in closed:
                    continue
                try:
                    connection.sendall(message[index : index + 1])
                    connection.setblocking(False)
                    if connection.recv(1) == b"":
                        closed.add(position)
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    closed.add(position)
                finally:
                    connection.setblocking(True)
            if len(closed) == len(trickling) or time.monotonic() - started > 4:
                break
            time.sleep(0.1)
        assert len(closed) == len(trickling) and time.monotonic() - started < 3
        for connection in trickling:
            connection.close()
        assert get_json(url + "/healthz")[0] == 200  # others are served meanwhile
        # A body that trickles gets 408 once the body deadline passes.
        with socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as connection:
            connection.sendall(b"POST /v1/models/tiny:predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n")
            answer = b""
            for byte in b'{"instances": ["a"]' * 5:
                try:
                    connection.sendall(bytes([byte]))
                except OSError:
                    break
                connection.setblocking(False)
                try:
                    answer += connection.recv(65536)
                except BlockingIOError:
                    pass
                connection.setblocking(True)
                if answer:
                    break
                time.sleep(0.1)
        status, error = _status_and_json(answer)
        assert status == 408 and error == {"error": "the request body took over 1 s (--body-timeout-s)"}


def _stuck(**options):
    """`(model, served, capacity)`: a model that blocks until `model.gate` is set, served as `tiny`."""
    model = FakeModel()
    model.gate.clear()
    capacity = Capacity(**{"batch_timeout_ms": 0.0, "health_timeout_s": 0.5, **options})
    return model, fake_served(("tiny", model)), capacity


def _started(served, url):
    """Sends one request that the stuck model takes (and blocks on); returns the thread waiting for it."""
    answers = []
    thread = threading.Thread(target=lambda: answers.append(
        post_json(url + "/v1/models/tiny:predict", {"instances": ["first"]})))
    thread.start()
    deadline = time.monotonic() + 10
    while served["tiny"].batcher.thread.busy_seconds() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    return thread, answers


def test_a_full_queue_is_answered_503_with_retry_after_in_both_formats():
    model, served, capacity = _stuck(max_queued=2)
    with in_process_server(served, capacity=capacity) as (url, _):
        first, _ = _started(served, url)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            queued = [pool.submit(post_json, url + "/v1/models/tiny:predict", {"instances": [text]})
                      for text in ("second", "third")]
            deadline = time.monotonic() + 10
            while served["tiny"].batcher.queued() < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            for body in ({"instances": ["fourth"]}, {"inputs": ["fourth"]}):
                answer = request("POST", url + "/v1/models/tiny:predict", json.dumps(body).encode(), JSON)
                assert answer[0] == 503 and answer[1] == {
                    "error": "2 requests are waiting for this model (--max-queued)"}
            call = urllib_headers(url + "/v1/models/tiny:predict", {"instances": ["fifth"]})
            assert call[0] == 503 and call[1]["Retry-After"] == "1"
            model.gate.set()
            assert [future.result()[0] for future in queued] == [200, 200]
        first.join(10)
    texts = [text for call in _work_calls(model) for text in call[1]["text"]]
    assert texts[0] == "first" and sorted(texts[1:]) == ["second", "third"]  # the refused ones never ran


def urllib_headers(url, body):
    import urllib.error
    import urllib.request

    call = urllib.request.Request(url, json.dumps(body).encode(), JSON)
    try:
        with urllib.request.urlopen(call, timeout=10) as answer:
            return answer.status, answer.headers
    except urllib.error.HTTPError as error:
        return error.code, error.headers


def test_a_stuck_model_is_answered_by_the_deadline_and_reflected_by_healthz():
    model, served, capacity = _stuck(request_timeout_s=1.0)
    with in_process_server(served, capacity=capacity) as (url, _):
        first, answers = _started(served, url)
        started = time.monotonic()
        queued = post_json(url + "/v1/models/tiny:predict", {"instances": ["queued"]})
        assert queued == (504, {"error": "no answer within 1 s (--request-timeout-s)"})
        assert 0.9 < time.monotonic() - started < 3
        first.join(10)
        assert answers == [(504, {"error": "no answer within 1 s (--request-timeout-s)"})]
        started = time.monotonic()
        status, health = get_json(url + "/healthz")
        assert status == 503 and health["status"] == "unavailable" and time.monotonic() - started < 2
        # Its call has run past --request-timeout-s with nothing finished: stuck, said without waiting on it.
        assert health["error"].startswith("model 'tiny' is stuck: it has work and no call has finished for ")
        assert health["work"]["tiny"]["state"] == "stuck"
        model.gate.set()
        deadline = time.monotonic() + 10
        while get_json(url + "/healthz")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        status, health = get_json(url + "/healthz")
        assert (status, health["status"], health["models"]) == (200, "ok", ["tiny"])
        assert health["work"] == {"tiny": {"state": "idle", "requests": 0, "call_s": 0.0, "since_progress_s": 0.0}}
    # The request that timed out while queued never ran; the one already running did, its answer discarded.
    assert [call[1]["text"] for call in _work_calls(model)] == [["first"]]


def test_a_client_that_leaves_drops_its_queued_work_without_a_logged_traceback():
    model, served, capacity = _stuck()
    with in_process_server(served, capacity=capacity) as (url, log):
        first, _ = _started(served, url)
        body = json.dumps({"instances": ["abandoned"]}).encode()
        with socket.create_connection(("127.0.0.1", _port(url))) as connection:
            connection.sendall(b"POST /v1/models/tiny:predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            deadline = time.monotonic() + 10
            while served["tiny"].batcher.queued() < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
        deadline = time.monotonic() + 10
        while served["tiny"].batcher.queued() > 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert served["tiny"].batcher.queued() == 0  # gone from the queue while the model is still stuck
        # A client that hangs up mid-body.
        with socket.create_connection(("127.0.0.1", _port(url))) as connection:
            connection.sendall(b"POST /v1/models/tiny:predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"instances\"")
        time.sleep(0.3)
        model.gate.set()
        first.join(10)
        assert post_json(url + "/v1/models/tiny:predict", {"instances": ["after"]}) == (200, {"predictions": ["AFTER"]})
    assert [call[1]["text"] for call in _work_calls(model)] == [["first"], ["after"]]
    assert log == []


def test_requests_past_the_concurrency_bound_are_answered_503():
    model, served, capacity = _stuck(max_concurrent_requests=2)
    with in_process_server(served, capacity=capacity) as (url, _):
        first, _ = _started(served, url)
        second = threading.Thread(target=post_json, args=(url + "/v1/models/tiny:predict", {"instances": ["b"]}))
        second.start()
        deadline = time.monotonic() + 10
        while served["tiny"].batcher.queued() < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        status, headers = urllib_headers(url + "/v1/models/tiny:predict", {"instances": ["c"]})
        assert status == 503 and headers["Retry-After"] == "1"
        assert get_json(url + "/healthz") == (503, {"error": "2 requests are being handled (--max-concurrent-requests)"})
        model.gate.set()
        first.join(10)
        second.join(10)
        assert get_json(url + "/healthz")[0] == 200


@pytest.mark.parametrize("columnar", [False, True])
def test_a_request_larger_than_the_batch_size_runs_in_batch_sized_calls(columnar):
    model = FakeModel()
    texts = [f"t{index}" for index in range(10)]
    with in_process_server(fake_served(("tiny", model)), capacity=Capacity(max_batch_size=4)) as (url, log):
        body = {"inputs": {"text": texts}} if columnar else {"instances": texts}
        status, answer = post_json(url + "/v1/models/tiny:predict", body)
        expected = [text.upper() for text in texts]
        assert status == 200 and (answer["outputs"] if columnar else answer["predictions"]) == expected
        settings = {"signature_name": "with_settings",
                    **({"inputs": {"text": texts, **SETTINGS}} if columnar else
                       {"instances": [{"text": text, **SETTINGS} for text in texts]})}
        status, answer = post_json(url + "/v1/models/tiny:predict", settings)
        assert status == 200
    assert [len(call[1]["text"]) for call in _work_calls(model)] == [4, 4, 2, 4, 4, 2]


def test_merged_requests_keep_their_own_settings_and_the_log_says_how_calls_were_made():
    model = FakeModel()
    capacity = Capacity(batch_timeout_ms=300.0, max_batch_size=8)
    with in_process_server(fake_served(("tiny", model)), capacity=capacity, log_batches=True) as (url, log):
        widths = [2, 3, 2, 3, 2, 3]
        barrier = threading.Barrier(len(widths))

        def send(index):
            barrier.wait()
            body = {"signature_name": "with_settings",
                    "instances": [{"text": f"s{index}", **SETTINGS, "beam_width": widths[index]}]}
            return post_json(url + "/v1/models/tiny:predict", body)

        with concurrent.futures.ThreadPoolExecutor(len(widths)) as pool:
            answers = list(pool.map(send, range(len(widths))))
    assert [answer[1]["predictions"][0] for answer in answers] == [
        {"output": f"S{index}", "width": widths[index]} for index in range(len(widths))]
    calls = [call for call in _work_calls(model) if call[0] == "with_settings"]
    assert len(calls) < len(widths) and all(len(set(call[1]["beam_width"])) == 1 for call in calls)
    assert any(len(call[1]["text"]) > 1 for call in calls)
    assert any(line.startswith("tiny: with_settings call of ") and line.endswith(" requests") for line in log)


@pytest.mark.parametrize("failure, status, message", [
    (ModelFailure("the model failed: out of memory", "ResourceExhaustedError"), 429, "the model failed: out of memory"),
    (ModelFailure("the model failed: gone", "UnavailableError"), 503, "the model failed: gone"),
    (ModelFailure("the model failed: odd", "DataLossError"), 500, "the model failed: odd"),
    (SeqtasksError("the model rejected the input: bad"), 400, "the model rejected the input: bad"),
    (RuntimeError("a bug"), 500, "internal error: RuntimeError"),
])
def test_model_failures_are_json_with_tensorflow_serving_s_status(failure, status, message):
    model = FakeModel()
    with in_process_server(fake_served(("tiny", model))) as (url, log):
        model.failure = failure
        assert post_json(url + "/v1/models/tiny:predict", {"instances": ["a"]}) == (status, {"error": message})
    if isinstance(failure, RuntimeError):  # a bug of the server's is logged with its traceback, once
        assert len(log) == 1 and "Traceback" in log[0] and "RuntimeError: a bug" in log[0]
    else:
        assert log == []


def test_tensorflow_serving_s_url_and_method_conventions():
    model = FakeModel()
    with in_process_server(fake_served(("tiny", model))) as (url, _):
        base = url + "/v1/models/tiny"
        status, body = request("HEAD", base)
        assert status == 200 and body == b""
        assert request("HEAD", base + "/metadata")[0] == 200
        assert get_json(base + "/versions/01")[0] == 200 and get_json(base + "/versions/0001/metadata")[0] == 200
        assert get_json(base + "/versions/2")[0] == 404
        assert get_json(base + "/versions/" + "9" * 5000)[0] == 404
        assert get_json(base + "/labels/stable") == (
            404, {"error": "model 'tiny' has no version label 'stable'; it serves version 1"})
        assert post_json(base + "/versions/01:predict", {"instances": ["a"]}) == (200, {"predictions": ["A"]})
        assert post_json(base + ":predict", {"signature_name": "", "instances": ["a"]}) == (200, {"predictions": ["A"]})
        assert post_json(base + ":predict", {"instances": [{"b64": base64.b64encode(b"abc").decode()}]}) == (
            200, {"predictions": ["ABC"]})
        for method, path, allow in (("GET", ":predict", "POST"), ("PUT", ":attention", "POST"),
                                    ("POST", "", "GET, HEAD"), ("DELETE", "/metadata", "GET, HEAD")):
            import urllib.error
            import urllib.request

            call = urllib.request.Request(base + path, method=method, data=b"{}" if method != "GET" else None,
                                          headers=JSON)
            with pytest.raises(urllib.error.HTTPError) as raised:
                urllib.request.urlopen(call, timeout=10)
            assert raised.value.code == 405 and raised.value.headers["Allow"] == allow
            assert json.loads(raised.value.read())["error"].endswith(f"use {allow.split(',')[0]}")
        status, headers = urllib_headers(url + "/healthz", {})  # a POST to a page
        assert status == 405 and headers["Allow"] == "GET, HEAD"
        assert get_json(url + "/static/nothing.js") == (404, {"error": "no such route: GET /static/nothing.js"})


def test_every_answer_carries_the_security_headers_and_the_page_its_policy():
    import urllib.request

    with in_process_server(fake_served(("tiny", FakeModel()))) as (url, _):
        for path in ("/", "/static/app.js", "/healthz", "/v1/models/tiny", "/v1/nothing"):
            try:
                answer = urllib.request.urlopen(url + path, timeout=10)
            except urllib.error.HTTPError as error:
                answer = error
            assert answer.headers["X-Content-Type-Options"] == "nosniff"
            assert answer.headers["X-Frame-Options"] == "DENY"
            policy = answer.headers["Content-Security-Policy"]
            assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
            assert "script-src 'self'" in policy and "unsafe" not in policy


@pytest.mark.slow  # starts the request-parsing process
def test_the_parsing_process_starts_with_the_first_large_body_and_again_after_it_failed():
    import asyncio

    from seqtasks.serving.parsing import INLINE_BYTES, Parser, ParserFailed

    signatures = FakeModel().signatures()
    texts = ["x" * 2000] * 40  # within every limit, over INLINE_BYTES together
    large = json.dumps({"instances": texts}).encode()
    assert len(large) > INLINE_BYTES
    expected = ("serving_default", {"text": texts}, True)

    async def exchange():
        parser = Parser()
        await parser.start()
        small = await parser.run("predict", b'{"instances": ["a"]}', signatures, Limits())
        assert small[1] == {"text": ["a"]} and parser._process is None  # small bodies start nothing
        assert await parser.run("predict", large, signatures, Limits()) == expected
        first = parser._process
        assert first is not None and first.returncode is None
        first.kill()
        await first.wait()
        with pytest.raises(ParserFailed, match="the request parser stopped"):
            await parser.run("predict", large, signatures, Limits())
        assert parser._process is None
        assert await parser.run("predict", large, signatures, Limits()) == expected  # a new worker
        assert parser._process is not first
        await parser.stop()

    asyncio.run(exchange())
