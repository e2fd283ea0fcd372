"""tfa.seq2seq models converted by `seqtasks.convert.from_tfa` compute what tfa computed (recorded by
tests/data/migration/record_tfa.py with tensorflow-addons 0.23 on TensorFlow 2.15)."""

from pathlib import Path

import numpy as np
import pytest

from seqtasks.convert import from_tfa
from seqtasks.decoding import search
from seqtasks.errors import SeqtasksError
from tests.conftest import seqtasks_command, serve_in_tensorflow_only
from tests.support.migration_support import FIXTURES, checkpoint_arrays, new_ids, write_checkpoint
from tests.support.serving_support import post_json, running_server

SPECIALS = {"<pad>": "[PAD]", "<start>": "[START]", "<end>": "[END]"}


@pytest.fixture(scope="module", params=["luong", "bahdanau"])
def converted(request, tmp_path_factory):
    """`(variant, run folder, model, recorded outputs, source id map, target id map)`."""
    from seqtasks.lifecycle.runner import Runner

    folder = FIXTURES / f"tfa-{request.param}"
    run = from_tfa(
        folder / "ckpt-1", folder / "source.vocab", folder / "target.vocab", tmp_path_factory.mktemp("tfa") / "run"
    )
    model = Runner.open(run).load_model()
    recorded = dict(np.load(folder / "outputs.npz"))
    source_map = new_ids(run, folder / "source.vocab", "source", SPECIALS)
    target_map = new_ids(run, folder / "target.vocab", "target", SPECIALS)
    return request.param, run, model, recorded, source_map, target_map


def test_the_recipe_says_what_the_checkpoint_holds(converted):
    from seqtasks.recipe import load_recipe

    variant, run, *_ = converted
    model = load_recipe(run / "recipe.yaml").model
    assert (model.embedding_dim, model.encoder.units, model.decoder.units, model.decoder.output_size) == (8, 16, 16, 16)
    assert (model.encoder.cell_type, model.decoder.cell_type, model.bridge) == ("lstm", "lstm", "copy")
    assert (model.decoder.combine, model.decoder.input_feeding, model.decoder.placement) == ("linear", True, "after")
    assert model.attention.type == variant
    # The recorded Bahdanau attention is weight-normalised; the Luong one is not scaled.
    assert model.attention.normalize == (variant == "bahdanau") and not model.attention.scale


def test_teacher_forced_logits_and_attention_equal_tfa(converted):
    _, _, model, recorded, source_map, target_map = converted
    source, target_in = source_map[recorded["source"]], target_map[recorded["target"][:, :-1]]
    logits = np.array(model((source, target_in)))
    # Every old vocabulary column, at its new place; the new [UNK] column, which tfa's model lacked, far below
    # the best (a probability under e^-25).
    np.testing.assert_allclose(logits[..., target_map], recorded["logits"], atol=1e-5, rtol=1e-5)
    assert np.all(np.delete(logits, target_map, axis=-1) < logits.max(axis=-1, keepdims=True) - 25)
    attention = np.array(model.attention(source, target_in))
    np.testing.assert_allclose(attention, recorded["attention"], atol=1e-5)


def _old_tokens(ids, lengths):
    return [list(row[:length]) for row, length in zip(np.asarray(ids), np.asarray(lengths))]


def test_greedy_ids_equal_tfa(converted):
    _, _, model, recorded, source_map, target_map = converted
    ids, lengths, _ = search(model, source_map[recorded["source"]], dict(beam_width=1, max_length=12))
    expected = _old_tokens(target_map[recorded["greedy_ids"]], recorded["greedy_lengths"])
    assert _old_tokens(ids, lengths) == expected


def _search(model, recorded, source_map, setting):
    alpha, beta = (float(x) for x in recorded[f"beam{setting}_settings"])
    settings = dict(beam_width=3, max_length=12, length_penalty=alpha, n_best=3, coverage_penalty=beta)
    ids, lengths, scores = search(model, source_map[recorded["source"]], settings, lists=True)
    return np.array(ids), np.array(lengths), np.array(scores), alpha


