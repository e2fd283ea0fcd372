"""OpenNMT-tf RNN models converted by `seqtasks.convert.from_opennmt` compute what OpenNMT-tf computed (recorded by
tests/data/migration/record_opennmt.py with OpenNMT-tf 2.32 on TensorFlow 2.12)."""

import numpy as np
import pytest

from seqtasks.convert import from_opennmt
from seqtasks.decoding import score_ids, search
from seqtasks.errors import SeqtasksError
from tests.conftest import seqtasks_command
from tests.support.migration_support import FIXTURES, checkpoint_arrays, new_ids, write_checkpoint

# The variants as record_opennmt.py built them: the catalogue's LuongAttention at toy size, and a custom model.
VARIANTS = {
    "luong": {"model": "LuongAttention"},
    "bahdanau": {"bridge": "copy", "attention_layer_activation": "none"},
}
END_ID = 3


def _specials(vocab):
    lines = vocab.read_text(encoding="utf-8").splitlines()
    return {"<blank>": "[PAD]", "<s>": "[START]", "</s>": "[END]", len(lines): "[UNK]"}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def converted(request, tmp_path_factory):
    from seqtasks.lifecycle.runner import Runner

    folder = FIXTURES / f"opennmt-{request.param}"
    run = from_opennmt(
        folder, folder / "source.vocab", folder / "target.vocab", tmp_path_factory.mktemp("onmt") / "run",
        **VARIANTS[request.param],
    )
    model = Runner.open(run).load_model()
    recorded = dict(np.load(folder / "outputs.npz"))
    source_map = new_ids(run, folder / "source.vocab", "source", _specials(folder / "source.vocab"))
    target_map = new_ids(run, folder / "target.vocab", "target", _specials(folder / "target.vocab"))
    return request.param, run, model, recorded, source_map, target_map


def test_the_recipe_says_what_the_checkpoint_and_the_catalogue_entry_hold(converted):
    from seqtasks.recipe import load_recipe

    variant, run, *_ = converted
    model = load_recipe(run / "recipe.yaml").model
    assert model.attention.type == variant and model.bridge == "copy" and model.decoder.input_feeding
    if variant == "luong":  # LuongAttention: 2 + 2 LSTM layers of 16, tanh attention layer
        assert (model.encoder.num_layers, model.encoder.units, model.encoder.bidirectional) == (2, 16, False)
        assert (model.decoder.num_layers, model.decoder.combine) == (2, "tanh")
    else:  # one bidirectional layer of 8 + 8 into one decoder layer of 16, linear attention layer
        assert (model.encoder.num_layers, model.encoder.units, model.encoder.bidirectional) == (1, 8, True)
        assert (model.decoder.num_layers, model.decoder.combine) == (1, "linear")


def test_teacher_forced_logits_and_attention_equal_opennmt(converted):
    _, _, model, recorded, source_map, target_map = converted
    source, target_in = source_map[recorded["source"]], target_map[recorded["target_in"]]
    # Steps past a target's length are the decoder running on padding; OpenNMT-tf computed them unmasked.
    steps = np.arange(target_in.shape[1])[None, :] < recorded["target_lengths"][:, None]
    logits = np.array(model((source, target_in)))[..., target_map]
    np.testing.assert_allclose(logits[steps], recorded["logits"][steps], atol=1e-5, rtol=1e-5)
    attention = np.array(model.attention(source, target_in))
    np.testing.assert_allclose(attention[steps], recorded["attention"][steps], atol=1e-5)
    # Padded source positions get no attention in either.
    padded = np.arange(source.shape[1])[None, :] >= recorded["source_lengths"][:, None]
    assert np.all(attention[steps][:, :] * padded.repeat(steps.sum(1), axis=0) == 0)


def _tokens(ids, lengths):
    """Each row's tokens without the end token (OpenNMT-tf's lengths leave it out)."""
    rows = [list(row[:length]) for row, length in zip(np.asarray(ids), np.asarray(lengths))]
    return [row[:-1] if row and row[-1] == END_ID else row for row in rows]


def test_greedy_ids_equal_opennmt(converted):
    _, _, model, recorded, source_map, target_map = converted
    ids, lengths, scores = search(model, source_map[recorded["source"]], dict(beam_width=1, max_length=12))
    expected = [list(row[:length]) for row, length in zip(target_map[recorded["greedy_ids"]], recorded["greedy_lengths"])]
    assert _tokens(ids, lengths) == expected
    np.testing.assert_allclose(np.array(scores), recorded["greedy_log_probs"], atol=1e-5)


def _search(model, recorded, source_map, name):
    _, alpha, beta = (float(x) for x in recorded[f"{name}_settings"])
    settings = dict(beam_width=3, max_length=12, length_penalty=alpha, n_best=3, coverage_penalty=beta)
    ids, lengths, scores = search(model, source_map[recorded["source"]], settings, lists=True)
    return np.array(ids), np.array(lengths), np.array(scores), alpha


