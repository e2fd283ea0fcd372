"""Converted weights copied into a `Seq2Seq` built from the converted recipe."""

from dataclasses import dataclass

import numpy as np

from seqtasks.converters.attention import copy_attention
from seqtasks.converters.cells import copy_cell


@dataclass
class Weights:
    """What a converter read: embeddings (old rows), encoder layers (each a list of its directions' `Cell`s),
    decoder `Cell`s, the attention's arrays, the attentional projection `W_c`, the output layer (old columns)."""

    source_embedding: np.ndarray
    target_embedding: np.ndarray
    encoder: list
    decoder: list
    attention: dict
    attentional_kernel: np.ndarray
    output_kernel: np.ndarray
    output_bias: np.ndarray


def assemble(model, source, target, weights):
    """Copies `weights` into the built `Seq2Seq` `model`, reordering rows by the `Reordered` `source` and `target`."""
    model.source_embedding.embeddings.assign(source.rows(weights.source_embedding))
    model.target_embedding.embeddings.assign(target.rows(weights.target_embedding))
    encoder = model.encoder_layer
    for index, directions in enumerate(weights.encoder):
        copy_cell(directions[0], encoder.rnn_layers[index].cell)
        if len(directions) > 1:
            copy_cell(directions[1], encoder.backward_layers[index].cell)
    for layer, cell in zip(model.decoder_layer.rnn_layers, weights.decoder):
        copy_cell(cell, layer.cell)
    copy_attention(weights.attention, model.decoder_layer.attention_layer)
    model.decoder_layer.output_dense.kernel.assign(weights.attentional_kernel)
    kernel, bias = target.output_layer(weights.output_kernel, weights.output_bias)
    model.output_dense.kernel.assign(kernel)
    model.output_dense.bias.assign(bias)
    return model

