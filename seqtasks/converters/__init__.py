"""Trained tfa.seq2seq and OpenNMT-tf encoder-decoders as translation runs (`seqtasks.convert`).

`checkpoint` reads a TensorFlow checkpoint and checks that every variable is
used once with the expected shape; `cells` and `attention` read the Keras
cells and tfa attention mechanisms both libraries save; `tfa` and `opennmt`
map each library's variables and say what recipe they make; `vocabulary`
puts the reserved tokens of seqtasks first; `assembly` copies the weights
into the model the recipe builds; `run_folder` writes the run that `export`,
`eval` and `serve` take.
"""
