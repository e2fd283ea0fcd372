"""Steady-state training steps of the 20-minute translation model under each Keras backend, and the CPU's matmul speed.

    python -m benchmarks.backend_steps [--length 16] [--steps 30] [--set KEY=VALUE ...]

Each backend runs in its own process: the recipe's model (4,000 subwords a
side) trains on one fixed random batch of `training.batch_size` rows and
`--length` tokens a side, so no input pipeline, bucketing or compilation is
timed, only the step. Then a float32 matrix product of the output layer's
shape (batch x length, 256) x (256, 4000), and a 2048-square one, give the
GFLOP/s the backend reaches on this machine, the ceiling of the step.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RECIPE = REPO / "recipes" / "translation-anki-spa-eng.yaml"


def measure(length, steps, overrides):
    import keras
    import numpy as np

    from seqtasks.models import Seq2Seq
    from seqtasks.recipe import load_recipe
    from seqtasks.encoder_decoder.training import compile_model
    from seqtasks.training.fit import dtype_policy

    recipe = load_recipe(RECIPE, overrides)
    keras.utils.set_random_seed(recipe.seed)
    with dtype_policy(recipe.training.precision):
        model = Seq2Seq.from_recipe(recipe.model, 4000, 4000, seed=recipe.seed)
    compile_model(model, recipe.training)
    rng = np.random.default_rng(0)
    batch = recipe.training.batch_size
    source, target_in, target_out = (rng.integers(4, 4000, (batch, length)).astype("int32") for _ in range(3))
    started = time.perf_counter()
    model.train_on_batch((source, target_in), target_out)
    first = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(steps):
        model.train_on_batch((source, target_in), target_out)
    step = (time.perf_counter() - started) / steps
    return {
        "backend": keras.backend.backend(),
        "first_step_s": round(first, 2),
        "step_ms": round(1000 * step, 1),
        "target_tokens_per_s": round(batch * length / step),
        "matmul_gflops": _matmul_gflops(batch * length),
    }


def _matmul_gflops(rows):
    import keras
    import numpy as np

    shapes = {"output layer": (rows, 256, 4000), "2048 square": (2048, 2048, 2048)}
    if keras.backend.backend() == "jax":
        import jax

        product = jax.jit(lambda x, y: x @ y)
        run = lambda x, y: product(x, y).block_until_ready()  # noqa: E731
    else:
        import tensorflow as tf

        product = tf.function(tf.matmul)
        run = lambda x, y: product(x, y).numpy()  # noqa: E731
    found = {}
    for name, (m, k, n) in shapes.items():
        x, y = np.random.rand(m, k).astype("float32"), np.random.rand(k, n).astype("float32")
        run(x, y)
        started = time.perf_counter()
        for _ in range(20):
            run(x, y)
        found[name] = round(2 * m * k * n * 20 / (time.perf_counter() - started) / 1e9)
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.backend_steps", description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=16, help="tokens a side of the batch (default 16)")
    parser.add_argument("--steps", type=int, default=30, help="steps timed after the first")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a recipe override")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print("RESULT", json.dumps(measure(args.length, args.steps, args.set)))
        return 0
    for backend in ("tensorflow", "jax"):
        command = [sys.executable, "-m", "benchmarks.backend_steps", "--child", "--length", str(args.length),
                   "--steps", str(args.steps)] + [flag for item in args.set for flag in ("--set", item)]
        env = {**os.environ, "KERAS_BACKEND": backend, "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "2",
               "PYTHONPATH": str(REPO)}
        done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode != 0 or not lines:
            raise SystemExit(f"{backend} failed:\n{done.stderr[-3000:]}")
        print(json.dumps(json.loads(lines[-1][len("RESULT "):])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