def test_beam_search_without_penalties_equals_tfa_beam_for_beam(converted):
    _, _, model, recorded, source_map, target_map = converted
    ids, lengths, scores, _ = _search(model, recorded, source_map, 0)
    expected = target_map[recorded["beam0_ids"]]
    for row in range(len(expected)):
        assert _old_tokens(ids[row], lengths[row]) == _old_tokens(expected[row], recorded["beam0_lengths"][row])
    # Without penalties a score is the hypothesis' log-probability, tfa's `log_probs`.
    np.testing.assert_allclose(scores, recorded["beam0_log_probs"], atol=1e-5)


@pytest.mark.parametrize("setting", [1, 2])
def test_tfa_beams_with_penalties_have_the_same_log_probabilities_here(converted, setting):
    """Length penalty 0.6, then with coverage penalty 0.4. tfa ranks ended hypotheses by other lengths than seqtasks
    (docs/migrating.md), so the beams may come in another order; each of tfa's has the same log-probability here."""
    from seqtasks.decoding import score_ids

    _, _, model, recorded, source_map, target_map = converted
    expected = target_map[recorded[f"beam{setting}_ids"]]
    lengths = recorded[f"beam{setting}_lengths"]
    ours = []
    for beam in range(expected.shape[1]):
        rows = np.where(np.arange(expected.shape[2]) < lengths[:, beam, None], expected[:, beam], 0)
        ours.append(np.array(score_ids(model, source_map[recorded["source"]], rows)[1]))
    # tfa's final `log_probs` are not always in the order of its gathered ids: compared as each row's set.
    np.testing.assert_allclose(
        np.sort(np.stack(ours, 1), axis=1), np.sort(recorded[f"beam{setting}_log_probs"], axis=1), atol=1e-5
    )


def test_with_a_length_penalty_the_best_hypothesis_is_at_least_as_good_as_tfas_by_the_gnmt_score(converted):
    from seqtasks.decoding import score_ids

    _, _, model, recorded, source_map, target_map = converted
    ids, lengths, scores, alpha = _search(model, recorded, source_map, 1)
    best = target_map[recorded["beam1_ids"][:, 0]]
    best = np.where(np.arange(best.shape[1]) < recorded["beam1_lengths"][:, 0, None], best, 0)
    _, _, theirs = score_ids(model, source_map[recorded["source"]], best, length_penalty=alpha)
    assert np.all(scores[:, 0] >= np.array(theirs) - 1e-5)
    same = [_old_tokens(ids[row, :1], lengths[row, :1])[0] == list(best[row][best[row] > 0]) for row in range(len(best))]
    # Where the two differ, this search's choice scores strictly better.
    assert all(s or scores[row, 0] > float(np.array(theirs)[row]) + 1e-4 for row, s in enumerate(same))


def test_the_crf_equals_tfa_text_crf():
    from seqtasks.layers import CRF

    recorded = np.load(FIXTURES / "tfa-crf.npz")
    potentials, lengths = recorded["potentials"], recorded["lengths"]
    crf = CRF(num_tags=potentials.shape[-1])
    crf.build(potentials.shape)
    # tfa's CRF has no start and end scores: seqtasks' stay 0.
    crf.transitions.assign(recorded["transitions"])
    mask = np.arange(potentials.shape[1])[None, :] < lengths[:, None]
    tags, score = crf(potentials, mask=mask)
    np.testing.assert_array_equal(np.array(tags) * mask, recorded["decoded"] * mask)
    np.testing.assert_allclose(np.array(score), recorded["best_score"], atol=1e-5)
    likelihood = crf.log_likelihood(potentials, recorded["tags"] * mask, mask=mask)
    np.testing.assert_allclose(np.array(likelihood), recorded["log_likelihood"], atol=1e-5)


def _words(run, side, ids):
    vocab = (run / f"{side}_vocab.txt").read_text(encoding="utf-8").splitlines()
    return " ".join(vocab[i] for i in ids)


