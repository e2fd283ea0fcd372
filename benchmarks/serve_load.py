"""`seqtasks serve` under load: requests/s and latency against the model in process, and memory under oversized requests.

    python -m benchmarks.serve_load [--export PATH] [--requests N] [--seconds S] [--output PATH]

Source sentences are a seeded sample of the Spanish side of the Anki
Spanish-English pairs (`../shared/data/anki-spa-eng`, default 500 of them);
nothing is downloaded. One thing computes at a time:

1. in process: the export loaded with `seqtasks.load`, `.translate(sentence)`
   called one sentence at a time (1 client), then lists of 32 sentences;
2. `seqtasks serve EXPORT` on a free port of 127.0.0.1: 1, 8 and 64 client
   threads, each with its own keep-alive connection, send one-sentence
   `:predict` requests in a closed loop, each level bounded by `--requests`
   and `--seconds`; every answer must be 200 with a non-empty translation
   (the mean examples a model call from the server's `--log-batches` lines);
3. the server's RSS (`/proc/PID/status` VmRSS) before, during and after two
   rounds of 1,100 oversized requests from 8 threads: 500 bodies of 20 MiB
   with a Content-Length (over `--max-body-bytes`), 100 sent chunked without
   one (the limit counted while streaming), and 500 texts of 50,000
   characters (over `--max-text-characters`); every answer must be 413
   naming the limit, and a predict must still be answered after;
4. SIGTERM to the server, which must exit 0;
5. overload: `seqtasks serve EXPORT --max-queued 16` against 64 client
   threads for `--overload-seconds`, twice: clients that send again at once
   whatever the answer, then clients that wait the `Retry-After` of a 503;
   accepted (200) and rejected (503, naming `--max-queued`, with
   `Retry-After`) requests/s, the latency of each, and the peak RSS of the
   server and its request parser; then SIGTERM.

Each level also records the CPU seconds other processes used meanwhile
(from /proc), since other work on the machine skews every figure.

Prints a Markdown table and writes the same as JSON to `--output` (default
`runs/serve_load/serve_load.json`; the servers' logs beside it). The
defaults take about 4 minutes on 2 CPU cores.
"""

