"""Optimizer, callbacks and the `fit` call shared by every task."""

import contextlib
import warnings
from pathlib import Path


def make_optimizer(config):
    from seqtasks.training import optimizers

    classes = {
        "adam": optimizers.Adam,
        "adamw": optimizers.AdamW,
        "sgd": optimizers.SGD,
        "rmsprop": optimizers.RMSprop,
    }
    learning_rate = config.learning_rate
    if config.learning_rate_schedule != "constant":  # a float keeps the optimizer's variables as they were
        learning_rate = optimizers.EpochSchedule(
            config.learning_rate, config.learning_rate_schedule, config.learning_rate_decay, config.epochs
        )
    options = {}
    if config.ema_momentum is not None:
        options.update(use_ema=True, ema_momentum=config.ema_momentum)
    if config.weight_decay is not None:
        options.update(weight_decay=config.weight_decay)
    return classes[config.optimizer](learning_rate=learning_rate, clipnorm=config.clipnorm, **options)


def monitor_mode(monitor):
    """'min' for a loss (`training.monitor` ending in 'loss'), 'max' for a score."""
    return "min" if monitor.endswith("loss") else "max"


def _inner_optimizer(model):
    optimizer = getattr(model, "optimizer", None)
    return getattr(optimizer, "inner_optimizer", optimizer)  # under a LossScaleOptimizer (mixed_float16)


def averages_weights(model):
    """Whether `model`'s optimizer keeps a moving average of the weights (`training.ema_momentum`)."""
    return bool(getattr(_inner_optimizer(model), "use_ema", False))


def use_averaged_weights(model):
    """Puts the moving average of the weights kept by `model`'s optimizer into the model; nothing without one.

    The average is among the optimizer's variables, so a checkpoint holds
    the one of its step: call this after loading one.
    """
    optimizer = _inner_optimizer(model)
    if averages_weights(model) and optimizer.built:
        optimizer.use_averaged_weights(model.trainable_variables)


def _set_steps_per_epoch(model, steps):
    """Gives an `EpochSchedule`, and an optimizer holding variables frozen for some epochs, the training
    steps of an epoch (`count_batches`), before training."""
    from seqtasks.training import optimizers
    from seqtasks.errors import SeqtasksError

    optimizer = _inner_optimizer(model)
    schedule = getattr(optimizer, "_learning_rate", None)
    if isinstance(schedule, optimizers.EpochSchedule) and schedule.kind != "constant":
        if not steps:
            raise SeqtasksError(f"training.learning_rate_schedule {schedule.kind!r} needs data of a known length")
        schedule.steps_per_epoch = steps
    if getattr(optimizer, "frozen_paths", ()):
        if not steps:
            raise SeqtasksError("vectors frozen for some epochs need data of a known length")
        optimizer.steps_per_epoch = steps


def _time_limit(minutes, checkpoints):
    import keras

    class TimeLimit(keras.callbacks.Callback):
        """Stops training once `minutes` of training time have passed, a resumed run's earlier time included."""

        def on_train_batch_end(self, batch, logs=None):
            if checkpoints.train_seconds > 60.0 * minutes:
                self.model.stop_training = True

    return TimeLimit()


def _stop_on_divergence(config, checkpoints):
    import math

    import keras

    from seqtasks.errors import SeqtasksError

    class StopOnDivergence(keras.callbacks.Callback):
        """Ends training at the first step whose loss is not finite, before that step is checkpointed."""

        def on_train_batch_end(self, batch, logs=None):
            loss = (logs or {}).get("loss")
            if loss is not None and not math.isfinite(float(loss)):
                raise SeqtasksError(
                    f"training diverged: the loss is {float(loss)} at step {checkpoints.steps + 1} (epoch "
                    f"{checkpoints.epoch + 1}); no model was saved or exported (try a lower "
                    f"training.learning_rate than {config.learning_rate})"
                )

    return StopOnDivergence()


def _training_progress(epochs):
    import keras

    class TrainingProgress(keras.callbacks.Callback):
        """Tells a model with `set_training_progress(fraction)` the fraction of `epochs` done as each epoch begins:
        0 at the first, 1 at the last (a resumed epoch begins again)."""

        def on_epoch_begin(self, epoch, logs=None):
            self.model.set_training_progress(epoch / max(epochs - 1, 1))

    return TrainingProgress()


