"""Checkpoint averaging (`seqtasks average`) and ensembles (`Ensemble`, `eval`/`export --ensemble`)."""

import json

import keras
import numpy as np
import pytest
from conftest import seqtasks_command, serve_in_tensorflow_only
from trained_runs import TRANSLATION, TRANSLATION_WITHOUT_ATTENTION

from seqtasks.models import Ensemble, Seq2Seq
from seqtasks.recipe import load_recipe
from seqtasks.decoding import search
from seqtasks.text.special_ids import START_ID


def _small_model(seed, *overrides):
    recipe = load_recipe(
        "recipes/translation.yaml",
        ["model.embedding_dim=8", "model.encoder.units=8", "model.decoder.units=8", *overrides],
    )
    model = Seq2Seq.from_recipe(recipe.model, 11, 13, seed=seed)
    model((np.ones((1, 3), "int32"), np.ones((1, 2), "int32")))
    return model


def _log_softmax(x):
    x = np.asarray(x, np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


@pytest.fixture(scope="module")
def members():
    keras.utils.set_random_seed(3)
    return [_small_model(1), _small_model(2, "model.attention.type=bahdanau"), _small_model(3, "model.attention.type=none")]


def test_an_ensemble_step_is_the_mean_of_its_members_log_probabilities(members):
    ensemble = Ensemble(members)
    source = np.array([[5, 6, 7, 0], [8, 9, 0, 0]], "int32")
    ids = np.array([START_ID, 4], "int32")
    caches, states = ensemble.encode(source)
    log_probs, new_states, weights = ensemble.decode_step(ids, states, caches)
    expected, expected_weights = [], []
    for member in members:
        cache, state = member.encode(source)
        logits, member_state, member_weights = member.decode_step(ids, state, cache)
        expected.append(_log_softmax(logits))
        if member.decoder_layer.attention != "none":
            expected_weights.append(np.asarray(member_weights))
    np.testing.assert_allclose(log_probs, np.mean(expected, 0), atol=1e-5)
    np.testing.assert_allclose(weights, np.mean(expected_weights, 0), atol=1e-6)  # the attending two only
    assert len(new_states) == 3
    np.testing.assert_array_equal(ensemble.memory_mask(caches), source != 0)
    # Teacher-forced and attention maps: the same means over whole sequences.
    target = np.array([[START_ID, 4, 5], [START_ID, 6, 6]], "int32")
    np.testing.assert_allclose(
        ensemble((source, target)), np.mean([_log_softmax(m((source, target))) for m in members], 0), atol=1e-5
    )
    np.testing.assert_allclose(
        ensemble.attention(source, target), np.mean([members[0].attention(source, target),
                                                      members[1].attention(source, target)], 0), atol=1e-6
    )


def test_an_ensemble_of_identical_members_searches_as_one_of_them(members):
    source = np.array([[5, 6, 7, 0], [8, 9, 10, 3]], "int32")
    settings = dict(beam_width=3, max_length=6, length_penalty=0.6, n_best=3, coverage_penalty=0.2)
    one = search(members[0], source, settings, lists=True)
    both = search(Ensemble([members[0], members[0]]), source, settings, lists=True)
    for mine, theirs in zip(one, both):
        np.testing.assert_allclose(mine, theirs, atol=1e-5)


def test_an_ensemble_without_attention_refuses_attention_maps_and_needs_two_members(members):
    with pytest.raises(ValueError, match=r"^No member of this ensemble has attention\.$"):
        Ensemble([members[2], members[2]]).attention(np.ones((1, 2), "int32"), np.ones((1, 2), "int32"))
    assert Ensemble([members[2], members[2]]).memory_mask(Ensemble([members[2], members[2]]).encode(
        np.ones((1, 2), "int32"))[0]) is None
    with pytest.raises(ValueError, match=r"^An ensemble needs at least two members\. Received: 1$"):
        Ensemble(members[:1])


@pytest.fixture(scope="module")
def checkpointed_run(run_cache, tmp_path_factory):
    return run_cache.copy(TRANSLATION_WITHOUT_ATTENTION, tmp_path_factory.mktemp("average") / "copy")


@pytest.mark.slow
def test_average_writes_the_mean_of_the_last_kept_checkpoints(checkpointed_run):
    from seqtasks.lifecycle.runner import Runner
    from seqtasks.training.checkpoints import kept_steps

    root, run_dir, _ = checkpointed_run
    steps = kept_steps(run_dir / "checkpoints")
    assert len(steps) >= 2
    result = seqtasks_command("average", run_dir, "--last", 2)
    path = run_dir / "checkpoints" / f"average-2-to-step-{steps[-1]:08d}.weights.h5"
    assert result.output.splitlines() == [
        f"Averaged the checkpoints of steps {steps[-2]}, {steps[-1]}",
        f"Checkpoint: {path}",
    ]
    runner = Runner.open(run_dir, log=lambda line: None)
    older, newer = (runner.load_model(str(step)) for step in steps[-2:])
    averaged = runner.load_model(str(path))
    for variable, a, b in zip(averaged.weights, older.weights, newer.weights):
        np.testing.assert_allclose(variable.numpy(), (a.numpy() + b.numpy()) / 2, rtol=1e-6, atol=1e-7)
    assert any(not np.allclose(a.numpy(), b.numpy()) for a, b in zip(older.weights, newer.weights))
    # The optimizer's state is the newest checkpoint's.
    assert int(averaged.optimizer.iterations.numpy()) == int(newer.optimizer.iterations.numpy())
    evaluated = seqtasks_command("eval", run_dir, "--data", root / "pairs.tsv", "--checkpoint", path)
    assert "bleu:" in evaluated.output


@pytest.mark.slow
def test_average_refuses_what_it_cannot_average(checkpointed_run, tmp_path):
    _, run_dir, _ = checkpointed_run
    kept = len(list((run_dir / "checkpoints").glob("step-*.weights.h5")))
    for last in (1, kept + 1):
        result = seqtasks_command("average", run_dir, "--last", last, expect=2)
        assert f"Error: --last: expected 2..{kept} (the step checkpoints {run_dir / 'checkpoints'} keeps: " in result.output
        assert result.output.rstrip().endswith(f"; got {last}") and len(result.output.strip().splitlines()) == 1
    result = seqtasks_command("average", run_dir, "--last", 2, "--output", tmp_path / "mean.h5", expect=2)
    assert f"--output: expected a file name ending in .weights.h5; got '{tmp_path / 'mean.h5'}'" in result.output
    assert not (tmp_path / "mean.h5").exists()
    written = seqtasks_command("average", run_dir, "--last", 2, "--output", tmp_path / "mean.weights.h5")
    assert written.output.splitlines()[-1] == f"Checkpoint: {tmp_path / 'mean.weights.h5'}"


@pytest.fixture(scope="module")
def translation_run(run_cache):
    return run_cache.get(TRANSLATION)


@pytest.mark.slow
def test_an_ensemble_of_a_run_with_itself_evaluates_and_exports_as_the_run(run_cache, tmp_path):
    root, run_dir, _ = run_cache.copy(TRANSLATION, tmp_path / "copy")  # eval writes into the run folder
    pairs = root / "pairs.tsv"
    single = seqtasks_command("eval", run_dir, "--data", pairs, "--set", f"export.directory={tmp_path}")
    ensemble = seqtasks_command("eval", "--ensemble", run_dir, run_dir, "--data", pairs)
    assert [line for line in single.output.splitlines() if ": " in line and "bleu" in line] == [
        line for line in ensemble.output.splitlines() if ": " in line and "bleu" in line
    ]
    assert (run_dir / "eval" / "pairs" / "translations.tsv").is_file()
    exported = seqtasks_command("export", "--ensemble", run_dir, run_dir, "--set", f"export.directory={tmp_path}")
    folder = tmp_path / "tiny-ensemble" / "1"
    assert exported.output.splitlines()[-1] == f"SavedModel: {folder}"
    card = (folder / "assets.extra" / "MODEL_CARD.md").read_text()
    assert f"An ensemble of 2 runs: {run_dir.resolve()}, {run_dir.resolve()}." in card
    assert not (folder / "assets.extra" / "metrics.json").exists()  # the first run's are not the ensemble's
    sources = [line.split("\t")[0] for line in (run_dir / "translations.tsv").read_text().splitlines()[:6]]
    ours = serve_in_tensorflow_only(folder, {"validation": sources})["validation"]
    theirs = serve_in_tensorflow_only(root / "saved_models" / "tiny" / "1", {"validation": sources})["validation"]
    assert ours["translation"]["value"] == theirs["translation"]["value"]
    np.testing.assert_allclose(ours["score"]["value"], theirs["score"]["value"], atol=1e-4)


@pytest.mark.slow
def test_runs_whose_vocabularies_differ_are_a_one_line_error(translation_run, run_cache, tmp_path):
    _, run_dir, _ = translation_run
    _, other, _ = run_cache.copy(TRANSLATION, tmp_path / "other")
    lines = (other / "target_vocab.txt").read_text().splitlines()
    lines[7], lines[8] = lines[8], lines[7]
    (other / "target_vocab.txt").write_text("\n".join(lines) + "\n")
    result = seqtasks_command("export", "--ensemble", run_dir, other, "--set", f"export.directory={tmp_path}", expect=2)
    assert result.output.splitlines()[-1] == (
        f"Error: {other}: its target vocabulary differs from {run_dir}'s at entry 7 ({lines[7]!r}, not {lines[8]!r}); "
        "the runs of an ensemble must share their vocabularies"
    )
    result = seqtasks_command("export", run_dir, other, expect=2)
    assert result.output.splitlines()[-1] == "Error: expected one run (give --ensemble to decode with several together); got 2"
    result = seqtasks_command("eval", "--ensemble", run_dir, "--data", "x", expect=2)
    assert result.output.splitlines()[-1] == "Error: --ensemble: expected at least two runs; got 1"


@pytest.mark.slow
def test_the_tensorflow_export_process_rebuilds_an_ensemble_from_its_runs(translation_run, tmp_path):
    # What a JAX run's `export --ensemble` asks of its TensorFlow process (backends.export_in_tensorflow).
    from seqtasks.lifecycle.tensorflow_export import export_request
    from seqtasks.recipe import dump_recipe

    _, run_dir, _ = translation_run
    recipe = load_recipe(run_dir / "recipe.yaml", [f"export.directory={tmp_path}", "name=tiny-ensemble"])
    (tmp_path / "recipe.yaml").write_text(dump_recipe(recipe), encoding="utf-8")
    request = {"run_dir": str(run_dir), "recipe_file": str(tmp_path / "recipe.yaml"), "checkpoint": None,
               "metrics": None, "force": False, "ensemble": [str(run_dir)], "notes": ["An ensemble of 2 runs."],
               "run_metrics": False, "result": str(tmp_path / "result.json")}
    (tmp_path / "request.json").write_text(json.dumps(request), encoding="utf-8")
    export_request(tmp_path / "request.json")
    answer = json.loads((tmp_path / "result.json").read_text())
    assert answer == {"exported": str(tmp_path / "tiny-ensemble" / "1"), "error": None}
    extra = tmp_path / "tiny-ensemble" / "1" / "assets.extra"
    assert "An ensemble of 2 runs." in (extra / "MODEL_CARD.md").read_text()
    assert not (extra / "metrics.json").exists()
    sha = (extra / "weights.sha256").read_text().split()[0]
    from seqtasks.lifecycle.runner import Runner
    from seqtasks.export.saved_model import weights_sha256

    runner = Runner.open(run_dir, log=lambda line: None)
    assert sha == weights_sha256(runner.ensemble([run_dir]).weights)  # both members' weights, not one model's