import argparse
import gzip
import http.client
import json
import os
import random
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_EXPORT = REPO / "saved_models" / "translation-anki-spa-eng"
DEFAULT_DATA = REPO.parent / "shared" / "data" / "anki-spa-eng" / "spa.txt.gz"
LEVELS = (1, 8, 64)
MAX_BODY_BYTES = 16 * 1024**2
MAX_TEXT_CHARACTERS = 10_000


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve_load", description=__doc__.splitlines()[0])
    parser.add_argument("--export", type=Path, default=None,
                        help=f"the translation export to serve (default {DEFAULT_EXPORT.relative_to(REPO)})")
    parser.add_argument("--requests", type=int, default=1000, help="most requests per level (and in process)")
    parser.add_argument("--seconds", type=float, default=60.0, help="most seconds per level (and in process)")
    parser.add_argument("--sentences", type=int, default=500, help="source sentences, a seeded sample")
    parser.add_argument("--seed", type=int, default=20261124)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the Anki pairs, English<TAB>Spanish (.gz)")
    parser.add_argument("--max-batch-size", type=int, default=32, help="passed to seqtasks serve")
    parser.add_argument("--batch-timeout-ms", type=float, default=5.0, help="passed to seqtasks serve")
    parser.add_argument("--oversized", type=int, default=500, help="requests of each oversized kind (chunked: a fifth)")
    parser.add_argument("--overload-clients", type=int, default=64, help="client threads of the overload run")
    parser.add_argument("--overload-queue", type=int, default=16, help="--max-queued of the overload run's server")
    parser.add_argument("--overload-seconds", type=float, default=30.0, help="length of the overload run")
    parser.add_argument("--output", type=Path, default=Path("runs/serve_load/serve_load.json"))
    args = parser.parse_args(argv)
    export = args.export
    if export is None:
        if not DEFAULT_EXPORT.exists():
            parser.error(f"no {DEFAULT_EXPORT.relative_to(REPO)}: give --export PATH")
        export = DEFAULT_EXPORT
    if not args.data.exists():
        parser.error(f"no data file {args.data}")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args.output.parent.mkdir(parents=True, exist_ok=True)

    sentences = load_sentences(args.data, args.sentences, args.seed)
    result = {
        "command": "python -m benchmarks.serve_load " + " ".join(sys.argv[1:] if argv is None else argv),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "export": str(export),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],  # other work on the machine skews it all
        "sentences": f"{len(sentences)} Spanish sentences of {args.data.name}, seed {args.seed}",
        "settings": {"requests": args.requests, "seconds": args.seconds, "max_batch_size": args.max_batch_size,
                     "batch_timeout_ms": args.batch_timeout_ms, "max_body_bytes": MAX_BODY_BYTES,
                     "max_text_characters": MAX_TEXT_CHARACTERS},
    }

    print(f"in process: loading {export}", flush=True)
    result["in_process"] = in_process(export, sentences, args.requests, args.seconds)
    from benchmarks.records import machine_description

    result["machine"] = machine_description()

    log_path = args.output.with_name("server.log")
    server = Server(export, log_path, args.max_batch_size, args.batch_timeout_ms)
    try:
        server.start()
        result["server_startup_s"] = round(server.startup_seconds, 1)
        result["rss_after_startup_mib"] = rss_mib(server.process.pid)
        warm_up(server, sentences)
        result["levels"] = []
        for clients in LEVELS:
            print(f"serve: {clients} client(s)", flush=True)
            result["levels"].append(load_level(server, sentences, clients, args.requests, args.seconds))
        result["memory"] = oversized(server, args.oversized)
    finally:
        result["shutdown"] = server.stop()
    queue = ["--max-queued", str(args.overload_queue)]
    busy = Server(export, args.output.with_name("server_overload.log"), args.max_batch_size, args.batch_timeout_ms, queue)
    try:
        busy.start()
        warm_up(busy, sentences)
        result["overload"] = [
            overload(busy, sentences, args.overload_clients, args.overload_queue, args.overload_seconds, polite)
            for polite in (False, True)
        ]
    finally:
        result["overload_shutdown"] = busy.stop()
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print()
    print(markdown(result))
    print(f"\n(written to {args.output}; the server's log: {log_path})")
    failed = sum(level["errors"] for level in result["levels"]) + result["memory"]["errors"]
    failed += sum(run["errors"] for run in result["overload"])
    stopped = result["shutdown"]["exit_code"] == 0 and result["overload_shutdown"]["exit_code"] == 0
    return 1 if failed or not stopped else 0


def load_sentences(path, count, seed):
    """A seeded sample of `count` distinct Spanish sentences (the second column)."""
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        spanish = sorted({line.rstrip("\n").split("\t")[1] for line in lines if "\t" in line})
    return random.Random(seed).sample(spanish, count)


# In process


def in_process(export, sentences, requests, seconds):
    import gc

    import seqtasks

    model = seqtasks.load(export)
    model.translate(sentences[0])  # the first call traces
    model.translate(sentences[:32], batch_size=32)
    latencies = []
    started = time.perf_counter()
    with OtherLoad() as other:
        for index in range(requests):
            if time.perf_counter() - started > seconds:
                break
            before = time.perf_counter()
            model.translate(sentences[index % len(sentences)])
            latencies.append(time.perf_counter() - before)
    one = summary("in process, 1 client, one sentence a call", latencies, time.perf_counter() - started, 0)
    one["other_cpu_s"] = other.seconds
    print(f"  {one['requests']} sentences, {one['requests_per_s']} /s; other processes used {other.seconds} CPU s",
          flush=True)

    latencies, done = [], 0
    started = time.perf_counter()
    with OtherLoad() as other:
        while done < requests and time.perf_counter() - started <= seconds:
            batch = [sentences[(done + i) % len(sentences)] for i in range(min(32, requests - done))]
            before = time.perf_counter()
            model.translate(batch, batch_size=32)
            latencies.append(time.perf_counter() - before)
            done += len(batch)
    batched = summary("in process, lists of 32 sentences", latencies, time.perf_counter() - started, 0)
    batched["other_cpu_s"] = other.seconds
    batched.update(requests=done, requests_per_s=round(done / sum(latencies), 1), calls=len(latencies),
                   note="requests are sentences; p50/p99 are per call of 32")
    print(f"  batched: {done} sentences, {batched['requests_per_s']} /s", flush=True)
    del model
    gc.collect()
    return [one, batched]