def _validation_scores(score):
    import keras

    class ValidationScores(keras.callbacks.Callback):
        """Adds `score(model)`, named scores of the validation data, to each epoch's logs.

        They are computed as validation ends (in every epoch, a stopped one
        too), before `SwapEMAWeights` swaps the raw weights back, so they
        score the weights validated; the callbacks after this one (early
        stopping, checkpoints) see them.
        """

        def on_test_end(self, logs=None):
            self.scores = score(self.model)

        def on_epoch_end(self, epoch, logs=None):
            logs.update(self.scores)

    return ValidationScores()


def fit(model, train_data, validation_data, config, run_dir, state=None, validation_scores=None):
    """Trains with `model.fit`, with checkpoints to resume from, logging to TensorBoard; keeps the best weights.

    `state` is the restored state of a resumed run (see
    `seqtasks.training.checkpoints.restore`): training goes on from the epoch and
    batch it names, with its history, best value, early-stopping count and
    training time; a state whose training had ended trains no further. The
    weights with the best `config.monitor` value (the lowest validation loss
    by default; the highest accuracy for an accuracy) are restored into the
    model (their moving average with `config.ema_momentum`) before returning the Keras history of the whole run, with
    `batches_seen`, the training steps run, and `train_seconds`. A loss that
    is not finite ends training with a `SeqtasksError`, the checkpoints from
    before it untouched. `validation_scores`, a callable from the model to
    `{log name: value}` (scores of decoded validation outputs, such as
    `val_bleu_4`), is called after each epoch's validation; `config.monitor`
    may name what it returns.
    """
    import keras

    from seqtasks.training.checkpoints import BEST_FILE, TrainingCheckpoints
    from seqtasks.training.compiled import xla_compilations
    from seqtasks.training.position import training_position
    from seqtasks.training.progress import progress_callback

    run_dir = Path(run_dir)
    mode = monitor_mode(config.monitor)
    callbacks = []
    early_stopping = None
    if config.early_stopping_patience is not None:
        early_stopping = keras.callbacks.EarlyStopping(
            monitor=config.monitor, mode=mode, patience=config.early_stopping_patience
        )
        callbacks.append(early_stopping)
    checkpoints = TrainingCheckpoints(
        run_dir / "checkpoints",
        config.checkpoint_every_steps,
        config.keep_checkpoints,
        config.monitor,
        mode,
        training_position(),
        state=state,
        early_stopping=early_stopping,
    )
    # First, so that no other callback sees (or checkpoints) a diverged step.
    callbacks.insert(0, _stop_on_divergence(config, checkpoints))
    if averages_weights(model):
        # Validates the averaged weights, so they pick the best epoch; `checkpoints` saves the raw
        # ones (and the average with the optimizer's variables) after the swap back.
        callbacks.insert(1, keras.callbacks.SwapEMAWeights(swap_on_epoch=False))
    if validation_scores is not None and validation_data is not None:
        callbacks.insert(1, _validation_scores(validation_scores))  # before SwapEMAWeights and what reads the logs
    if hasattr(model, "set_training_progress"):
        callbacks.append(_training_progress(config.epochs))
    progress = progress_callback(config, train_data, checkpoints)  # counts an epoch's batches: ETAs from epoch 1
    _set_steps_per_epoch(model, progress.steps)
    callbacks += [checkpoints, progress, keras.callbacks.TensorBoard(log_dir=str(run_dir / "logs"))]
    if config.max_minutes is not None:
        callbacks.append(_time_limit(config.max_minutes, checkpoints))
    history = keras.callbacks.History()
    compilations = {}

    def fit_until(epochs):
        with warnings.catch_warnings(), xla_compilations(compilations):
            # Keras warns whenever data of unknown length ends an epoch, which is how every epoch here ends.
            warnings.filterwarnings("ignore", message="Your input ran out of data")
            try:
                return model.fit(
                    train_data,
                    validation_data=validation_data,
                    initial_epoch=checkpoints.epoch,
                    epochs=epochs,
                    callbacks=callbacks,
                    shuffle=False,  # the datasets shuffle themselves
                    verbose=0,  # `progress` draws a live line in a terminal, a line per epoch in logs
                )
            finally:
                progress.end_line()

    if state is None or not state["done"]:
        if checkpoints.epoch_metrics is not None:
            _build_metrics(model, validation_data if validation_data is not None else train_data)
        if checkpoints.batches_done:
            # The rest of the interrupted epoch on its own: Keras takes the first epoch's
            # length for every later one when the data's length is unknown.
            history = fit_until(checkpoints.epoch + 1)
        if not model.stop_training and checkpoints.epoch < config.epochs:
            history = fit_until(config.epochs)
        checkpoints.save(done=True)
        train_seconds = checkpoints.train_seconds
    else:
        train_seconds = state["train_seconds"]
    best = run_dir / "checkpoints" / BEST_FILE
    if best.exists():  # absent only when no epoch had a finite monitored value
        model.load_weights(str(best))
    use_averaged_weights(model)
    history.history = checkpoints.history
    history.batches_seen = checkpoints.steps
    history.train_seconds = train_seconds
    history.first_step_seconds = checkpoints.first_step_seconds
    history.xla_compilations = compilations
    return history


