"""Training an encoder-decoder: compiling it with the recipe's optimizer, loss and metrics."""


def compile_model(model, training):
    """Compiles an encoder-decoder for `fit` with the recipe's `training` section: its optimizer, the
    label-smoothed token cross-entropy and the token accuracy."""
    import keras

    from seqtasks.training.distribute import STEP_REPLICAS
    from seqtasks.training.losses import ReplicaAware, SmoothedSparseCrossentropy
    from seqtasks.training.fit import make_optimizer

    model.compile(
        optimizer=make_optimizer(training),
        loss=SmoothedSparseCrossentropy(training.label_smoothing),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="token_accuracy")],
        # XLA: under TensorFlow it cannot compile the gradient of the input-feeding scan (TensorArray
        # accumulators); under JAX the scan is a `lax.scan` it compiles, and eager steps would crawl.
        jit_compile=keras.backend.backend() == "jax",
    )
    if isinstance(model, ReplicaAware):  # Seq2Seq, ImageCaptioner: each replica weighs in by its share of the tokens
        model.use_replicas(STEP_REPLICAS)