# The server


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """`seqtasks serve EXPORT` on a free port of 127.0.0.1, its output in `log_path`."""

    def __init__(self, export, log_path, max_batch_size, batch_timeout_ms, extra=()):
        self.port = free_port()
        self.command = [
            sys.executable, "-m", "seqtasks", "serve", str(export), "--host", "127.0.0.1", "--port", str(self.port),
            "--max-batch-size", str(max_batch_size), "--batch-timeout-ms", str(batch_timeout_ms),
            "--max-body-bytes", str(MAX_BODY_BYTES), "--max-text-characters", str(MAX_TEXT_CHARACTERS),
            "--log-batches", *extra,
        ]
        self.log_path = log_path
        self.process = None
        self.name = None

    def start(self, timeout=300):
        print(" ".join(self.command), flush=True)
        self.log = open(self.log_path, "w")
        started = time.perf_counter()
        self.process = subprocess.Popen(self.command, cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT)
        while True:
            if self.process.poll() is not None:
                raise SystemExit(f"seqtasks serve exited with {self.process.returncode}; see {self.log_path}")
            try:
                status, body = self.request("GET", "/healthz", timeout=5)
                if status == 200:
                    self.name = json.loads(body)["models"][0]
                    break
            except OSError:
                pass
            if time.perf_counter() - started > timeout:
                raise SystemExit(f"seqtasks serve did not answer /healthz in {timeout} s; see {self.log_path}")
            time.sleep(0.3)
        self.startup_seconds = time.perf_counter() - started
        self.log.flush()
        self.predict_path = f"/v1/models/{self.name}:predict"
        print(f"  ready in {self.startup_seconds:.1f} s, model {self.name!r}, pid {self.process.pid}", flush=True)

    def logged_calls(self, start=0):
        """`(examples of each model call logged since byte `start` of the log, the log's size now)`."""
        self.log.flush()
        with open(self.log_path, "rb") as log:
            log.seek(start)
            text = log.read()
        found = re.findall(rb": serving_default call of (\d+) examples", text)
        return [int(size) for size in found], start + len(text)

    def connection(self, timeout=120):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, timeout=120):
        connection = self.connection(timeout)
        try:
            connection.request(method, path, body, {"Content-Type": "application/json"} if body else {})
            answer = connection.getresponse()
            return answer.status, answer.read()
        finally:
            connection.close()

    def stop(self):
        """SIGTERM; `{"exit_code", "seconds"}` (the exit code None if it had to be killed after 60 s)."""
        if self.process is None:
            return {"exit_code": None, "seconds": None}
        if self.process.poll() is not None:
            return {"exit_code": self.process.returncode, "seconds": 0.0, "note": "had exited before SIGTERM"}
        started = time.perf_counter()
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            code = None
        self.log.close()
        stopped = {"exit_code": code, "seconds": round(time.perf_counter() - started, 2)}
        print(f"SIGTERM: exit code {code} after {stopped['seconds']} s", flush=True)
        return stopped


def check_prediction(status, body):
    """None for a good answer (200, one non-empty translation), else what is wrong."""
    if status != 200:
        return f"status {status}: {body[:200]!r}"
    try:
        predictions = json.loads(body)["predictions"]
        translation = predictions[0]["translation"]
    except (ValueError, KeyError, IndexError, TypeError) as error:
        return f"malformed answer ({error!r}): {body[:200]!r}"
    if len(predictions) != 1 or not isinstance(translation, str) or not translation.strip():
        return f"not one non-empty translation: {body[:200]!r}"
    return None


