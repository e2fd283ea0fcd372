"""A tfa.seq2seq attention mechanism in a checkpoint (BahdanauAttention or LuongAttention), read and copied.

tfa's variable names are the same whichever library built the mechanism, so
both converters share this: `memory_layer/kernel` projects the memory (the
keys), `query_layer/kernel`, `attention_v`, `attention_g` and `attention_b`
are Bahdanau's query projection, `v` and weight normalisation, and Luong's
`attention_g` is its scale.
"""

from seqtasks.errors import SeqtasksError


def read_attention(variables, prefix, query_dim, memory_dim):
    """`(recipe attention section, arrays by seqtasks weight name)` of the mechanism at `prefix`."""
    memory = variables.take(f"{prefix}/memory_layer/kernel", "the attention's memory layer")
    if memory.shape[0] != memory_dim:
        raise SeqtasksError(
            f"{variables.path}: {prefix}/memory_layer/kernel reads {memory.shape[0]} features; "
            f"the encoder's outputs have {memory_dim}"
        )
    units = int(memory.shape[1])
    arrays = {"key_dense": memory}
    if variables.has(f"{prefix}/query_layer/kernel"):
        arrays["query_dense"] = variables.take(f"{prefix}/query_layer/kernel", "the attention's query layer", (query_dim, units))
        arrays["attention_v"] = variables.take(f"{prefix}/attention_v", "the attention's v", (units,))
        normalize = variables.has(f"{prefix}/attention_g")
        if normalize:
            arrays["attention_g"] = variables.take(f"{prefix}/attention_g", "the attention's g", ())
            arrays["attention_b"] = variables.take(f"{prefix}/attention_b", "the attention's b", (units,))
        return {"type": "bahdanau", "score": "general", "units": units, "normalize": normalize}, arrays
    if units != query_dim:
        raise SeqtasksError(
            f"{variables.path}: {prefix}/memory_layer/kernel projects to {units}; LuongAttention's units must be "
            f"the decoder's state size ({query_dim})"
        )
    scale = variables.has(f"{prefix}/attention_g")
    if scale:
        arrays["attention_g"] = variables.take(f"{prefix}/attention_g", "the attention's scale g", ())
    return {"type": "luong", "score": "general", "scale": scale}, arrays


def copy_attention(arrays, layer):
    """Copies `read_attention`'s arrays into a built `BahdanauAttention` or `LuongAttention`."""
    for name, value in arrays.items():
        weight = getattr(layer, name)
        (weight.kernel if name.endswith("_dense") else weight).assign(value)