@pytest.mark.slow
def test_a_converted_run_evaluates_exports_and_serves_with_tensorflow_alone(tmp_path):
    import json

    from seqtasks.lifecycle.runner import Runner

    folder = FIXTURES / "tfa-luong"
    recorded = np.load(folder / "outputs.npz")
    run = tmp_path / "run"
    seqtasks_command("convert", "tfa", folder / "ckpt-1", "--source-vocab", folder / "source.vocab",
                     "--target-vocab", folder / "target.vocab", "--output", run)
    source_map = new_ids(run, folder / "source.vocab", "source", SPECIALS)
    target_map = new_ids(run, folder / "target.vocab", "target", SPECIALS)
    sources = [_words(run, "source", source_map[row][1:-1]) for row in recorded["source"]]
    targets = [_words(run, "target", target_map[row][1:-1]) for row in recorded["target"]]
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{t}\t{s}\n" for s, t in zip(sources, targets)), encoding="utf-8")

    seqtasks_command("eval", run, "--data", pairs)
    (metrics_path,) = (run / "eval").glob("*/metrics.json")
    assert json.loads(metrics_path.read_text())["validation"]["bleu"] >= 0
    lines = (metrics_path.parent / "translations.tsv").read_text(encoding="utf-8").splitlines()
    assert [line.split("\t")[0] for line in lines] == sources
    result = seqtasks_command("export", run, "--set", f"export.directory={tmp_path / 'exports'}")
    export = Path(result.stdout.strip().splitlines()[-1].removeprefix("SavedModel: "))
    served = serve_in_tensorflow_only(export, {"batch": sources})["batch"]["translation"]["value"]
    assert served == [line.split("\t")[1] for line in lines]
    # The export tokenizes the text itself; the Keras model, given those ids, translates the same.
    runner = Runner.open(run)
    ids = runner.task.source_tokenizer.tokenize(np.array(sources)).to_tensor().numpy()
    out, _, _ = search(runner.load_model(), ids, dict(beam_width=1, max_length=50))
    assert served == [text.decode() for text in runner.task.target_tokenizer.detokenize(np.array(out)).numpy()]
    assert all(served)
    # `seqtasks serve` on the run folder answers TensorFlow Serving's REST API with the same translations.
    with running_server(f"tutorial={run}") as url:
        status, answer = post_json(url + "/v1/models/tutorial:predict", {"instances": sources})
    assert status == 200 and [p["translation"] for p in answer["predictions"]] == served


def test_the_cli_converts_and_refuses_an_existing_folder(tmp_path):
    folder = FIXTURES / "tfa-bahdanau"
    args = ["convert", "tfa", folder / "ckpt-1", "--source-vocab", folder / "source.vocab",
            "--target-vocab", folder / "target.vocab", "--output", tmp_path / "run"]
    result = seqtasks_command(*args)
    assert f"Run folder: {tmp_path / 'run'}" in result.stdout
    assert (tmp_path / "run" / "model" / "model.keras").is_file()
    result = seqtasks_command(*args, expect=2)
    assert result.stderr.strip() == f"Error: {tmp_path / 'run'}: already exists; give a new folder for the converted run"
    result = seqtasks_command(*args[:-1], tmp_path / "other", "--name", "output_layer", expect=2)
    assert result.stderr.strip() == "Error: --name 'output_layer': expected ROLE=VARIABLE"


def _convert(tmp_path, arrays, **kwargs):
    folder = FIXTURES / "tfa-luong"
    prefix = write_checkpoint(tmp_path / "ckpt", arrays)
    return from_tfa(prefix, folder / "source.vocab", folder / "target.vocab", tmp_path / "run", **kwargs)