def warm_up(server, sentences):
    for sentence in sentences[:3]:
        problem = check_prediction(*server.request("POST", server.predict_path, json.dumps({"instances": [sentence]})))
        if problem:
            raise SystemExit(f"warm-up request failed: {problem}")


def load_level(server, sentences, clients, requests, seconds):
    """`clients` threads in a closed loop, one keep-alive connection each, until `requests` or `seconds`."""
    lock = threading.Lock()
    issued = [0]
    latencies, problems = [], []
    deadline = time.perf_counter() + seconds
    _, log_start = server.logged_calls()

    def client():
        connection = server.connection()
        while True:
            with lock:
                if issued[0] >= requests or time.perf_counter() > deadline:
                    break
                index = issued[0]
                issued[0] += 1
            body = json.dumps({"instances": [sentences[index % len(sentences)]]})
            before = time.perf_counter()
            try:
                connection.request("POST", server.predict_path, body, {"Content-Type": "application/json"})
                answer = connection.getresponse()
                problem = check_prediction(answer.status, answer.read())
            except (OSError, http.client.HTTPException) as error:
                problem = f"{type(error).__name__}: {error}"
                connection.close()
                connection = server.connection()
            elapsed = time.perf_counter() - before
            with lock:
                if problem:
                    problems.append(problem)
                else:
                    latencies.append(elapsed)
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    with OtherLoad(server.process.pid) as other:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    level = summary(f"serve, {clients} client{'s' if clients > 1 else ''}", latencies, time.perf_counter() - started,
                    len(problems))
    level["clients"] = clients
    level["other_cpu_s"] = other.seconds
    calls, _ = server.logged_calls(log_start)
    level["examples_per_call"] = round(sum(calls) / len(calls), 2) if calls else None
    level["model_calls_by_examples"] = {str(k): calls.count(k) for k in sorted(set(calls))}
    if problems:
        level["first_errors"] = problems[:5]
    print(f"  {level['requests']} requests, {level['requests_per_s']} /s, p50 {level['p50_ms']} ms, "
          f"p99 {level['p99_ms']} ms, {len(problems)} errors, {level['examples_per_call']} examples a model call; "
          f"other processes used {other.seconds} CPU s", flush=True)
    return level


def summary(name, latencies, seconds, errors):
    import numpy as np

    done = len(latencies) + errors
    values = np.array(latencies) * 1000.0 if latencies else np.array([np.nan])
    return {
        "level": name,
        "requests": done,
        "seconds": round(seconds, 2),
        "requests_per_s": round(len(latencies) / seconds, 1) if seconds else None,
        "p50_ms": round(float(np.percentile(values, 50)), 1),
        "p99_ms": round(float(np.percentile(values, 99)), 1),
        "errors": errors,
    }


