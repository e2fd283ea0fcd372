"""Where a training step's time goes: a recipe's own run (its data pipeline and callbacks) under TensorFlow's profiler.

    python -m benchmarks.step_profile RECIPE [--skip 30] [--steps 20] [--set KEY=VALUE ...]

The recipe runs as `seqtasks run` runs it, in this process under TensorFlow's
Keras, until `--skip` steps have passed (tracing, the first batches, the
warm-up of the input pipeline); then `--steps` steps are timed and traced by
`tf.profiler`, and the run is abandoned (its folder is left in a temporary
folder). Printed, per step, as JSON:

- `step_ms`: wall time between the ends of consecutive steps; split into
  `train_function_ms` (Keras' compiled step, waiting for its batch
  included), `callbacks_ms` (every callback's `on_train_batch_end`) and
  `keras_loop_ms` (the rest: Keras' Python loop between steps);
- `ops_cpu_ms`: the traced ops' own time (exclusive of ops nested in them),
  summed over TensorFlow's executor threads, by kind: matrix products,
  transposes, the other ops, the executor's own bookkeeping, and the step's
  get-next of its batch (`waiting_for_input`);
- `input_pipeline_cpu_ms`: the other tf.data threads' work, making batches
  ahead of the step (with the batch shapes' record, a `numpy_function`);
- `cpu_busy`: process CPU time over wall time, against the cores there are;
- `matmul_gflop`: the step's matrix-product work, counted from the layers'
  sizes and the batches' shapes (forward, and twice that backward), and
  `achieved_gflops` it over the step's wall time, against `peak_gflops`, a
  large float32 product measured in the same process.
"""

import argparse
import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path

MATMUL_OPS = ("MatMul", "BatchMatMul", "Conv2D", "Einsum")


class _Done(BaseException):
    """Ends the abandoned run once the traced steps are done (not an `Exception`, so nothing handles it)."""


def _install_probes(skip, steps, logdir, clock):
    """Times Keras' step function and callbacks, records batch shapes, starts and stops the profiler."""
    import keras
    import tensorflow as tf
    from keras.src.backend.tensorflow.trainer import TensorFlowTrainer

    make_train_function = TensorFlowTrainer.make_train_function

    def timed_make_train_function(self, force=False):
        make_train_function(self, force)  # sets `self.train_function`
        function = self.train_function
        if getattr(function, "_probe", False):
            return function

        def timed(iterator):
            started = time.perf_counter()
            try:
                return function(iterator)
            finally:
                clock["function"].append(time.perf_counter() - started)

        timed._probe = True
        self.train_function = timed
        return timed

    TensorFlowTrainer.make_train_function = timed_make_train_function

    on_train_batch_end = keras.callbacks.CallbackList.on_train_batch_end

    def timed_on_train_batch_end(self, batch, logs=None):
        started = time.perf_counter()
        on_train_batch_end(self, batch, logs)
        ended = time.perf_counter()
        clock["callbacks"].append(ended - started)
        clock["ends"].append(ended)
        clock["cpu"].append(sum(os.times()[:4]))
        done = len(clock["ends"])
        if done == skip:
            tf.profiler.experimental.start(str(logdir))
        elif done == skip + steps:
            tf.profiler.experimental.stop()
            raise _Done()

    keras.callbacks.CallbackList.on_train_batch_end = timed_on_train_batch_end

    fit = keras.Model.fit

    def tapped_fit(self, x=None, *args, **kwargs):
        if isinstance(x, tf.data.Dataset) and not clock["tapped"]:
            clock["tapped"] = True
            x = x.map(_shape_tap(clock["shapes"]))
        return fit(self, x, *args, **kwargs)

    keras.Model.fit = tapped_fit


def _shape_tap(shapes):
    """A `map` function that records each training batch's tensor shapes, in the order the batches are made."""
    import numpy as np
    import tensorflow as tf

    def record(*dims):
        shapes.append([tuple(int(d) for d in shape) for shape in dims])
        return np.int32(0)

    def tap(*batch):
        flat = tf.nest.flatten(batch)
        recorded = tf.numpy_function(record, [tf.shape(t) for t in flat], tf.int32, stateful=True)
        with tf.control_dependencies([recorded]):
            return tf.nest.map_structure(tf.identity, batch if len(batch) > 1 else batch[0])

    return tap


