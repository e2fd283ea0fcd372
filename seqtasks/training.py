"""Optimizer, callbacks and the `fit` call shared by every task."""

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


def fit(model, train_data, validation_data, config, run_dir):
    """Trains with `model.fit`, logging to TensorBoard and keeping the best weights.

    The weights with the lowest validation loss are saved under
    `run_dir/checkpoints/` and restored into the model before returning the
    Keras history.
    """
    import keras

    run_dir = Path(run_dir)
    best = run_dir / "checkpoints" / "best.weights.h5"
    best.parent.mkdir(parents=True, exist_ok=True)
    callbacks = [
        keras.callbacks.ModelCheckpoint(
            str(best), monitor="val_loss", save_best_only=True, save_weights_only=True
        ),
        keras.callbacks.TensorBoard(log_dir=str(run_dir / "logs")),
    ]
    if config.early_stopping_patience is not None:
        callbacks.append(
            keras.callbacks.EarlyStopping(monitor="val_loss", patience=config.early_stopping_patience)
        )
    history = model.fit(
        train_data,
        validation_data=validation_data,
        epochs=config.epochs,
        callbacks=callbacks,
        shuffle=False,  # the datasets shuffle themselves
        verbose=2,
    )
    if best.exists():  # absent only when no epoch had a finite validation loss
        model.load_weights(str(best))
    return history