def _hypotheses(recorded, target_map, name):
    """OpenNMT-tf's beams as id rows ending with the end token, `(batch, beam, time)`, 0 after."""
    ids, lengths = target_map[recorded[f"{name}_ids"]], recorded[f"{name}_lengths"]
    time = np.arange(ids.shape[2] + 1)
    padded = np.concatenate([ids, np.zeros(ids.shape[:2] + (1,), ids.dtype)], axis=2)
    return np.where(time < lengths[..., None], padded, np.where(time == lengths[..., None], END_ID, 0))


def test_beam_search_without_penalties_equals_opennmt_beam_for_beam(converted):
    _, _, model, recorded, source_map, target_map = converted
    ids, lengths, scores, _ = _search(model, recorded, source_map, "beam0")
    expected = target_map[recorded["beam0_ids"]]
    for row in range(len(expected)):
        assert _tokens(ids[row], lengths[row]) == [
            list(hypothesis[:length]) for hypothesis, length in zip(expected[row], recorded["beam0_lengths"][row])
        ]
    np.testing.assert_allclose(scores, recorded["beam0_rescored_log_probs"], atol=1e-5)


@pytest.mark.parametrize("name", ["beam", "beam2"])
def test_opennmt_beams_with_penalties_have_the_same_log_probabilities_here(converted, name):
    """Length penalty 0.6, then with coverage penalty 0.4. OpenNMT-tf counts the end token in the length (and once
    more for an ended hypothesis; docs/migrating.md), so its beams may rank otherwise; their log-probabilities agree."""
    _, _, model, recorded, source_map, target_map = converted
    hypotheses = _hypotheses(recorded, target_map, name)
    ours = [np.array(score_ids(model, source_map[recorded["source"]], hypotheses[:, k])[1]) for k in range(3)]
    np.testing.assert_allclose(np.stack(ours, 1), recorded[f"{name}_rescored_log_probs"], atol=1e-5)


def test_with_a_length_penalty_the_best_is_at_least_as_good_as_opennmts_by_the_gnmt_score(converted):
    _, _, model, recorded, source_map, target_map = converted
    _, _, scores, alpha = _search(model, recorded, source_map, "beam")
    best = _hypotheses(recorded, target_map, "beam")[:, 0]
    _, _, theirs = score_ids(model, source_map[recorded["source"]], best, length_penalty=alpha)
    assert np.all(scores[:, 0] >= np.array(theirs) - 1e-5)


@pytest.mark.slow
def test_a_converted_opennmt_run_exports_and_translates_with_tensorflow_alone(tmp_path):
    """The custom model (bidirectional encoder, Bahdanau attention) through export, TensorFlow alone, seqtasks.load."""
    from pathlib import Path

    from tests.conftest import serve_in_tensorflow_only

    from seqtasks.lifecycle.runner import Runner

    folder = FIXTURES / "opennmt-bahdanau"
    run = from_opennmt(folder, folder / "source.vocab", folder / "target.vocab", tmp_path / "run", **VARIANTS["bahdanau"])
    recorded = np.load(folder / "outputs.npz")
    source_map = new_ids(run, folder / "source.vocab", "source", _specials(folder / "source.vocab"))
    model = Runner.open(run).load_model()
    result = seqtasks_command("export", run, "--set", f"export.directory={tmp_path / 'exports'}")
    export = Path(result.stdout.strip().splitlines()[-1].removeprefix("SavedModel: "))
    vocab = (run / "source_vocab.txt").read_text(encoding="utf-8").splitlines()
    # The recorded sources as text, without the out-of-vocabulary word (text cannot name it).
    sources = [" ".join(vocab[i] for i in row if i > 3) for row in source_map[recorded["source"]]]
    served = serve_in_tensorflow_only(export, {"batch": sources})["batch"]["translation"]["value"]
    runner = Runner.open(run)
    ids = runner.task.source_tokenizer.tokenize(np.array(sources)).to_tensor().numpy()
    out, _, _ = search(model, ids, dict(beam_width=1, max_length=50))
    assert served == [text.decode() for text in runner.task.target_tokenizer.detokenize(np.array(out)).numpy()]
    assert "stand aside !" in served[0].lower().replace("!", " !")
    # seqtasks.load takes the converted run folder like any run (docs/python-api.md).
    import seqtasks

    assert [result.text for result in seqtasks.load(run).translate(sources)] == served


