"""The training loop: `fit` with checkpoints and resume, the optimizer, the loss, distribution, the backends' compiled functions, the run folder's checkpoint files."""
