"""Where the translation training time goes: steady-state steps/s of our model under variants.

    python -m benchmarks.profile_translation RUN_DIR [SECONDS]

RUN_DIR is a translation run folder (its recipe, split and subwords are used).
Each variant trains a fresh model for SECONDS after its first step and prints
target tokens/s, so the effect of each setting on speed is measured alone.
"""

import sys
import time

import keras
import numpy as np

from benchmarks.baselines.common import load_run_data

VARIANTS = {
    "recipe": {},
    "xla": {"jit_compile": True},
    "no label smoothing": {"label_smoothing": 0.0},
    "no dropout": {"dropout": 0.0},
}


def main(run_dir, seconds=60.0):
    import dataclasses

    from seqtasks.models import Seq2Seq
    from seqtasks.encoder_decoder.training import compile_model
    from seqtasks.tasks.translation.task import make_dataset

    recipe, train, _, source_tokenizer, target_tokenizer = load_run_data(run_dir)
    for name, variant in VARIANTS.items():
        training = dataclasses.replace(recipe.training, label_smoothing=variant.get("label_smoothing", recipe.training.label_smoothing))
        decoder = dataclasses.replace(recipe.model.decoder, dropout=variant.get("dropout", recipe.model.decoder.dropout))
        model_config = dataclasses.replace(recipe.model, decoder=decoder)
        data = make_dataset(
            train, source_tokenizer, target_tokenizer, recipe.data.max_length, recipe.training.batch_size, recipe.seed
        )
        model = Seq2Seq.from_recipe(model_config, source_tokenizer.vocab_size, target_tokenizer.vocab_size, seed=recipe.seed)
        compile_model(model, training)
        if variant.get("jit_compile"):
            model.jit_compile = True
        times = []

        class Clock(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                times.append(time.perf_counter())
                if len(times) > 1 and times[-1] - times[0] > seconds:
                    self.model.stop_training = True

        started = time.perf_counter()
        model.fit(data, epochs=1, callbacks=[Clock()], verbose=0)
        steps = len(times) - 1
        per_batch = np.mean([np.count_nonzero(y.numpy()) for _, y in data.take(200)])
        print(f"{name:>20}: first step {times[0] - started:5.1f} s, {steps / (times[-1] - times[0]):5.2f} steps/s, "
              f"{per_batch * steps / (times[-1] - times[0]):7.0f} target tokens/s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 60.0)