def busy_seconds(*pids):
    """`(CPU seconds the whole machine has been busy, of which `pids` and this process)`, from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    machine = sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)  # all but idle and iowait
    ours = 0
    for pid in ("self", *pids):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                parts = stat.read().rpartition(")")[2].split()
            ours += int(parts[11]) + int(parts[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return machine / ticks, ours / ticks


class OtherLoad:
    """CPU seconds that processes other than this one and `pid` used while it was open: other work on the
    machine (tests, a browser) skews every figure, so each level says how much there was."""

    def __init__(self, pid=None):
        self.pids = () if pid is None else (pid,)

    def __enter__(self):
        self.start = busy_seconds(*self.pids)
        return self

    def __exit__(self, *exc):
        machine, ours = busy_seconds(*self.pids)
        self.seconds = round(max(0.0, (machine - self.start[0]) - (ours - self.start[1])), 1)


# Oversized requests


def rss_mib(pid, children=False):
    """The resident memory of `pid` in MiB (with `children`, plus that of its child processes)."""
    total = 0
    pids = [pid]
    if children:
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as listed:
                pids += [int(child) for child in listed.read().split()]
        except OSError:
            pass
    for each in pids:
        try:
            with open(f"/proc/{each}/status") as status:
                total += next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return round(total / 1024, 1)


def overload(server, sentences, clients, queue, seconds, polite=False):
    """`clients` threads that send one-sentence requests for `seconds`: again at once whatever the answer, or
    (`polite`) after the seconds a 503's `Retry-After` asks for."""
    pid = server.process.pid
    lock = threading.Lock()
    accepted, rejected, problems, samples = [], [], [], []
    stop = threading.Event()
    deadline = time.perf_counter() + seconds

    def client(offset):
        connection = server.connection()
        index = offset
        while time.perf_counter() < deadline:
            body = json.dumps({"instances": [sentences[index % len(sentences)]]})
            index += clients
            before = time.perf_counter()
            try:
                connection.request("POST", server.predict_path, body, {"Content-Type": "application/json"})
                answer = connection.getresponse()
                status, payload = answer.status, answer.read()
                problem = None
                wait = 0.0
                if status == 503:
                    message = json.loads(payload).get("error", "")
                    if "--max-queued" not in message or answer.getheader("Retry-After") != "1":
                        problem = f"a 503 without the queue's message or Retry-After: {payload[:200]!r}"
                    elif polite:
                        wait = float(answer.getheader("Retry-After"))
                else:
                    problem = check_prediction(status, payload)
            except (OSError, http.client.HTTPException, ValueError) as error:
                status, problem = None, f"{type(error).__name__}: {error}"
                connection.close()
                connection = server.connection()
            elapsed = time.perf_counter() - before
            with lock:
                if problem:
                    problems.append(problem)
                elif status == 200:
                    accepted.append(elapsed)
                else:
                    rejected.append(elapsed)
            if wait and not problem:
                time.sleep(min(wait, max(0.0, deadline - time.perf_counter())))
        connection.close()

    def sample():
        while not stop.is_set():
            samples.append(rss_mib(pid, children=True))
            stop.wait(0.05)

    kind = "wait Retry-After" if polite else "send again at once"
    print(f"overload: {clients} clients ({kind}) against --max-queued {queue} for {seconds:g} s", flush=True)
    before = rss_mib(pid, children=True)
    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.perf_counter()
    with OtherLoad(pid) as other:
        threads = [threading.Thread(target=client, args=(offset,)) for offset in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    elapsed = time.perf_counter() - started
    stop.set()
    sampler.join()
    import numpy as np

    def ms(values, q):
        return round(float(np.percentile(np.array(values) * 1000.0, q)), 1) if values else None

    result = {
        "clients": clients, "retry": kind, "max_queued": queue, "seconds": round(elapsed, 1),
        "accepted": len(accepted), "rejected": len(rejected), "errors": len(problems),
        "accepted_per_s": round(len(accepted) / elapsed, 1), "rejected_per_s": round(len(rejected) / elapsed, 1),
        "accepted_p50_ms": ms(accepted, 50), "accepted_p99_ms": ms(accepted, 99),
        "rejected_p50_ms": ms(rejected, 50), "rejected_p99_ms": ms(rejected, 99),
        "rss_before_mib": before, "rss_peak_mib": max(samples + [before]), "other_cpu_s": other.seconds,
    }
    if problems:
        result["first_errors"] = problems[:5]
    print(f"  accepted {result['accepted_per_s']}/s (p99 {result['accepted_p99_ms']} ms), rejected "
          f"{result['rejected_per_s']}/s (p99 {result['rejected_p99_ms']} ms), {len(problems)} errors, "
          f"RSS {before} -> peak {result['rss_peak_mib']} MiB", flush=True)
    return result


def raw_request(port, path, body, chunked, timeout=120, piece=256 * 1024):
    """Sends `body` on a new connection (chunked, or with its Content-Length), stopping as soon as an answer
    arrives; `(status, answer body, bytes of the body sent)`."""
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}"
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{framing}\r\n\r\n"
    view, sent = memoryview(body), 0
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as connection:
        connection.sendall(head.encode())
        try:
            while sent < len(body):
                if select.select([connection], [], [], 0)[0]:
                    break  # answered early: the rest is not needed
                part = view[sent : sent + piece]
                connection.sendall(b"%x\r\n" % len(part) + part.tobytes() + b"\r\n" if chunked else part)
                sent += len(part)
            else:
                if chunked:
                    connection.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed its side: its answer may still be readable
        return (*read_answer(connection), sent)