def fit_metrics(task, history, train_seconds, model):
    """The metrics every task records about its `fit`: losses by epoch, epochs, time, size."""
    from seqtasks.training.checkpoints import finite_or_none

    return {
        "task": task,
        "history": {key: [finite_or_none(v) for v in values] for key, values in history.history.items()},
        "epochs_run": len(history.history["loss"]),
        "train_seconds": round(train_seconds, 1),
        # From the start of `fit` to the end of its first step: tracing, compiling, the first batch.
        "first_step_seconds": history.first_step_seconds,
        "parameters": int(model.count_params()),
        # Under JAX: how often XLA compiled the training and validation steps (once per batch shape), and how long.
        "xla_compilations": history.xla_compilations,
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


def _build_metrics(model, data):
    """Builds the compiled metrics from one batch of `data`, so a resumed epoch can restore their running values.

    Keras builds them in the first training step otherwise (on one device),
    after the epoch began.
    """
    import contextlib

    strategy = getattr(model, "distribute_strategy", None)
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        model._symbolic_build(data_batch=next(iter(data)))


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
    model._loss_tracker.update_state = _weighted_by_global_batch(model._loss_tracker.update_state)
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        # Keras then averages each step's logs across workers along axis 0,
        # which scalars lack; the steps return them as vectors of one.
        model.train_step = _logs_as_vectors(model.train_step)
        model.test_step = _logs_as_vectors(model.test_step)


def _weighted_by_global_batch(update_state):
    """Has the logged loss averaged as on one device: each replica's loss weighs in equally.

    Keras weighs each replica's loss by the replica's share of the batch, but
    the losses (see `seqtasks.training.losses.replica_share`) are already parts of the
    global mean, so a replica's value must count equally: every replica is
    given the mean share as its weight.
    """
    from keras import ops

    from seqtasks.training.distribute import mean_over_replicas, replicas_in_step

    def update(values, sample_weight=None):
        if sample_weight is not None and replicas_in_step() > 1:
            sample_weight = mean_over_replicas(ops.cast(sample_weight, "float32"))
        return update_state(values, sample_weight=sample_weight)

    return update


def _logs_as_vectors(step):
    from keras import ops

    def wrapped(data):
        return {name: ops.reshape(value, (1,)) for name, value in step(data).items()}

    return wrapped


def train_model(recipe, run_dir, make_model, compile_model, train_data, validation_data, validation_scores=None):
    """Builds and compiles under the recipe's strategy, fits, and saves `run_dir/model/model.keras`.

    A run folder with a checkpoint resumes from it; `validation_scores` is
    `fit`'s. Returns `(model, history, train_seconds)`, the model holding
    the best weights; `train_seconds` includes the time trained before a
    resumption.
    """
    import keras

    from seqtasks.training import checkpoints
    from seqtasks.training.distribute import make_strategy
    from seqtasks.utils.io_utils import publish_folder

    backend = keras.backend.backend()
    strategy = make_strategy(recipe.distribute, backend)
    with strategy.scope(), dtype_policy(recipe.training.precision):
        model = make_model()
        if not model.built:
            model.build()
        compile_model(model)
    if backend == "tensorflow" and strategy.num_replicas_in_sync > 1:
        _build_before_fit(model, train_data, strategy)
    if backend == "jax" and strategy.num_replicas_in_sync > 1:
        from seqtasks.training.distribute import divisible_batches

        train_data = divisible_batches(train_data, strategy.num_replicas_in_sync)
        if validation_data is not None:
            validation_data = divisible_batches(validation_data, strategy.num_replicas_in_sync)
    with strategy.scope():
        state = checkpoints.restore(model, Path(run_dir) / "checkpoints")
    if state is not None:
        print(f"Resuming from step {state['steps']} (epoch {state['epoch'] + 1}, batch {state['batches_done']})")
    # Keras' JAX trainer shards each batch by the distribution in scope; tf.distribute's model keeps its strategy.
    with strategy.scope() if backend == "jax" else contextlib.nullcontext():
        history = fit(model, train_data, validation_data, recipe.training, run_dir, state, validation_scores)
    publish_folder(lambda folder: model.save(f"{folder}/model.keras"), Path(run_dir) / "model")
    return model, history, history.train_seconds
