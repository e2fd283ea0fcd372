"""An OpenNMT-tf 2 RNN model checkpoint (`RNNEncoder`, `AttentionalRNNDecoder`) as a `Seq2Seq`.

What the variables do not show, the catalogue entry does: the bridge
(`CopyBridge` or `ZeroBridge`, neither has variables) and the attention
layer's activation (`attention_layer_activation`, tanh by default, none in
the V1 entries). A custom model names them itself.
"""

from seqtasks.errors import SeqtasksError
from seqtasks.converters.assembly import Weights
from seqtasks.converters.attention import read_attention
from seqtasks.converters.cells import check_embedding, check_stack, read_cell

# Catalogue entry: (bridge, attention layer activation), or why it has no seqtasks equivalent.
CATALOGUE = {
    "LuongAttention": ("copy", "tanh"),
    "NMTSmallV1": ("copy", "none"),
    "NMTMediumV1": "its bidirectional RNNEncoder runs each direction through all 4 layers and joins them at the top; "
    "seqtasks' StackedRNN joins them at every layer",
    "NMTBigV1": "its bidirectional RNNEncoder runs each direction through all 4 layers and joins them at the top; "
    "seqtasks' StackedRNN joins them at every layer",
}
BRIDGES = {"copy": "copy", "zero": "none"}
ACTIVATIONS = {"tanh": "tanh", "none": "linear"}

_SOURCE_EMBEDDING = "model/examples_inputter/features_inputter/embedding"
_TARGET_EMBEDDING = "model/examples_inputter/labels_inputter/embedding"
_ENCODER = "model/encoder/rnn/rnn"
_DECODER_CELLS = "model/decoder/cell/_cell/cells"
_ATTENTION = "model/decoder/attention_mechanism"
_ATTENTION_LAYER = "model/decoder/cell/_attention_layers/0/kernel"
_OUTPUT = "model/decoder/output_layer"


def settings(model, bridge, attention_layer_activation):
    """`(seqtasks bridge, combine)` from a catalogue entry name, or from the two settings of a custom model."""
    if model is not None:
        if model not in CATALOGUE:
            raise SeqtasksError(f"unknown OpenNMT-tf RNN model {model!r}; expected one of {', '.join(CATALOGUE)}")
        if isinstance(CATALOGUE[model], str):
            raise SeqtasksError(f"OpenNMT-tf's {model} cannot be converted: {CATALOGUE[model]}")
        bridge, attention_layer_activation = CATALOGUE[model]
    for value, choices, name in (
        (bridge, BRIDGES, "bridge"),
        (attention_layer_activation, ACTIVATIONS, "attention layer activation"),
    ):
        if value not in choices:
            raise SeqtasksError(
                f"a custom OpenNMT-tf model needs its {name}: expected one of {', '.join(choices)}; got {value!r} "
                "(give --model, or --bridge and --attention-layer-activation)"
            )
    return BRIDGES[bridge], ACTIVATIONS[attention_layer_activation]


def _cells(variables, base, what):
    """The cells `base/0`, `base/1`, ... of a `StackedRNNCells`, each possibly inside OpenNMT-tf's `RNNCellWrapper`."""
    cells = []
    while variables.has(f"{base}/{len(cells)}/kernel") or variables.has(f"{base}/{len(cells)}/cell/kernel"):
        prefix = f"{base}/{len(cells)}"
        wrapped = f"{prefix}/cell" if variables.has(f"{prefix}/cell/kernel") else prefix
        cells.append((read_cell(variables, wrapped, f"{what} {len(cells)}"), wrapped))
    if not cells:
        raise SeqtasksError(f"{variables.path}: no {what}s ({base}/0/kernel); expected an OpenNMT-tf RNNEncoder and "
                            f"AttentionalRNNDecoder")
    return [cell for cell, _ in cells], [prefix for _, prefix in cells]