def _op_kind(name):
    """`matmul`, `transpose`, `waiting_for_input` or `other_ops` for an op's event (`scope/name:Type`), else `None`."""
    if name.count(":") != 1:  # the executor's own events are `Class::Method`
        return None
    kind = name.rsplit(":", 1)[1]
    if any(op in kind for op in MATMUL_OPS):
        return "matmul"
    if "Transpose" in kind:
        return "transpose"
    if kind in ("IteratorGetNext", "IteratorGetNextSync", "IteratorGetNextAsOptional"):
        return "waiting_for_input"
    return "other_ops"


def read_profile(logdir):
    """Exclusive CPU time (ms) by kind from the `.xplane.pb` under `logdir`: ops on TensorFlow's executor threads, tf.data threads."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    (path,) = Path(logdir).rglob("*.xplane.pb")
    space = xplane_pb2.XSpace()
    space.ParseFromString(path.read_bytes())
    totals = collections.Counter()
    by_op = collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            executor = line.name.startswith("tf_Compute") or line.name.startswith("tf_inter_op")
            data = line.name.startswith("tf_data")
            if not (executor or data):
                continue
            named = [(plane.event_metadata[e.metadata_id].name, e) for e in line.events]
            # The thread pool's markers sit inside the ops whose work they mark: that time stays the op's.
            named = [(name, e) for name, e in named if not name.startswith("ThreadpoolListener")]
            named.sort(key=lambda item: (item[1].offset_ps, -item[1].duration_ps))
            stack = []  # (end, index) of the events enclosing the current one
            exclusive = [e.duration_ps for _, e in named]
            for index, (_, event) in enumerate(named):
                while stack and stack[-1][0] <= event.offset_ps:
                    stack.pop()
                if stack:
                    exclusive[stack[-1][1]] -= event.duration_ps
                stack.append((event.offset_ps + event.duration_ps, index))
            # The step's own get-next runs on its line (time the step waits for its batch); the rest
            # of tf.data's lines make the batches ahead of it.
            waiting = line.name.startswith("tf_data_iterator_get_next")
            for (name, _), picoseconds in zip(named, exclusive):
                kind = "waiting_for_input" if waiting else "input_pipeline" if data else (_op_kind(name) or "executor")
                op = name.rsplit(":", 1)[-1] if kind in ("matmul", "transpose", "other_ops") else kind
                totals[kind] += max(picoseconds, 0) / 1e9
                by_op[op] += max(picoseconds, 0) / 1e9
    return dict(totals), by_op


def translation_gflop(recipe, shapes, run_dir):
    """Forward matrix-product GFLOP of the translation model on batches `((B, S), (B, T)), (B, T)`.

    SentencePiece learns exactly the recipe's vocabulary sizes.
    """
    model = recipe.model
    gates = {"gru": 3, "lstm": 4}
    e, v = model.embedding_dim, recipe.data.target_vocab_size
    enc, dec = model.encoder, model.decoder
    directions = 2 if enc.bidirectional else 1
    memory = enc.units * directions
    total = 0.0
    for (b, s), (_, t), *_ in shapes:
        flops = 0
        width = e
        for _ in range(enc.num_layers):
            flops += directions * 2 * b * s * (width + enc.units) * gates[enc.cell_type] * enc.units
            width = memory
        width = e + (dec.units if dec.input_feeding else 0)
        for _ in range(dec.num_layers):
            flops += 2 * b * t * (width + dec.units) * gates[dec.cell_type] * dec.units
            width = dec.units
        if model.attention.type != "none":
            flops += 2 * b * s * memory * dec.units  # the keys (Luong general)
            flops += 2 * b * t * s * (dec.units + memory)  # scores and context
            flops += 2 * b * t * memory * dec.units  # the attentional vector from the context
        flops += 2 * b * t * dec.units * v
        total += flops
    return total / len(shapes) / 1e9


def captioning_gflop(recipe, shapes, run_dir):
    """Forward matrix-product GFLOP of Show, Attend and Tell on grids `(B, L, C)` and captions `(B, T)`.

    The vocabulary is the run's (`vocab.txt`): the captions may give fewer words than `data.vocab_size`.
    """
    model = recipe.model
    v = len((run_dir / "vocab.txt").read_text(encoding="utf-8").splitlines())
    e, u, a = model.embedding_dim, model.decoder.units, model.attention.units
    total = 0.0
    for (b, locations, c), (_, t), *_ in shapes:
        flops = 2 * b * locations * c * a + 2 * b * c * 2 * u  # keys, initial state
        per_step = 2 * b * u * a + 2 * b * locations * a + 2 * b * locations * c  # query, score, context
        per_step += 2 * b * (e + c + u) * 4 * u + 2 * b * (u + c) * e + 2 * b * e * v  # LSTM, deep output, logits
        total += flops + t * per_step
    return total / len(shapes) / 1e9


GFLOP = {"translation": translation_gflop, "captioning": captioning_gflop}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.step_profile", description=__doc__.splitlines()[0])
    parser.add_argument("recipe")
    parser.add_argument("--skip", type=int, default=30, help="steps run before the traced ones (default 30)")
    parser.add_argument("--steps", type=int, default=20, help="steps traced (default 20)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a recipe override")
    parser.add_argument("--output-dir", default=None, help="where the abandoned run goes (default: a temporary folder)")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    from benchmarks.backend_steps import _matmul_gflops
    from seqtasks.cli import main as seqtasks_main
    from seqtasks.recipe import load_recipe

    recipe = load_recipe(args.recipe, args.set)
    output = Path(args.output_dir or tempfile.mkdtemp(prefix="step_profile-"))
    logdir = output / "profile"
    clock = collections.defaultdict(list, tapped=False)
    _install_probes(args.skip, args.steps, logdir, clock)
    flags = [flag for item in args.set for flag in ("--set", item)]
    try:
        seqtasks_main(["run", args.recipe, "--output-dir", str(output / "runs"), *flags], standalone_mode=False)
        raise SystemExit(f"the run ended before {args.skip + args.steps} steps")
    except _Done:
        pass
    window = slice(args.skip, args.skip + args.steps)
    ends = clock["ends"][args.skip - 1 : args.skip + args.steps]
    wall = ends[-1] - ends[0]
    cpu = clock["cpu"][args.skip + args.steps - 1] - clock["cpu"][args.skip - 1]
    per_step = lambda seconds: round(1000 * seconds / args.steps, 1)  # noqa: E731
    function, callbacks = sum(clock["function"][window]), sum(clock["callbacks"][window])
    kinds, by_op = read_profile(logdir)
    shapes = clock["shapes"][window]
    count = GFLOP.get(recipe.task)
    (run_dir,) = [path.parent for path in (output / "runs").glob("*/*/recipe.yaml")]
    gflop = None if count is None else 3 * count(recipe, shapes, run_dir)  # the backward pass is about twice the forward
    peak = _matmul_gflops(2048)["2048 square"]
    print(json.dumps({
        "recipe": args.recipe,
        "steps": args.steps,
        "after_steps": args.skip,
        "step_ms": per_step(wall),
        "train_function_ms": per_step(function),
        "callbacks_ms": per_step(callbacks),
        "keras_loop_ms": per_step(wall - function - callbacks),
        "ops_cpu_ms": {kind: round(ms / args.steps, 1) for kind, ms in sorted(kinds.items()) if kind != "input_pipeline"},
        "top_ops_cpu_ms": {op: round(ms / args.steps, 1) for op, ms in by_op.most_common(15)},
        "input_pipeline_cpu_ms": round(kinds.get("input_pipeline", 0.0) / args.steps, 1),
        "cpu_busy": f"{cpu / wall:.2f} of {os.cpu_count()} cores",
        "mean_batch_shapes": [[round(sum(s[i][j] for s in shapes) / len(shapes), 1) for j in range(len(shapes[0][i]))]
                              for i in range(len(shapes[0]))],
        "matmul_gflop": None if gflop is None else round(gflop, 2),
        "achieved_gflops": None if gflop is None else round(gflop / (wall / args.steps), 1),
        "peak_gflops": peak,
        "run_folder": str(output / "runs"),
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
