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
from pathlib import Path

from conftest import REPO, run_recipe, write_sample_pairs

TRANSLATION_RECIPE = """
task: translation
name: tiny
seed: 3
data:
  path: pairs.tsv
  validation_size: 40
  max_length: 20
  source_vocab_size: 300
  target_vocab_size: 300
model:
  embedding_dim: 16
  encoder: {cell_type: gru, units: 16, bidirectional: true}
  decoder: {cell_type: gru, units: 32}
  attention: {type: luong, score: general}
  decoding: {beam_width: 3, n_best: 2, length_penalty: 0.6, max_length: 12}
training:
  epochs: 4
  batch_size: 32
  learning_rate: 0.01
"""


def tiny_translation_export(root):
    """Trains the tiny translation recipe in `root`; returns `(base path of its export, source texts)`."""
    root = Path(root)
    write_sample_pairs(root / "pairs.tsv", 300)
    (root / "tiny.yaml").write_text(TRANSLATION_RECIPE)
    run_dir, _ = run_recipe(root / "tiny.yaml", root / "runs", f"export.directory={root / 'saved_models'}")
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
    return status, json.loads(payload) if kind.startswith("application/json") else payload


def get_json(url):
    return request("GET", url)


def post_json(url, body):
    return request("POST", url, body, {"Content-Type": "application/json"})
