"""Head-of-line blocking in `seqtasks serve`: how long a one-word request and `/healthz` wait behind a maximal request.

    python -m benchmarks.serving_head_of_line EXPORT [--checkout NAME=DIR ...] [--repeats N] [--delay S]

EXPORT is a translation export with the `with_settings` signature (a base
path, a version folder or a run folder, as `seqtasks serve` takes). Each
`--checkout NAME=DIR` (default: this checkout, as `current`) is served by
`seqtasks serve EXPORT --log-batches` run from DIR's code (`python -m
seqtasks` in DIR, DIR first on `PYTHONPATH`) on a free port of 127.0.0.1,
with its defaults (`--max-instances 64`; `--max-batch-size` is this
script's, 32 as the server's by default). The servers
are started one after the other, then each repeat runs on each of them in
turn, so an A/B comparison shares the machine's moments:

1. the maximal request: 64 Spanish sentences of 60 to 99 characters (a
   seeded sample of the Anki pairs the translation recipe reads),
   `with_settings` with beam_width 16, n_best 16 and max_length 256, one
   request (a call of 32 takes seconds; one output that never ends runs its
   call to 256 tokens, about ten times as long);
2. `--delay` seconds after it was sent (its first model call is running), a
   one-word request (`serving_default`, "Hola") and `GET /healthz`, at once,
   each on its own connection.

Recorded, per repeat: each one's seconds from sending to its answer, its
status, the `/healthz` body, whether the one-word request was answered
before the maximal one, and the model calls the server logged meanwhile; per
server, the same one-word request and `/healthz` on the idle server. Prints
one JSON object (medians first), and writes it to `--output` if given.
A run of 3 repeats on 2 servers takes about 3 minutes on 2 CPU cores.
"""

import argparse
import gzip
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO / "recipes" / "data" / "spa-eng.txt.gz"
MAXIMAL = {"beam_width": 16, "n_best": 16, "max_length": 256}
INSTANCES = 64  # `seqtasks serve --max-instances`' default
ONE_WORD = "Hola"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serving_head_of_line",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("export", type=Path, help="a translation export (or run folder) with with_settings")
    parser.add_argument("--checkout", action="append", default=[], metavar="NAME=DIR",
                        help="serve with DIR's code, reported as NAME (repeatable; default current=this checkout)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--delay", type=float, default=1.0,
                        help="seconds between sending the maximal request and the one-word one")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="English<TAB>Spanish pairs (.gz)")
    parser.add_argument("--seed", type=int, default=20261128)
    parser.add_argument("--shortest", type=int, default=60, help="fewest characters of a sampled sentence")
    parser.add_argument("--longest", type=int, default=99, help="most characters of a sampled sentence")
    parser.add_argument("--max-batch-size", type=int, default=32, help="passed to seqtasks serve (its default: 32)")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    checkouts = []
    for item in args.checkout or [f"current={REPO}"]:
        name, separator, folder = item.partition("=")
        if not separator or not (Path(folder) / "seqtasks" / "__init__.py").is_file():
            parser.error(f"--checkout {item}: expected NAME=DIR, DIR a checkout holding seqtasks/")
        checkouts.append((name, Path(folder).resolve()))
    texts = sentences(args.data, INSTANCES, args.seed, args.shortest, args.longest)
    result = {
        "command": "python -m benchmarks.serving_head_of_line " + " ".join(sys.argv[1:] if argv is None else argv),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "export": str(args.export),
        "cpu_count": os.cpu_count(),
        "load_average_at_start": [round(value, 2) for value in os.getloadavg()],
        "maximal_request": {"instances": len(texts), "signature_name": "with_settings", **MAXIMAL,
                            "characters": f"{args.shortest}..{args.longest}", "seed": args.seed},
        "delay_s": args.delay,
        "max_batch_size": args.max_batch_size,
    }
    servers = {}
    try:
        for name, folder in checkouts:
            print(f"starting {name} ({folder})", file=sys.stderr, flush=True)
            servers[name] = Server(args.export, folder, args.max_batch_size)
            servers[name].start()
            warm_up(servers[name], texts)
        runs = {name: {"idle": idle(server), "rounds": []} for name, server in servers.items()}
        for repeat in range(args.repeats):
            for name, server in servers.items():
                print(f"repeat {repeat + 1}: {name}", file=sys.stderr, flush=True)
                runs[name]["rounds"].append(one_round(server, texts, args.delay))
    finally:
        for server in servers.values():
            server.stop()
    result["load_average_at_end"] = [round(value, 2) for value in os.getloadavg()]
    result["medians"] = {name: medians(run["rounds"]) for name, run in runs.items()}
    result["servers"] = runs
    text = json.dumps(result, indent=2)
    print(text)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text + "\n")
    return 0