def convert_opennmt(variables, source, target, bridge, combine):
    """Reads every variable of `variables`; returns `(Weights, the recipe's model section as a dict)`."""
    source_matrix = variables.take(_SOURCE_EMBEDDING, "the source WordEmbedder's matrix")
    target_matrix = variables.take(_TARGET_EMBEDDING, "the target WordEmbedder's matrix")
    embedding_dim = source_matrix.shape[1]
    bidirectional = variables.has(f"{_ENCODER}/forward_layer/cell/cells/0/kernel") or variables.has(
        f"{_ENCODER}/forward_layer/cell/cells/0/cell/kernel"
    )
    if bidirectional:
        forward, forward_names = _cells(variables, f"{_ENCODER}/forward_layer/cell/cells", "forward encoder cell")
        backward, backward_names = _cells(variables, f"{_ENCODER}/backward_layer/cell/cells", "backward encoder cell")
        if len(forward) > 1:
            raise SeqtasksError(
                f"{variables.path}: a bidirectional RNNEncoder of {len(forward)} layers runs each direction through "
                "all of them and joins them at the top; seqtasks' StackedRNN joins them at every layer, so only one "
                "layer converts"
            )
        check_stack(variables, forward + backward, forward_names + backward_names, embedding_dim, "encoder")
        layers, memory_dim = [forward + backward], 2 * forward[0].units
    else:
        cells, names = _cells(variables, f"{_ENCODER}/cell/cells", "encoder cell")
        check_stack(variables, cells, names, embedding_dim, "encoder")
        layers, memory_dim = [[cell] for cell in cells], cells[0].units
    decoder, decoder_names = _cells(variables, _DECODER_CELLS, "decoder cell")
    units = decoder[0].units
    attentional_kernel = variables.take(_ATTENTION_LAYER, "the AttentionWrapper's attention layer")
    if attentional_kernel.shape != (units + memory_dim, units):
        raise SeqtasksError(
            f"{variables.path}: {_ATTENTION_LAYER} has shape {attentional_kernel.shape}; expected the cell output and "
            f"the context ({units} + {memory_dim}) to the decoder's {units} units"
        )
    if decoder[0].input_dim != embedding_dim + units:
        raise SeqtasksError(
            f"{variables.path}: the first decoder cell reads {decoder[0].input_dim} features; AttentionalRNNDecoder "
            f"feeds it the embedding and the previous attention ({embedding_dim} + {units})"
        )
    check_stack(variables, decoder[1:], decoder_names[1:], units, "decoder")
    attention, attention_arrays = read_attention(variables, _ATTENTION, units, memory_dim)
    encoder_units = layers[0][0].units
    if bridge == "copy" and (len(layers), layers[0][0].cell_type, memory_dim) != (len(decoder), decoder[0].cell_type, units):
        raise SeqtasksError(
            f"{variables.path}: a CopyBridge needs encoder and decoder of the same cells; got {len(layers)} "
            f"{layers[0][0].cell_type} of {memory_dim} and {len(decoder)} {decoder[0].cell_type} of {units}"
        )
    output_kernel = variables.take(f"{_OUTPUT}/kernel", "the output layer", (units, target_matrix.shape[0]))
    output_bias = variables.take(f"{_OUTPUT}/bias", "the output layer", (target_matrix.shape[0],))
    check_embedding(variables, source_matrix, source, "source", embedding_dim)
    check_embedding(variables, target_matrix, target, "target", embedding_dim)
    section = {
        "embedding_dim": int(embedding_dim),
        "encoder": {
            "cell_type": layers[0][0].cell_type,
            "units": encoder_units,
            "num_layers": len(layers),
            "bidirectional": bidirectional,
        },
        "decoder": {
            "cell_type": decoder[0].cell_type,
            "units": units,
            "num_layers": len(decoder),
            "input_feeding": True,
            "combine": combine,
        },
        "attention": attention,
        "bridge": bridge,
    }
    weights = Weights(
        source_matrix, target_matrix, layers, decoder, attention_arrays, attentional_kernel, output_kernel, output_bias
    )
    leftover_bridge = [name for name in variables.names() if name.startswith("model/decoder/bridge/")]
    if leftover_bridge:
        raise SeqtasksError(
            f"{variables.path}: {leftover_bridge[0]} is a DenseBridge's; seqtasks' dense bridge has a tanh where "
            "OpenNMT-tf's has none, so it does not convert"
        )
    variables.check_all_taken("OpenNMT-tf RNNEncoder and AttentionalRNNDecoder model")
    return weights, section