def read_answer(connection):
    data = b""
    while b"\r\n\r\n" not in data:
        more = connection.recv(65536)
        if not more:
            raise ConnectionError(f"connection closed before an answer ({len(data)} bytes)")
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
    length = int(headers.get("content-length", "-1"))
    while length < 0 or len(body) < length:
        more = connection.recv(65536)
        if not more:
            break
        body += more
    return status, body


def check_too_large(status, body, option):
    if status != 413:
        return f"status {status} (expected 413): {body[:200]!r}"
    try:
        message = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return f"413 without a JSON error: {body[:200]!r}"
    return None if option in message else f"413 not naming {option}: {message!r}"


def oversized(server, count, rounds=2, threads=8):
    """RSS of the server before, during (peak) and after `count` oversized requests of each kind, `rounds` times
    (RSS that stays up after the first round but not growing in the second is the allocator's, not a leak)."""
    pid = server.process.pid
    filler = "Esta frase es demasiado larga. "
    big_body = b'{"instances": ["' + b"a" * (MAX_BODY_BYTES + 4 * 1024**2) + b'"]}'
    long_text = json.dumps({"instances": [(filler * (50_000 // len(filler) + 1))[:50_000]]})
    kinds = {
        "body_content_length": (count, "--max-body-bytes"),
        "body_chunked": (max(1, count // 5), "--max-body-bytes"),
        "text_50000_characters": (count, "--max-text-characters"),
    }
    tasks = [kind for kind, (n, _) in kinds.items() for _ in range(n)]
    random.Random(0).shuffle(tasks)
    outcomes = {kind: {"requests": 0, "errors": 0, "body_bytes_sent": 0} for kind in kinds}
    problems = []
    lock = threading.Lock()

    def client(position):
        connection = server.connection()
        while True:
            with lock:
                if position[0] >= len(tasks):
                    break
                kind = tasks[position[0]]
                position[0] += 1
            sent = 0
            try:
                if kind == "text_50000_characters":
                    connection.request("POST", server.predict_path, long_text, {"Content-Type": "application/json"})
                    answer = connection.getresponse()
                    status, body = answer.status, answer.read()
                    sent = len(long_text)
                else:
                    status, body, sent = raw_request(server.port, server.predict_path, big_body, kind == "body_chunked")
                problem = check_too_large(status, body, kinds[kind][1])
            except (OSError, http.client.HTTPException) as error:
                problem = f"{type(error).__name__}: {error}"
                connection.close()
                connection = server.connection()
            with lock:
                outcomes[kind]["requests"] += 1
                outcomes[kind]["body_bytes_sent"] += sent
                if problem:
                    outcomes[kind]["errors"] += 1
                    problems.append(f"{kind}: {problem}")
        connection.close()

    def one_round():
        samples, stop, position = [], threading.Event(), [0]

        def sample():
            while not stop.is_set():
                samples.append(rss_mib(pid))
                stop.wait(0.02)

        before = rss_mib(pid)
        sampler = threading.Thread(target=sample)
        sampler.start()
        started = time.perf_counter()
        workers = [threading.Thread(target=client, args=(position,)) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        seconds = time.perf_counter() - started
        time.sleep(2.0)
        stop.set()
        sampler.join()
        after = rss_mib(pid)
        measured = {"rss_before_mib": before, "rss_peak_mib": max(samples + [before, after]), "rss_after_mib": after,
                    "seconds": round(seconds, 1), "samples": len(samples)}
        print(f"  {len(tasks)} requests in {seconds:.1f} s; RSS before {before} MiB, peak {measured['rss_peak_mib']} "
              f"MiB, after {after} MiB", flush=True)
        return measured

    print(f"oversized requests: {rounds} x {len(tasks)} from {threads} threads", flush=True)
    measured = [one_round() for _ in range(rounds)]
    recovered = check_prediction(*server.request("POST", server.predict_path, json.dumps({"instances": ["Hola."]})))
    for outcome in outcomes.values():
        outcome["mean_body_mib_sent"] = round(outcome.pop("body_bytes_sent") / max(1, outcome["requests"]) / 1024**2, 2)
    memory = {
        "rss_before_mib": measured[0]["rss_before_mib"],
        "rss_peak_mib": max(m["rss_peak_mib"] for m in measured),
        "rss_after_mib": measured[-1]["rss_after_mib"],
        "rounds": measured,
        "requests": len(tasks) * rounds,
        "errors": len(problems) + (1 if recovered else 0),
        "kinds": outcomes,
        "predict_after": recovered or "200 with a translation",
    }
    if problems:
        memory["first_errors"] = problems[:5]
        print(f"  {len(problems)} errors, first: {problems[0]}", flush=True)
    return memory


def markdown(result):
    rows = ["| level | requests | requests/s | p50 ms | p99 ms | errors | examples a model call | other CPU s |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for level in result["in_process"] + result["levels"]:
        rate = f"{level['requests_per_s']} sentences/s" if "calls" in level else level["requests_per_s"]
        name = level["level"] + (f" ({level['calls']} calls; latency per call)" if "calls" in level else "")
        per_call = round(level["requests"] / level["calls"], 1) if "calls" in level else level.get("examples_per_call", 1)
        rows.append(f"| {name} | {level['requests']} | {rate} | {level['p50_ms']} | {level['p99_ms']} | "
                    f"{level['errors']} | {per_call if per_call is not None else 'n/a'} | {level['other_cpu_s']} |")
    rows.append("")
    rows.append("Other CPU s: CPU time that processes other than the benchmark and the server used during the level "
                "(near 0 on a quiet machine).")
    memory = result["memory"]
    counts = ", ".join(f"{outcome['requests']} {kind.replace('_', ' ')} ({outcome['mean_body_mib_sent']} MiB sent each, "
                       f"{outcome['errors']} errors)" for kind, outcome in memory["kinds"].items())
    rows.append("")
    rounds = "; ".join(f"round {i + 1} ({r['seconds']} s): before {r['rss_before_mib']}, peak {r['rss_peak_mib']}, "
                       f"after {r['rss_after_mib']} MiB" for i, r in enumerate(memory["rounds"]))
    rows.append(f"Server RSS under {memory['requests']} oversized requests from 8 threads ({counts}): {rounds}; "
                f"all 413 naming the limit: {memory['errors'] == 0}; a predict after: {memory['predict_after']}.")
    shutdown = result["shutdown"]
    rows.append(f"SIGTERM: exit code {shutdown['exit_code']} after {shutdown['seconds']} s. "
                f"Startup (to /healthz): {result.get('server_startup_s')} s, RSS {result.get('rss_after_startup_mib')} MiB.")
    rows.append("")
    rows.append("| overload: clients that | clients | --max-queued | accepted/s | accepted p50 ms | accepted p99 ms | "
                "rejected/s | rejected p99 ms | errors | RSS MiB (server + parser) before -> peak | other CPU s |")
    rows.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for load in result["overload"]:
        rows.append(f"| {load['retry']} ({load['seconds']} s) | {load['clients']} | {load['max_queued']} | "
                    f"{load['accepted_per_s']} | {load['accepted_p50_ms']} | {load['accepted_p99_ms']} | "
                    f"{load['rejected_per_s']} | {load['rejected_p99_ms']} | {load['errors']} | "
                    f"{load['rss_before_mib']} -> {load['rss_peak_mib']} | {load['other_cpu_s']} |")
    rows.append(f"Overload server SIGTERM: exit code {result['overload_shutdown']['exit_code']}.")
    rows.append(f"Machine: {result['machine']}.")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