def sentences(path, count, seed, shortest, longest):
    """A seeded sample of `count` Spanish sentences (the pairs' second column) of `shortest` to `longest`
    characters."""
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        spanish = sorted({line.rstrip("\n").split("\t")[1] for line in lines if line.count("\t") >= 1})
    return random.Random(seed).sample([text for text in spanish if shortest <= len(text) <= longest], count)


class Server:
    """`seqtasks serve EXPORT --log-batches` from `folder`'s code, on a free port; its output in a temporary file."""

    def __init__(self, export, folder, max_batch_size=32):
        self.export, self.folder, self.max_batch_size = export, folder, max_batch_size
        self.log = tempfile.NamedTemporaryFile("w+", prefix="serving_head_of_line_", suffix=".log", delete=False)
        self.process = self.port = None

    def start(self, timeout=300):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(self.folder)}
        command = [sys.executable, "-m", "seqtasks", "serve", str(Path(self.export).resolve()), "--port", str(self.port),
                   "--log-batches", "--max-batch-size", str(self.max_batch_size)]
        self.process = subprocess.Popen(command, cwd=self.folder, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"seqtasks serve exited with {self.process.returncode}; see {self.log.name}")
            try:
                if self.request("GET", "/healthz", timeout=10)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise SystemExit(f"seqtasks serve did not answer /healthz in {timeout} s; see {self.log.name}")

    def request(self, method, path, body=None, timeout=300):
        """`(status, parsed JSON, seconds from sending to the whole answer)` on a new connection."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        data = None if body is None else json.dumps(body).encode()
        started = time.perf_counter()
        try:
            connection.request(method, path, data, headers)
            answer = connection.getresponse()
            payload = answer.read()
            return answer.status, json.loads(payload), time.perf_counter() - started
        finally:
            connection.close()

    def logged(self):
        self.log.flush()
        return Path(self.log.name).read_text()

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def maximal(texts):
    return {"signature_name": "with_settings", "instances": [{"text": text, **MAXIMAL} for text in texts]}


def one_word():
    return {"instances": [ONE_WORD]}


def warm_up(server, texts):
    """Each request kind once, so no round pays a first call's costs."""
    for body in (maximal(texts[:2]), one_word()):
        status, answer, _ = server.request("POST", "/v1/models/" + model_name(server) + ":predict", body)
        if status != 200:
            raise SystemExit(f"warm-up request answered {status}: {answer}")


def model_name(server):
    if not hasattr(server, "_name"):
        server._name = server.request("GET", "/healthz")[1]["models"][0]
    return server._name


def idle(server):
    """The one-word request and `/healthz` on the idle server."""
    _, _, word = server.request("POST", f"/v1/models/{model_name(server)}:predict", one_word())
    status, _, health = server.request("GET", "/healthz")
    return {"one_word_s": round(word, 3), "healthz_s": round(health, 3), "healthz_status": status}


def one_round(server, texts, delay):
    path = f"/v1/models/{model_name(server)}:predict"
    logged_before = len(server.logged().splitlines())
    results, finished = {}, {}

    def send(key, method, route, body=None):
        status, answer, seconds = server.request(method, route, body)
        finished[key] = time.perf_counter()
        results[key] = (status, answer, seconds)

    big = threading.Thread(target=send, args=("maximal", "POST", path, maximal(texts)))
    big.start()
    time.sleep(delay)
    others = [threading.Thread(target=send, args=("one_word", "POST", path, one_word())),
              threading.Thread(target=send, args=("healthz", "GET", "/healthz"))]
    for thread in others:
        thread.start()
    for thread in [big, *others]:
        thread.join()
    calls = [line for line in server.logged().splitlines()[logged_before:] if " call of " in line]
    return {
        "maximal_s": round(results["maximal"][2], 3),
        "maximal_status": results["maximal"][0],
        "one_word_s": round(results["one_word"][2], 3),
        "one_word_status": results["one_word"][0],
        "healthz_s": round(results["healthz"][2], 3),
        "healthz_status": results["healthz"][0],
        "healthz": results["healthz"][1],
        "one_word_answered_first": finished["one_word"] < finished["maximal"],
        "model_calls": calls,
    }


def medians(rounds):
    keys = ("maximal_s", "one_word_s", "healthz_s")
    out = {key: round(statistics.median(item[key] for item in rounds), 3) for key in keys}
    for key in ("maximal", "one_word", "healthz"):
        out[f"{key}_statuses"] = [item[f"{key}_status"] for item in rounds]
    out["one_word_answered_first"] = [item["one_word_answered_first"] for item in rounds]
    return out


if __name__ == "__main__":
    sys.exit(main())
