"""Where training is in its data, shared by `fit` (which moves it) and the training pipelines (which read it)."""

_POSITION = []


class TrainingPosition:
    """Where training is in its data: the epoch, and how many of that epoch's batches are already done.

    Training pipelines read both when each epoch's iterator is made: the
    epoch picks the shuffle order, and a resumed run skips the batches it
    had trained on before it was stopped. The process has one position,
    which `fit` moves (see `seqtasks.training.checkpoints`).
    """

    def __init__(self):
        import tensorflow as tf

        self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
        self.batches_done = tf.Variable(0, dtype=tf.int64, trainable=False, name="batches_done")

    def start_epoch(self, epoch, batches_done=0):
        self.epoch.assign(epoch)
        self.batches_done.assign(batches_done)


def training_position():
    """The process's `TrainingPosition`, made outside any distribution strategy on first use."""
    if not _POSITION:
        import tensorflow as tf

        with tf.init_scope():
            _POSITION.append(TrainingPosition())
    return _POSITION[0]
