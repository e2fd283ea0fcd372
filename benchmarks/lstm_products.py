"""Why the decoder's LSTM products read their kernels transposed beforehand, under TensorFlow.

    python -m benchmarks.lstm_products [--repeats 3]

At the captioning recipe's sizes (batch 64, an LSTM of 512 units reading a
256-wide word embedding beside a 1,280-wide context, 14 steps), times:

- one product `upstream @ kernelᵀ` (64 x 2,048 by 2,048 x 1,536), as a
  scan's gradient computes it at every step, against the same product with
  the kernel transposed beforehand;
- a training step of `AttentionDecoder(placement="before")` alone (forward
  and the gradients of every weight) with its LSTM cell's products through
  kernels transposed once before the scan (the layer as it is), and through
  the Keras `LSTMCell` itself.

Each figure is the median of `--repeats` rounds, the two variants in turn.
"""

import argparse
import json
import os
import statistics
import sys
import time

BATCH, STEPS, EMBEDDING, CONTEXT, UNITS, LOCATIONS = 64, 14, 256, 1280, 512, 49


def _time(function, runs):
    function()
    started = time.perf_counter()
    for _ in range(runs):
        function()
    return 1000 * (time.perf_counter() - started) / runs


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lstm_products", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="rounds, each variant in turn (default 3)")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import numpy as np
    import tensorflow as tf

    from seqtasks.layers import AttentionDecoder

    rng = np.random.default_rng(0)
    inputs = EMBEDDING + CONTEXT
    upstream = tf.constant(rng.random((BATCH, 4 * UNITS), dtype="float32"))
    kernel = tf.constant(rng.random((inputs, 4 * UNITS), dtype="float32"))
    kernel_t = tf.transpose(kernel)
    products = {
        "transposed operand": tf.function(lambda: tf.matmul(upstream, kernel, transpose_b=True)),
        "kernel transposed beforehand": tf.function(lambda: tf.matmul(upstream, kernel_t)),
    }

    decoder = AttentionDecoder(UNITS, attention="bahdanau", placement="before", gate=True, deep_output="linear")
    target = tf.constant(rng.random((BATCH, STEPS, EMBEDDING), dtype="float32"))
    memory = tf.constant(rng.random((BATCH, LOCATIONS, CONTEXT), dtype="float32"))
    decoder(target, memory)
    transposed_kernels = decoder._transposed_kernels

    def training_step(cells):
        decoder._transposed_kernels = transposed_kernels if cells == "transposed" else (lambda: None)

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                outputs = decoder(target, memory, training=True)
                loss = tf.reduce_sum(outputs * outputs)
            return tape.gradient(loss, decoder.trainable_variables)

        return step

    steps = {"kernels transposed before the scan": training_step("transposed"), "Keras LSTMCell": training_step("keras")}
    found = {name: [] for name in (*products, *steps)}
    for _ in range(args.repeats):
        for name, function in products.items():
            found[name].append(_time(function, 100))
        for name, function in steps.items():
            found[name].append(_time(function, 5))
    print(json.dumps({
        "product_ms": {name: round(statistics.median(found[name]), 2) for name in products},
        "decoder_training_step_ms": {name: round(statistics.median(found[name]), 1) for name in steps},
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
