"""The TensorFlow tutorials' translation designs, re-implemented at the benchmark's model size.

(A) `tutorial_attention`: the current "Neural machine translation with attention"
tutorial. (B) `tutorial_bahdanau`: the older one, with Bahdanau attention and
the decoder stepped one token at a time inside a `GradientTape` train step.
Both train and decode on the same pairs, subwords and validation split as the
seqtasks run they are compared with (`common.load_run_data`).
"""
