"""Trained tfa.seq2seq and OpenNMT-tf encoder-decoders as translation runs (`seqtasks.convert`).

`checkpoint` reads a TensorFlow checkpoint and checks that every variable is
used once with the expected shape; `vocabulary` puts the reserved tokens of
seqtasks first; `tfa` and `opennmt` map each library's variables onto a
`Seq2Seq`; `run_folder` writes the run that `export`, `eval` and `serve` take.
"""
