"""Optimizer, callbacks and the `fit` call shared by every task."""

import contextlib
from pathlib import Path


def make_optimizer(config):
    import keras

    classes = {
        "adam": keras.optimizers.Adam,
        "adamw": keras.optimizers.AdamW,
        "sgd": keras.optimizers.SGD,
        "rmsprop": keras.optimizers.RMSprop,
    }
    return classes[config.optimizer](learning_rate=config.learning_rate, clipnorm=config.clipnorm)


def _time_limit(minutes):
    import time

    import keras

    class TimeLimit(keras.callbacks.Callback):
        """Stops training once `minutes` have passed, checked after every batch."""

        def on_train_begin(self, logs=None):
            self.deadline = time.monotonic() + 60.0 * minutes

        def on_train_batch_end(self, batch, logs=None):
            if time.monotonic() > self.deadline:
                self.model.stop_training = True

    return TimeLimit()


def fit(model, train_data, validation_data, config, run_dir):
    """Trains with `model.fit`, logging to TensorBoard and keeping the best weights.

    The weights with the best `config.monitor` value (the lowest validation
    loss by default; the highest accuracy for an accuracy) are saved under
    `run_dir/checkpoints/` and restored into the model before returning the
    Keras history, with `batches_seen`, the training steps run.
    """
    import keras

    run_dir = Path(run_dir)
    mode = "min" if config.monitor.endswith("loss") else "max"
    best = run_dir / "checkpoints" / "best.weights.h5"
    best.parent.mkdir(parents=True, exist_ok=True)
    counter = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: setattr(counter, "count", counter.count + 1)
    )
    counter.count = 0
    callbacks = [
        counter,
        keras.callbacks.ModelCheckpoint(
            str(best), monitor=config.monitor, mode=mode, save_best_only=True, save_weights_only=True
        ),
        keras.callbacks.TensorBoard(log_dir=str(run_dir / "logs")),
    ]
    if config.max_minutes is not None:
        callbacks.append(_time_limit(config.max_minutes))
    if config.early_stopping_patience is not None:
        callbacks.append(
            keras.callbacks.EarlyStopping(
                monitor=config.monitor, mode=mode, patience=config.early_stopping_patience
            )
        )
    history = model.fit(
        train_data,
        validation_data=validation_data,
        epochs=config.epochs,
        callbacks=callbacks,
        shuffle=False,  # the datasets shuffle themselves
        verbose=2,
    )
    if best.exists():  # absent only when no epoch had a finite monitored value
        model.load_weights(str(best))
    history.batches_seen = counter.count
    return history


def fit_metrics(task, history, train_seconds, model):
    """The metrics every task records about its `fit`: losses by epoch, epochs, time, size."""
    return {
        "task": task,
        "history": {key: [float(v) for v in values] for key, values in history.history.items()},
        "epochs_run": len(history.history["loss"]),
        "train_seconds": round(train_seconds, 1),
        "parameters": int(model.count_params()),
    }


@contextlib.contextmanager
def dtype_policy(name):
    """Sets the global Keras dtype policy while the model is built, then restores the previous one.

    Layers take the policy when they are created, so the model keeps it; code
    that runs later (other models, loading) sees the previous policy again.
    """
    import keras

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def _build_before_fit(model, train_data, strategy):
    """Builds the model, loss, metrics and optimizer from one local batch, before `fit` on several replicas.

    Keras 3's `fit` would build them by averaging the first distributed batch
    over the replicas, which fails when the replicas' shares differ in size
    (an odd batch) and under MultiWorkerMirroredStrategy
    (keras-team/keras#20585); once everything is built that step has nothing
    left to do, so it is skipped for this model.
    """
    import tensorflow as tf

    with strategy.scope():
        model._symbolic_build(data_batch=next(iter(train_data)))
        if model.optimizer is not None and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
    model._maybe_symbolic_build = lambda iterator=None, data_batch=None: None
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        # Keras then averages each step's logs across workers along axis 0,
        # which scalars lack; the steps return them as vectors of one.
        model.train_step = _logs_as_vectors(model.train_step)
        model.test_step = _logs_as_vectors(model.test_step)


def _logs_as_vectors(step):
    from keras import ops

    def wrapped(data):
        return {name: ops.reshape(value, (1,)) for name, value in step(data).items()}

    return wrapped


def train_model(recipe, run_dir, make_model, compile_model, train_data, validation_data):
    """Builds and compiles under the recipe's strategy, fits, and saves `run_dir/model/model.keras`.

    Returns `(model, history, train_seconds)`, the model holding the best weights.
    """
    import time

    from seqtasks.distribute import make_strategy
    from seqtasks.io_utils import publish_folder

    strategy = make_strategy(recipe.distribute)
    with strategy.scope(), dtype_policy(recipe.training.precision):
        model = make_model()
        if not model.built:
            model.build()
        compile_model(model)
    if strategy.num_replicas_in_sync > 1:
        _build_before_fit(model, train_data, strategy)
    started = time.time()
    history = fit(model, train_data, validation_data, recipe.training, run_dir)
    train_seconds = time.time() - started
    publish_folder(lambda folder: model.save(f"{folder}/model.keras"), Path(run_dir) / "model")
    return model, history, train_seconds
