"""What the `seqtasks serve` tests share: a tiny translation export and a real server on 127.0.0.1."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from tests.conftest import REPO
from tests.support.trained_runs import SERVED_TRANSLATION


def tiny_translation_export(run_cache):
    """The tiny translation export both serving test files serve (`trained_runs.SERVED_TRANSLATION`, trained once
    a session): `(base path of its export, source texts)`."""
    root, run_dir, _ = run_cache.get(SERVED_TRANSLATION)
    sources = [line.split("\t")[0] for line in (run_dir / "translations.tsv").read_text().splitlines()[:4]]
    return root / "saved_models" / "tiny", sources


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def running_server(*models, extra_args=(), timeout=180):
    """`seqtasks serve` on a free port of 127.0.0.1, ready (its `/healthz` answers); yields its base URL.

    `models` are paths (the first is the positional PATH) or `NAME=PATH`
    strings (passed with `--model`). The server gets SIGTERM on exit. While
    it runs, `running_server.process` is its process and
    `running_server.output()` what it has printed (kept in a temporary file,
    so a long run cannot fill a pipe and stall it).
    """
    import tempfile

    port = free_port()
    args = [sys.executable, "-m", "seqtasks", "serve", "--port", str(port)]
    for model in models:
        model = str(model)
        args += ["--model", model] if "=" in model else [model]
    args += list(extra_args)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    log = tempfile.TemporaryFile(mode="w+")
    process = subprocess.Popen(args, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)

    def output():
        log.seek(0)
        return log.read()

    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise AssertionError(f"seqtasks serve exited with {process.returncode}:\n{output()}")
            with contextlib.suppress(OSError):
                if get_json(url + "/healthz")[0] == 200:
                    break
            if time.monotonic() > deadline:
                raise AssertionError("seqtasks serve did not answer /healthz in time")
            time.sleep(0.3)
        running_server.process, running_server.output = process, output
        yield url
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()


def request(method, url, body=None, headers=None, timeout=120):
    """`(status, parsed JSON or raw bytes)` of one HTTP request; HTTP errors are answers, not exceptions."""
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    call = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(call, timeout=timeout) as answer:
            status, payload, kind = answer.status, answer.read(), answer.headers.get("content-type", "")
    except urllib.error.HTTPError as error:
        status, payload, kind = error.code, error.read(), error.headers.get("content-type", "")
    return status, json.loads(payload) if kind.startswith("application/json") and method != "HEAD" else payload


def get_json(url):
    return request("GET", url)


def post_json(url, body):
    return request("POST", url, body, {"Content-Type": "application/json"})


class FakeModel:
    """A test double behind `SeqtasksModel`'s serving API: echoes its inputs, records every call, and blocks
    while `gate` is cleared (a stuck model).

    Its `serving_default` answers `output` = the input upper-cased (text) or
    its byte count (images); `with_settings` adds `width` = the beam width;
    `attention` answers the shapes `seqtasks.inference.api.attention_rows` reads.
    `failure`, when set, is raised by the next calls.
    """

    def __init__(self, task="translation", binary=False):
        import threading

        self.task = task
        self.input_name = "image" if binary else "text"
        self.binary_input = binary
        self.mergeable_signatures = ("serving_default", "with_settings")
        self.path = f"/fake/{task}"
        self.calls = []
        self.gate = threading.Event()
        self.gate.set()
        self.failure = None

    def signatures(self):
        text = {self.input_name: ("string", [None])}
        settings = {"beam_width": ("int32", [None]), "n_best": ("int32", [None]), "max_length": ("int32", [None]),
                    "length_penalty": ("float32", [None])}
        return {
            "serving_default": {"inputs": text, "outputs": {"output": ("string", [None])}},
            "with_settings": {"inputs": {**text, **settings}, "outputs": {"output": ("string", [None])}},
            "attention": {"inputs": text, "outputs": {"attention": ("float32", [None, None, None])}},
        }

    def run_signature(self, name, inputs):
        import numpy as np

        self.gate.wait()
        self.calls.append((name, {key: list(value) for key, value in inputs.items()}))
        if self.failure is not None:
            raise self.failure
        values = inputs[self.input_name]
        shown = [str(len(v)) if self.binary_input else (v.decode() if isinstance(v, bytes) else v).upper() for v in values]
        if name == "attention":
            tokens = np.array([[s.encode(), b""] for s in shown], object)
            return {"translation": np.array([s.encode() for s in shown], object), "score": np.zeros(len(values)),
                    "source_tokens": tokens, "target_tokens": tokens,
                    "attention": np.full((len(values), 2, 2), 0.5, np.float32)}
        outputs = {"output": np.array([s.encode() for s in shown], object)}
        if name == "with_settings":
            outputs["width"] = np.array(inputs["beam_width"] * (len(values) if len(inputs["beam_width"]) == 1 else 1))
        return outputs

    def decoding_defaults(self):
        return {"beam_width": 2, "n_best": 1, "max_length": 10, "length_penalty": 0.0}

    def label_names(self):
        return None


class SteppedModel(FakeModel):
    """A `FakeModel` whose every call, health probes included, announces itself and then waits for a permit, so a
    test decides when each call ends.

    `next_call()` gives `(signature, examples)` of the next call once it has
    started; `step(n)` lets `n` calls end; setting `released` lets every
    call run through (`in_process_server` does on exit).
    """

    def __init__(self, task="translation"):
        import queue
        import threading

        super().__init__(task)
        self.started = queue.Queue()
        self.permits = threading.Semaphore(0)
        self.released = threading.Event()

    def run_signature(self, name, inputs):
        self.started.put((name, list(inputs[self.input_name])))
        while not self.permits.acquire(timeout=0.05) and not self.released.is_set():
            pass
        return super().run_signature(name, inputs)

    def next_call(self, timeout=10):
        return self.started.get(timeout=timeout)

    def step(self, count=1):
        for _ in range(count):
            self.permits.release()


def fake_served(*models):
    """`{name: ServedModel}` of `(name, FakeModel)` pairs, as `seqtasks.serving.models.load_served` gives."""
    from seqtasks.serving.models import ServedModel

    return {name: ServedModel(name, 1, model, model.signatures()) for name, model in models}


@contextlib.contextmanager
def in_process_server(served, limits=None, capacity=None, allowed_hosts=(), log_batches=False):
    """`seqtasks serve`'s application on uvicorn in a thread of this process, on a free port of 127.0.0.1,
    with the server's own protocol and options; yields `(base URL, log lines)`."""
    import threading

    import uvicorn

    from seqtasks.serving.app import make_app
    from seqtasks.serving.limits import Capacity, Limits
    from seqtasks.serving.server import KEEP_ALIVE_SECONDS, header_deadline_protocol

    capacity = capacity or Capacity()
    lines = []
    app = make_app(served, limits or Limits(), capacity, allowed_hosts, log=lines.append, log_batches=log_batches)
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on",
                            timeout_keep_alive=KEEP_ALIVE_SECONDS, http=header_deadline_protocol(capacity.header_timeout_s))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise AssertionError("the in-process server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", lines
    finally:
        for model in served.values():
            for name in ("gate", "released"):  # a fake model's; a real one has none
                event = getattr(model.model, name, None)
                if event is not None:
                    event.set()
        server.should_exit = True
        thread.join(30)
