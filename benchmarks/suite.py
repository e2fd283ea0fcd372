"""The benchmarks: each group runs its work in child processes (one peak memory each) and returns records."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.records import record

REPO = Path(__file__).resolve().parent.parent

_GREEDY = """
import json, sys
from seqtasks.lifecycle.runner import Runner
metrics = Runner.open(sys.argv[1], ["model.decoding.beam_width=1"]).evaluate()
print("RESULT", json.dumps({"bleu": metrics["validation"]["bleu_lowercase"], "speed": metrics["decode_sentences_per_second"]}))
"""

_LATENCY = """
import json, statistics, sys, time
import tensorflow as tf
import tensorflow_text  # noqa: F401 - the tokenizer ops
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
sentences = [line.split("\\t")[0] for line in open(sys.argv[2], encoding="utf-8").read().splitlines()[:120]]
started = time.perf_counter()
serve(text=tf.constant(sentences[:1]))
first = time.perf_counter() - started
times = []
for sentence in sentences[20:]:
    started = time.perf_counter()
    serve(text=tf.constant([sentence]))
    times.append(time.perf_counter() - started)
print("RESULT", json.dumps({"median_ms": 1000 * statistics.median(times), "first_call_s": first}))
"""


class Context:
    """Where a suite run writes, its time budgets, and how it starts children."""

    def __init__(self, output_dir, translation_minutes, task_minutes, log=print):
        self.output_dir = Path(output_dir)
        self.translation_minutes = translation_minutes
        self.task_minutes = task_minutes
        self.log = log
        self.output_dir.mkdir(parents=True, exist_ok=True)

    def child(self, name, command, env=None):
        """Runs `command` to the end (with `env` added to the environment); returns `(output, peak_rss_mb)`,
        failing loudly with its log."""
        log_path = self.output_dir / f"{name}.log"
        self.log(f"[{time.strftime('%H:%M:%S')}] {name}: {' '.join(str(c) for c in command[:6])} ...")
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO), **(env or {})}
        with open(log_path, "w") as log_file:
            process = subprocess.Popen([str(c) for c in command], stdout=log_file, stderr=subprocess.STDOUT, cwd=REPO, env=env)
            _, status, usage = os.wait4(process.pid, 0)
        output = log_path.read_text(errors="replace")
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"{name} failed; see {log_path}:\n{output[-3000:]}")
        return output, usage.ru_maxrss / 1024

    def python(self, name, code, *args, env=None):
        output, peak = self.child(name, [sys.executable, "-c", code, *args], env)
        line = [line for line in output.splitlines() if line.startswith("RESULT ")][-1]
        return json.loads(line[len("RESULT "):]), peak

    def seqtasks_run(self, name, recipe, overrides, env=None):
        runs = self.output_dir / "runs" / name
        command = [sys.executable, "-m", "seqtasks", "run", recipe, "--output-dir", runs, "--fresh"]
        for override in overrides:
            command += ["--set", override]
        _, peak = self.child(name, command, env)
        run_dir = max(runs.glob("*/*/metrics.json"), key=lambda p: p.stat().st_mtime).parent
        return run_dir, json.loads((run_dir / "metrics.json").read_text()), peak


def translation(ctx):
    """Ours, trained under TensorFlow and under JAX, against tutorial designs A and B: the same data, subwords,
    model size, batch and training time."""
    minutes = ctx.translation_minutes
    run_dir, ours, ours_peak = ctx.seqtasks_run(
        "translation",
        "translation-anki-spa-eng",
        [f"training.max_minutes={minutes}", f"export.directory={ctx.output_dir / 'saved_models'}", "backend=tensorflow"],
    )
    greedy, _ = ctx.python("translation-greedy", _GREEDY, run_dir)
    latency, _ = ctx.python("translation-latency", _LATENCY, ours["export"], run_dir / "translations.tsv")
    jax_dir, jax_ours, jax_peak = ctx.seqtasks_run(
        "translation-jax",
        "translation-anki-spa-eng",
        [f"training.max_minutes={minutes}", "export.enabled=false", "backend=jax"],
    )
    jax_greedy, _ = ctx.python("translation-jax-greedy", _GREEDY, jax_dir, env={"KERAS_BACKEND": "jax"})
    seconds = ours["train_seconds"]
    baselines = {}
    for key, module in (("a", "tutorial_attention"), ("b", "tutorial_bahdanau")):
        out = ctx.output_dir / f"baseline_{key}.json"
        _, peak = ctx.child(f"baseline-{key}", [sys.executable, "-m", f"benchmarks.baselines.{module}", run_dir, seconds, out])
        baselines[key] = {**json.loads(out.read_text()), "peak_rss_mb": peak}
    a, b = baselines["a"], baselines["b"]
    same_time = f"after {seconds / 60:.1f} min of training each"
    records = [
        record("translation.train.parameters", ours["parameters"], "parameters", a["parameters"], b["parameters"]),
        record("translation.serve.latency_batch1_ms", latency["median_ms"], "ms",
               note="SavedModel, one sentence a call, beam 5, median of 100 validation sentences"),
        record("translation.serve.first_call_s", latency["first_call_s"], "s", note="loading done; the first call"),
    ]
    for prefix, metrics, peak, plain, backend in (
        ("translation", ours, ours_peak, greedy, "TensorFlow"),
        ("translation.jax", jax_ours, jax_peak, jax_greedy, "JAX"),
    ):
        records += [
            record(f"{prefix}.train.target_tokens_per_s", metrics["train_target_tokens_per_second"], "target tokens/s",
                   a["train_target_tokens_per_second"], b["train_target_tokens_per_second"],
                   f"{backend}; GRU 256, embedding 256, batch 64, Anki spa->eng; wall time of training, "
                   "tracing and compiling included"),
            record(f"{prefix}.train.time_to_first_step_s", metrics["first_step_seconds"], "s",
                   a["first_step_seconds"], b["first_step_seconds"], f"{backend}; start of training to the end of its first step"),
            record(f"{prefix}.train.peak_rss_mb", peak, "MB", a["peak_rss_mb"], b["peak_rss_mb"],
                   f"{backend}; whole process: ours includes vocabulary learning, evaluation and export"),
            record(f"{prefix}.quality.bleu_greedy", plain["bleu"], "BLEU", a["bleu_greedy"], b["bleu_greedy"],
                   f"{backend}; 2,000 validation pairs, greedy, {same_time}"),
            record(f"{prefix}.quality.bleu_beam5", metrics["validation"]["bleu_lowercase"], "BLEU", a["bleu_greedy"],
                   b["bleu_greedy"], f"{backend}; ours with beam 5 against the baselines' greedy, {same_time}"),
            record(f"{prefix}.decode.greedy.sentences_per_s", plain["speed"], "sentences/s",
                   a["greedy_sentences_per_second"], b["greedy_sentences_per_second"],
                   f"{backend}; batch 64, length-sorted; ours compiled (compiling excluded), baselines' Python loops"),
            record(f"{prefix}.decode.beam5.sentences_per_s", metrics["decode_sentences_per_second"], "sentences/s",
                   a["greedy_sentences_per_second"], b["greedy_sentences_per_second"],
                   f"{backend}; ours beam 5 against the baselines' greedy, batch 64"),
        ]
    compiled = jax_ours.get("xla_compilations", {}).get("train_step")
    if compiled:
        records.append(record("translation.jax.train.step_compilations", compiled["compilations"], "compilations",
                              note=f"JAX; batch shapes of the training step, {compiled['seconds']} s of compiling in all"))
    return records


def _task(ctx, name, recipe, throughput_key, unit, extra=()):
    run_dir, metrics, peak = ctx.seqtasks_run(
        name, recipe, [f"training.max_minutes={ctx.task_minutes}", "export.enabled=false", *extra]
    )
    return metrics, [
        record(f"{name}.train.{throughput_key}", metrics[_METRIC[throughput_key]], unit,
               note=f"`{recipe}` recipe, {ctx.task_minutes} min of training, tracing and validation included"),
        record(f"{name}.train.time_to_first_step_s", metrics["first_step_seconds"], "s"),
        record(f"{name}.train.peak_rss_mb", peak, "MB", note="whole `seqtasks run` process"),
    ]


_METRIC = {
    "examples_per_s": "train_examples_per_second",
    "tokens_per_s": "train_tokens_per_second",
    "target_tokens_per_s": "train_target_tokens_per_second",
}


def sentiment(ctx):
    return _task(ctx, "sentiment", "sentiment-imdb", "examples_per_s", "examples/s")[1]


def ner(ctx):
    return _task(ctx, "ner", "ner-conll2003", "tokens_per_s", "tokens/s")[1]


def captioning(ctx):
    cache = ctx.output_dir.parent / "feature_cache"  # kept between suite runs: extraction is not what is measured
    metrics, records = _task(
        ctx, "captioning", "captioning-flickr8k", "target_tokens_per_s", "target tokens/s", [f"data.feature_cache={cache}"]
    )
    records.append(record("captioning.decode.images_per_s", metrics["decode_images_per_second"], "images/s",
                          note="validation images, the recipe's beam search, batch of the recipe"))
    return records


def startup(ctx):
    times = []
    for attempt in range(5):
        started = time.perf_counter()
        ctx.child(f"help-{attempt}", [sys.executable, "-m", "seqtasks", "--help"])
        times.append(time.perf_counter() - started)
    return [record("cli.help_s", min(times), "s", note="`seqtasks --help`, best of 5")]


GROUPS = {
    "translation": translation,
    "sentiment": sentiment,
    "ner": ner,
    "captioning": captioning,
    "cli": startup,
}
