"""Trained models of other libraries as seqtasks runs.

`from_tfa` converts a tf.keras 2 / tfa.seq2seq checkpoint of an
`AttentionWrapper` encoder-decoder (TensorFlow's "NMT with attention"
tutorial of the tfa era by default), `from_opennmt` an OpenNMT-tf RNN model
checkpoint (`RNNEncoder`, `AttentionalRNNDecoder` with Luong or Bahdanau
attention). Each writes a translation run folder: the recipe it inferred
from the checkpoint, the vocabularies with the reserved tokens of seqtasks
first, and `model/model.keras`, which `seqtasks export`, `eval` and `serve`
and `seqtasks.load` take like any run. docs/migrating.md maps every
variable and setting.

Example, with the variable names of TensorFlow's NMT tutorial (the
repository's tests run it on the checkpoints in tests/data/migration/):

    from seqtasks.convert import from_tfa

    run = from_tfa("training_checkpoints/ckpt-10", "spa.vocab", "eng.vocab", "runs/converted")
    # then: seqtasks export runs/converted
"""

import re
from pathlib import Path

from seqtasks.errors import SeqtasksError


def from_tfa(
    checkpoint,
    source_vocab,
    target_vocab,
    output,
    start_token="<start>",
    end_token="<end>",
    unk_token=None,
    names=None,
    data_path=None,
    lower_case=True,
    max_length=40,
):
    """Converts a tfa.seq2seq encoder-decoder checkpoint into the run folder `output`; returns its path.

    Args:
        checkpoint: the checkpoint prefix (`.../ckpt-N`) or its folder (the
            newest checkpoint there).
        source_vocab, target_vocab: vocabulary files, line N the token of id
            N; line 0 is padding (the tutorial's tokenizer leaves id 0 free).
        output: the run folder to write; it must not exist.
        start_token, end_token: the target tokens that start and end a
            sentence; the source's, when it has them, become `[START]` and
            `[END]` too.
        unk_token: the out-of-vocabulary token, if the tokenizers had one.
        names: optional dict of variable names by role (see
            `seqtasks.converters.tfa.ROLES`) where they differ from the
            tutorial's.
        data_path: sentence pairs for `seqtasks eval` (default:
            `output/pairs.tsv`, to be put there).
        lower_case, max_length: the recipe's `data.lower_case` and
            `data.max_length`.
    """
    from seqtasks.converters.checkpoint import CheckpointVariables
    from seqtasks.converters.tfa import convert_tfa

    source, target = (
        _reordered(path, what, {"[PAD]": 0, "[UNK]": unk_token, "[START]": start_token, "[END]": end_token}, required)
        for path, what, required in ((source_vocab, "source vocabulary", False), (target_vocab, "target vocabulary", True))
    )
    variables = CheckpointVariables(checkpoint)
    weights, section = convert_tfa(variables, source, target, names)
    return _write(output, "tfa.seq2seq", variables.path, weights, section, source, target, data_path, lower_case,
                  max_length)


def from_opennmt(
    checkpoint,
    source_vocab,
    target_vocab,
    output,
    model=None,
    bridge=None,
    attention_layer_activation=None,
    data_path=None,
    lower_case=True,
    max_length=40,
):
    """Converts an OpenNMT-tf RNN model checkpoint into the run folder `output`; returns its path.

    Args:
        checkpoint: the checkpoint prefix (`model_dir/ckpt-N`) or the model
            folder (its newest checkpoint).
        source_vocab, target_vocab: the run configuration's vocabulary files
            (`<blank>`, `<s>`, `</s>` first); the out-of-vocabulary id after
            the last line becomes `[UNK]`.
        output: the run folder to write; it must not exist.
        model: the catalogue entry the checkpoint was trained as
            (`"LuongAttention"` or `"NMTSmallV1"`), which says the bridge
            and the attention layer's activation; None for a custom model,
            which gives both:
        bridge: `"copy"` (`CopyBridge`) or `"zero"` (`ZeroBridge`).
        attention_layer_activation: `"tanh"` (the default of
            `AttentionalRNNDecoder`) or `"none"`.
        data_path, lower_case, max_length: as for `from_tfa`.
    """
    from seqtasks.converters.checkpoint import CheckpointVariables
    from seqtasks.converters.opennmt import convert_opennmt, settings

    bridge, combine = settings(model, bridge, attention_layer_activation)
    source, target = (
        _reordered(path, what, {"[PAD]": "<blank>", "[UNK]": "oov", "[START]": "<s>", "[END]": "</s>"}, True)
        for path, what in ((source_vocab, "source vocabulary"), (target_vocab, "target vocabulary"))
    )
    variables = CheckpointVariables(checkpoint)
    weights, section = convert_opennmt(variables, source, target, bridge, combine)
    return _write(output, "OpenNMT-tf", variables.path, weights, section, source, target, data_path, lower_case,
                  max_length)


def _reordered(path, what, specials, required):
    from seqtasks.converters.vocabulary import Reordered, read_vocabulary

    tokens = read_vocabulary(path, what)
    ids = {}
    for reserved, token in specials.items():
        if token == "oov":  # OpenNMT-tf's one out-of-vocabulary bucket: the id after the last line
            ids[reserved] = len(tokens)
        elif isinstance(token, int) or token is None:
            ids[reserved] = token
        elif token in tokens:
            ids[reserved] = tokens.index(token)
        elif required:
            raise SeqtasksError(f"{path}: no {token!r} in the {what} (the token for {reserved})")
        else:
            ids[reserved] = None
    return Reordered(tokens, ids, path, len(tokens) + (specials["[UNK]"] == "oov"))


def _write(output, library, checkpoint, weights, section, source, target, data_path, lower_case, max_length):
    """The recipe first (checked by the loader), then the model it builds, as a run would, holding `weights`."""
    from seqtasks.models import Seq2Seq
    from seqtasks.converters.assembly import assemble
    from seqtasks.converters.run_folder import converted_recipe, validated_recipe, write_run

    output = Path(output)
    if output.exists():
        raise SeqtasksError(f"{output}: already exists; give a new folder for the converted run")
    data_path = Path(data_path).resolve() if data_path is not None else output.resolve() / "pairs.tsv"
    description = f"Converted from the {library} checkpoint {checkpoint}."
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", output.name).strip("-.") or "converted"  # a recipe name is a folder name
    fields = converted_recipe(name, description, section, data_path, lower_case, max_length)
    recipe = validated_recipe(fields, source.tokens, target.tokens)
    model = Seq2Seq.from_recipe(recipe.model, len(source), len(target), seed=recipe.seed)
    model.build()
    assemble(model, source, target, weights)
    return write_run(output, recipe, source.tokens, target.tokens, model)
