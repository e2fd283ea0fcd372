"""Bounds that parts on several floors share (the recipe's fields, the decoding settings)."""

MAX_SEED = 2**32 - 1  # NumPy's and TensorFlow's seeds are 32-bit
MAX_VOCAB = 1_000_000
