"""A tf.keras 2 / tfa.seq2seq encoder-decoder checkpoint (`AttentionWrapper` over an LSTM or GRU) as a `Seq2Seq`.

The variable names default to those of TensorFlow's "Neural machine
translation with attention" tutorial of the tfa era (a `tf.train.Checkpoint`
of its `encoder`, `decoder` and `optimizer`); `names` overrides any of them
for models whose attributes are named otherwise.
"""

from seqtasks.errors import SeqtasksError
from seqtasks.converters.assembly import Weights
from seqtasks.converters.attention import read_attention
from seqtasks.converters.cells import check_embedding, check_stack, read_cell

TUTORIAL_NAMES = {
    "source_embedding": "encoder/embedding/embeddings",
    "encoder_cells": "encoder/lstm_layer/cell",
    "target_embedding": "decoder/embedding/embeddings",
    "decoder_cells": "decoder/decoder_rnn_cell",
    "attention_mechanism": "decoder/attention_mechanism",
    "attention_layer": "decoder/rnn_cell/_attention_layers/0/kernel",
    "output_layer": "decoder/fc",
}
ROLES = {
    "source_embedding": "the source Embedding's matrix",
    "encoder_cells": "the encoder's cells (prefixes of kernel, recurrent_kernel, bias), bottom first, comma-separated",
    "target_embedding": "the target Embedding's matrix",
    "decoder_cells": "the decoder's cells inside the AttentionWrapper, bottom first, comma-separated",
    "attention_mechanism": "the BahdanauAttention or LuongAttention (prefix of memory_layer, query_layer, attention_v ...)",
    "attention_layer": "the AttentionWrapper's attention layer kernel (attention_layer_size)",
    "output_layer": "the Dense over the vocabulary (prefix of kernel, bias)",
}


def check_names(names):
    """The tutorial's names with `names` (role -> checkpoint name) in their place; unknown roles are errors."""
    unknown = sorted(set(names or {}) - set(ROLES))
    if unknown:
        raise SeqtasksError(f"unknown variable role(s) {', '.join(unknown)}; expected one of {', '.join(ROLES)}")
    return {**TUTORIAL_NAMES, **(names or {})}


def convert_tfa(variables, source, target, names):
    """Reads every variable of `variables`; returns `(Weights, the recipe's model section as a dict)`.

    `source` and `target` are `Reordered` vocabularies. Raises `SeqtasksError`
    naming the variable when one is missing, has another shape than the rest
    implies, or is left over.
    """
    names = check_names(names)
    encoder_cells = [name.strip() for name in names["encoder_cells"].split(",")]
    decoder_cells = [name.strip() for name in names["decoder_cells"].split(",")]
    source_matrix = variables.take(names["source_embedding"], ROLES["source_embedding"])
    embedding_dim = source_matrix.shape[1]
    encoder = [read_cell(variables, prefix, "encoder cell") for prefix in encoder_cells]
    cell_type, units = encoder[0].cell_type, encoder[0].units
    attention_kernel = variables.take(names["attention_layer"], ROLES["attention_layer"])
    output_size = attention_kernel.shape[1]
    decoder = [read_cell(variables, prefix, "decoder cell") for prefix in decoder_cells]
    decoder_units = decoder[0].units
    # The AttentionWrapper's default cell_input_fn: [embedding; previous attention] into the first cell.
    if decoder[0].input_dim != embedding_dim + output_size:
        raise SeqtasksError(
            f"{variables.path}: the first decoder cell {decoder_cells[0]} reads {decoder[0].input_dim} features; "
            f"AttentionWrapper's default cell_input_fn gives it the embedding and the attention "
            f"({embedding_dim} + {output_size})"
        )
    if attention_kernel.shape[0] != decoder_units + units:
        raise SeqtasksError(
            f"{variables.path}: {names['attention_layer']} reads {attention_kernel.shape[0]} features; expected the "
            f"cell output and the context ({decoder_units} + {units})"
        )
    if (len(encoder), cell_type, units) != (len(decoder), decoder[0].cell_type, decoder_units):
        raise SeqtasksError(
            f"{variables.path}: the decoder starts from the encoder's final states, so encoder and decoder need "
            f"the same cells; got {len(encoder)} {cell_type} of {units} and {len(decoder)} "
            f"{decoder[0].cell_type} of {decoder_units}"
        )
    attention, attention_arrays = read_attention(variables, names["attention_mechanism"], decoder_units, units)
    section = {
        "embedding_dim": int(embedding_dim),
        "encoder": {"cell_type": cell_type, "units": units, "num_layers": len(encoder)},
        "decoder": {
            "cell_type": cell_type,
            "units": decoder_units,
            "num_layers": len(decoder),
            "input_feeding": True,
            "combine": "linear",
            "output_size": int(output_size),
        },
        "attention": attention,
        "bridge": "copy",
    }
    target_matrix = variables.take(names["target_embedding"], ROLES["target_embedding"])
    output = names["output_layer"]
    output_kernel = variables.take(f"{output}/kernel", ROLES["output_layer"], (output_size, target_matrix.shape[0]))
    output_bias = variables.take(f"{output}/bias", ROLES["output_layer"], (target_matrix.shape[0],))
    check_embedding(variables, target_matrix, target, "target", embedding_dim)
    check_embedding(variables, source_matrix, source, "source", embedding_dim)
    check_stack(variables, encoder, encoder_cells, embedding_dim, "encoder")
    check_stack(variables, decoder[1:], decoder_cells[1:], decoder_units, "decoder")
    weights = Weights(
        source_matrix, target_matrix, [[cell] for cell in encoder], decoder, attention_arrays, attention_kernel,
        output_kernel, output_bias,
    )
    variables.check_all_taken("tfa.seq2seq AttentionWrapper encoder-decoder")
    return weights, section