def test_the_cli_converts_a_catalogue_model(tmp_path):
    folder = FIXTURES / "opennmt-luong"
    result = seqtasks_command(
        "convert", "opennmt", folder, "--source-vocab", folder / "source.vocab", "--target-vocab",
        folder / "target.vocab", "--model", "LuongAttention", "--output", tmp_path / "run",
    )
    assert f"Run folder: {tmp_path / 'run'}" in result.stdout
    vocab = (tmp_path / "run" / "target_vocab.txt").read_text(encoding="utf-8").splitlines()
    old = (folder / "target.vocab").read_text(encoding="utf-8").splitlines()
    assert vocab[:4] == ["[PAD]", "[UNK]", "[START]", "[END]"] and vocab[4:] == old[3:]
    result = seqtasks_command(
        "convert", "opennmt", folder, "--source-vocab", folder / "source.vocab", "--target-vocab",
        folder / "target.vocab", "--output", tmp_path / "other", expect=2,
    )
    assert result.stderr.strip() == (
        "Error: a custom OpenNMT-tf model needs its bridge: expected one of copy, zero; got None "
        "(give --model, or --bridge and --attention-layer-activation)"
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"model": "NMTBigV1"}, r"^OpenNMT-tf's NMTBigV1 cannot be converted: its bidirectional RNNEncoder runs each "
         r"direction through all 4 layers and joins them at the top; seqtasks' StackedRNN joins them at every layer$"),
        ({"model": "Transformer"}, r"^unknown OpenNMT-tf RNN model 'Transformer'; expected one of LuongAttention, "),
        ({"bridge": "copy", "attention_layer_activation": "relu"},
         r"^a custom OpenNMT-tf model needs its attention layer activation: expected one of tanh, none; got 'relu'"),
    ],
)
def test_models_without_an_equivalent_are_one_line_errors(tmp_path, kwargs, message):
    folder = FIXTURES / "opennmt-luong"
    with pytest.raises(SeqtasksError, match=message):
        from_opennmt(folder, folder / "source.vocab", folder / "target.vocab", tmp_path / "run", **kwargs)


def _convert_arrays(tmp_path, arrays, **kwargs):
    folder = FIXTURES / "opennmt-bahdanau"
    prefix = write_checkpoint(tmp_path / "ckpt", arrays)
    return from_opennmt(prefix, folder / "source.vocab", folder / "target.vocab", tmp_path / "run",
                        **{**VARIANTS["bahdanau"], **kwargs})


def test_a_deep_bidirectional_encoder_and_a_dense_bridge_are_errors_naming_them(tmp_path):
    arrays = checkpoint_arrays(FIXTURES / "opennmt-bahdanau")
    deep = dict(arrays)
    for direction in ("forward", "backward"):
        base = f"model/encoder/rnn/rnn/{direction}_layer/cell/cells"
        for name in ("kernel", "recurrent_kernel", "bias"):
            value = arrays[f"{base}/0/{name}"]
            deep[f"{base}/1/{name}"] = value if name != "kernel" else np.zeros((8, 32), "float32")
    with pytest.raises(SeqtasksError, match=r"a bidirectional RNNEncoder of 2 layers runs each direction through all "
                       r"of them and joins them at the top; .* so only one layer converts$"):
        _convert_arrays(tmp_path, deep)
    dense = {**arrays, "model/decoder/bridge/linear/kernel": np.zeros((32, 32), "float32")}
    with pytest.raises(SeqtasksError, match=r"model/decoder/bridge/linear/kernel is a DenseBridge's; seqtasks' dense "
                       r"bridge has a tanh where OpenNMT-tf's has none, so it does not convert$"):
        _convert_arrays(tmp_path, dense)
    assert not (tmp_path / "run").exists()


def test_a_zero_bridge_starts_the_decoder_from_zeros_and_the_folder_names_the_recipe(tmp_path):
    from seqtasks.recipe import load_recipe

    folder = FIXTURES / "opennmt-bahdanau"
    run = from_opennmt(folder, folder / "source.vocab", folder / "target.vocab", tmp_path / "my zero run",
                       bridge="zero", attention_layer_activation="none")
    recipe = load_recipe(run / "recipe.yaml")
    assert (recipe.model.bridge, recipe.name) == ("none", "my-zero-run")


def test_dropout_wrapped_cells_convert_like_bare_ones(tmp_path):
    # With dropout (every catalogue entry) OpenNMT-tf wraps each cell: its variables gain a `cell/` level.
    arrays = checkpoint_arrays(FIXTURES / "opennmt-bahdanau")
    wrapped = {name.replace("/cells/0/", "/cells/0/cell/"): value for name, value in arrays.items()}
    run = _convert_arrays(tmp_path, wrapped)
    from seqtasks.lifecycle.runner import Runner

    model = Runner.open(run).load_model()
    decoder_kernel = arrays["model/decoder/cell/_cell/cells/0/kernel"]
    np.testing.assert_array_equal(np.array(model.decoder_layer.rnn_layers[0].cell.kernel), decoder_kernel)
