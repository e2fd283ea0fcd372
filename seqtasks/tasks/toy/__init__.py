"""The toy task: reversing digit sequences with the attention encoder-decoder."""
