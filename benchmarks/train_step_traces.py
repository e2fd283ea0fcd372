"""How many times Keras traces a training step over length-bucketed batches, with and without the optimizer
built before `fit` (BENCHMARKS.md, "Graph costs").

    python -m benchmarks.train_step_traces

A toy GRU tagger fitted on three buckets of `seqtasks.data.batching.bucketed_batches`; its `train_step`
records the batch shape each time TensorFlow traces it (Python runs there once per trace, never per step).
"""

import numpy as np


def traces(epochs, build_first):
    import keras
    import tensorflow as tf

    from seqtasks.data.batching import bucketed_batches

    rng = np.random.default_rng(0)
    rows = [rng.integers(1, 50, size=rng.integers(2, 30)).astype("int32") for _ in range(400)]
    spec = tf.TensorSpec([None], tf.int32)
    data = tf.data.Dataset.from_generator(lambda: ((row, row) for row in rows), output_signature=(spec, spec))
    data = bucketed_batches(data, len(rows), lambda s, t: tf.size(s), [8, 16, 32], 16, 1)
    seen = []

    class Counted(keras.Sequential):
        def train_step(self, batch):
            seen.append(tuple(batch[0].shape))
            return super().train_step(batch)

    keras.utils.set_random_seed(0)
    model = Counted([keras.Input((None,), dtype="int32"), keras.layers.Embedding(50, 8),
                     keras.layers.GRU(8, return_sequences=True), keras.layers.Dense(50)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    if build_first:
        model.optimizer.build(model.trainable_variables)
    model.fit(data, epochs=epochs, verbose=0)
    return seen


def main():
    for epochs in (1, 3):
        for build_first in (False, True):
            print(f"epochs {epochs}, optimizer built before fit: {build_first}: traces {traces(epochs, build_first)}")


if __name__ == "__main__":
    main()