def test_an_unknown_variable_is_an_error_naming_it(tmp_path):
    arrays = checkpoint_arrays(FIXTURES / "tfa-luong" / "ckpt-1")
    arrays["decoder/extra_dense/kernel"] = np.zeros((16, 3), "float32")
    with pytest.raises(SeqtasksError, match=r"1 variable\(s\) that a tfa.seq2seq AttentionWrapper encoder-decoder "
                       r"does not have: decoder/extra_dense/kernel \(16, 3\)$"):
        _convert(tmp_path, arrays)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: a.pop("decoder/fc/bias"), r"no variable 'decoder/fc/bias' \(the Dense over the vocabulary"),
        (lambda a: a.update({"decoder/fc/bias": np.zeros(445, "float32")}),
         r"variable 'decoder/fc/bias' \(the Dense over the vocabulary.*\) has shape \(445,\); expected \(444,\)$"),
        (lambda a: a.update({"encoder/embedding/embeddings": np.zeros((500, 8), "float32")}),
         r"the source embedding has shape \(500, 8\); expected one row per id of the source vocabulary"),
        (lambda a: a.update({"decoder/decoder_rnn_cell/kernel": np.zeros((8, 64), "float32")}),
         r"the first decoder cell decoder/decoder_rnn_cell reads 8 features; AttentionWrapper's default "
         r"cell_input_fn gives it the embedding and the attention \(8 \+ 16\)$"),
        (lambda a: a.update({"encoder/lstm_layer/cell/recurrent_kernel": np.zeros((16, 40), "float32")}),
         r"recurrent_kernel has shape \(16, 40\); expected an LSTM's"),
    ],
)
def test_a_missing_or_mismatched_variable_is_a_one_line_error(tmp_path, change, message):
    arrays = checkpoint_arrays(FIXTURES / "tfa-luong" / "ckpt-1")
    change(arrays)
    with pytest.raises(SeqtasksError, match=message) as error:
        _convert(tmp_path, arrays)
    assert "\n" not in str(error.value)
    assert not (tmp_path / "run").exists()


def test_other_variable_names_are_given_by_role(tmp_path):
    arrays = checkpoint_arrays(FIXTURES / "tfa-luong" / "ckpt-1")
    arrays = {name.replace("decoder/fc/", "decoder/projection/"): value for name, value in arrays.items()}
    with pytest.raises(SeqtasksError, match="no variable 'decoder/fc/kernel'"):
        _convert(tmp_path, arrays)
    run = _convert(tmp_path, arrays, names={"output_layer": "decoder/projection"})
    assert (run / "model" / "model.keras").is_file()
    with pytest.raises(SeqtasksError, match=r"unknown variable role\(s\) output; expected one of source_embedding"):
        _convert(tmp_path, arrays, names={"output": "decoder/projection"})


def test_a_vocabulary_without_the_end_token_names_it(tmp_path):
    folder = FIXTURES / "tfa-luong"
    with pytest.raises(SeqtasksError, match=r"target.vocab: no '</s>' in the target vocabulary \(the token for \[END\]\)"):
        from_tfa(folder / "ckpt-1", folder / "source.vocab", folder / "target.vocab", tmp_path / "run", end_token="</s>")


def test_what_is_not_a_checkpoint_or_a_vocabulary_is_a_one_line_error(tmp_path):
    folder = FIXTURES / "tfa-luong"
    with pytest.raises(SeqtasksError, match=r"nothing: not a TensorFlow checkpoint \(") as error:
        from_tfa(tmp_path / "nothing", folder / "source.vocab", folder / "target.vocab", tmp_path / "run")
    assert "\n" not in str(error.value)
    vocab = tmp_path / "target.vocab"
    lines = (folder / "target.vocab").read_text(encoding="utf-8").splitlines()
    vocab.write_text("\n".join(lines[:5] + ["two words"] + lines[6:]) + "\n", encoding="utf-8")
    with pytest.raises(SeqtasksError, match=r"target.vocab, line 6: expected one token \(no spaces, not empty\); "
                       r"got 'two words'$"):
        from_tfa(folder / "ckpt-1", folder / "source.vocab", vocab, tmp_path / "run")
    vocab.write_text("\n".join(lines[:5] + [lines[2]] + lines[6:]) + "\n", encoding="utf-8")
    with pytest.raises(SeqtasksError, match=rf"target.vocab, line 6: '{lines[2]}' again \(line 3\); expected each token once$"):
        from_tfa(folder / "ckpt-1", folder / "source.vocab", vocab, tmp_path / "run")
    vocab.write_text("\n".join(lines[:5] + ["[END]"] + lines[6:]) + "\n", encoding="utf-8")
    with pytest.raises(SeqtasksError, match=r"target.vocab: holds '\[END\]', a token seqtasks reserves for itself$"):
        from_tfa(folder / "ckpt-1", folder / "source.vocab", vocab, tmp_path / "run")
    with pytest.raises(SeqtasksError, match=r"missing.vocab: no such source vocabulary$"):
        from_tfa(folder / "ckpt-1", tmp_path / "missing.vocab", folder / "target.vocab", tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_converted_tutorial_model_keeps_accents_the_tutorial_stripped(converted):
    # docs/migrating.md: the export case-folds but keeps accents, so "dónde" is not the tutorial's "donde".
    from seqtasks.lifecycle.runner import Runner

    _, run, *_ = converted
    tokenizer = Runner.open(run).task.source_tokenizer
    vocab = tokenizer.vocab
    ids = tokenizer.tokenize(np.array(["¿Dónde está Tom?", "¿donde esta tom?"])).to_list()
    assert [vocab[i] for i in ids[1]] == ["¿", "donde", "esta", "tom", "?"]
    assert [vocab[i] for i in ids[0]] == ["¿", "[UNK]", "[UNK]", "tom", "?"]


def test_an_unknown_token_of_the_old_vocabulary_becomes_unk(tmp_path):
    from seqtasks.lifecycle.runner import Runner

    folder = FIXTURES / "tfa-luong"
    old = (folder / "target.vocab").read_text(encoding="utf-8").splitlines()
    run = from_tfa(folder / "ckpt-1", folder / "source.vocab", folder / "target.vocab", tmp_path / "run",
                   unk_token=old[5])
    new = (run / "target_vocab.txt").read_text(encoding="utf-8").splitlines()
    assert new[:4] == ["[PAD]", "[UNK]", "[START]", "[END]"] and old[5] not in new and len(new) == len(old)
    matrix = checkpoint_arrays(folder / "ckpt-1")["decoder/embedding/embeddings"]
    model = Runner.open(run).load_model()
    np.testing.assert_array_equal(np.array(model.target_embedding.embeddings)[1], matrix[5])


def test_gru_cells_are_read_by_their_three_gates(tmp_path):
    # Only LSTMs were recorded: a GRU's variables (3 gates, Keras' two biases) are checked for their place here.
    from seqtasks.lifecycle.runner import Runner
    from seqtasks.recipe import load_recipe

    rng = np.random.default_rng(5)
    arrays = checkpoint_arrays(FIXTURES / "tfa-luong" / "ckpt-1")
    gru = {}
    for prefix, inputs in (("encoder/lstm_layer/cell", 8), ("decoder/decoder_rnn_cell", 24)):
        gru[prefix] = {
            "kernel": rng.normal(size=(inputs, 48)).astype("float32"),
            "recurrent_kernel": rng.normal(size=(16, 48)).astype("float32"),
            "bias": rng.normal(size=(2, 48)).astype("float32"),
        }
        arrays.update({f"{prefix}/{name}": value for name, value in gru[prefix].items()})
    run = _convert(tmp_path, arrays)
    model_config = load_recipe(run / "recipe.yaml").model
    assert (model_config.encoder.cell_type, model_config.decoder.cell_type) == ("gru", "gru")
    model = Runner.open(run).load_model()
    for layer, prefix in ((model.encoder_layer.rnn_layers[0], "encoder/lstm_layer/cell"),
                          (model.decoder_layer.rnn_layers[0], "decoder/decoder_rnn_cell")):
        for name, value in gru[prefix].items():
            np.testing.assert_array_equal(np.array(getattr(layer.cell, name)), value)
