"""Scoring given outputs (forced decoding): `score_ids`, the `score` signature, `SeqtasksModel.score`, `seqtasks score`."""

import keras
import numpy as np
import pytest
from conftest import seqtasks_command
from serving_support import tiny_translation_export

import seqtasks
from seqtasks.errors import SeqtasksError
from seqtasks.models import Ensemble, Seq2Seq
from seqtasks.recipe import load_recipe
from seqtasks.decoding import score_ids, search


def _model(seed, attention="luong"):
    recipe = load_recipe("recipes/translation.yaml", [
        "model.embedding_dim=8", "model.encoder.units=8", "model.decoder.units=8",
        f"model.attention.type={attention}", "model.decoder.input_feeding=true",
    ])
    keras.utils.set_random_seed(seed)
    model = Seq2Seq.from_recipe(recipe.model, 11, 9, seed=seed)
    model((np.ones((1, 3), "int32"), np.ones((1, 2), "int32")))
    # A trained model never writes PAD_ID (no target holds it); this untrained one must not either.
    bias = np.array(model.output_dense.bias)
    bias[0] = -30.0
    model.output_dense.bias.assign(bias)
    return model


SOURCE = np.array([[5, 6, 7, 0], [8, 9, 10, 3], [4, 0, 0, 0]], "int32")


@pytest.mark.parametrize("attention", ["luong", "none"])
def test_the_searches_scores_are_the_scored_values_of_their_outputs(attention):
    model = _model(1, attention)
    for settings, lists in ((dict(beam_width=3, n_best=3), True), (dict(beam_width=1), False),
                            (dict(beam_width=1, n_best=2, num_samples=2, temperature=1.3, top_k=0, top_p=1.0, seed=5),
                             True)):
        ids, lengths, scores = search(model, SOURCE, {**settings, "max_length": 7, "length_penalty": 0.6}, lists=lists)
        ids, lengths, scores = (np.asarray(x) for x in (ids, lengths, scores))
        if ids.ndim == 2:
            ids, lengths, scores = ids[:, None], lengths[:, None], scores[:, None]
        for k in range(ids.shape[1]):
            tokens, total, normalised = (np.asarray(x) for x in score_ids(model, SOURCE, ids[:, k], 0.6))
            np.testing.assert_allclose(normalised, scores[:, k], atol=1e-4, err_msg=str(settings))
            np.testing.assert_allclose(total, tokens.sum(1), atol=1e-6)
            assert ((tokens != 0) == (np.arange(ids.shape[2]) < lengths[:, k, None])).all()


def test_scored_values_are_the_teacher_forced_log_probabilities_and_an_ensemble_scores_as_it_searches():
    model, other = _model(1), _model(2)
    target = np.array([[4, 5, 3, 0], [6, 3, 0, 0], [3, 0, 0, 0]], "int32")  # END_ID 3 closes each
    inputs = np.concatenate([np.full((3, 1), 2, "int32"), target[:, :-1]], axis=1)  # START_ID 2
    logits = np.asarray(model((SOURCE, inputs)), np.float64)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = np.where(target != 0, np.take_along_axis(log_probs, target[..., None], -1)[..., 0], 0.0)
    tokens, total, normalised = (np.asarray(x) for x in score_ids(model, SOURCE, target, 0.6))
    np.testing.assert_allclose(tokens, expected, atol=1e-5)
    lengths = np.array([2, 1, 0])  # without the end token
    np.testing.assert_allclose(normalised, expected.sum(1) / (((5 + lengths) / 6) ** 0.6), atol=1e-5)
    ensemble = Ensemble([model, other])
    settings = dict(beam_width=3, max_length=6, length_penalty=0.6, n_best=2)
    ids, _, scores = search(ensemble, SOURCE, settings, lists=True)
    for k in range(2):
        np.testing.assert_allclose(score_ids(ensemble, SOURCE, np.asarray(ids)[:, k], 0.6)[2], np.asarray(scores)[:, k],
                                   atol=1e-4)


@pytest.fixture(scope="module")
def export(run_cache):
    return tiny_translation_export(run_cache)


@pytest.mark.slow
def test_an_export_scores_its_own_translations_as_it_scored_them(export):
    path, sources = export
    model = seqtasks.load(path)
    maps = model.attention(sources)
    scored = model.score(sources, [row["translation"] for row in maps])
    same = [(row, result) for row, result in zip(maps, scored) if result.tokens == row["target_tokens"]]
    assert len(same) >= len(sources) - 1  # a text re-tokenized may (rarely) split otherwise than it was written
    for row, result in same:
        assert result.score == pytest.approx(row["score"], abs=1e-4)
        assert result.log_prob == pytest.approx(sum(result.token_log_probs), abs=1e-5)
        assert result.tokens[-1] == "[END]" and all(p <= 0 for p in result.token_log_probs)
    # A worse target scores lower than the model's own best.
    worse = model.score(sources[0], maps[0]["translation"] + " " + maps[0]["translation"])
    assert worse.log_prob < scored[0].log_prob
    with pytest.raises(SeqtasksError, match=r"^targets: expected one per input \(2\); got 1$"):
        model.score(sources[:2], ["x"])


@pytest.mark.slow
def test_the_score_command_prints_a_line_per_pair_and_names_a_bad_line(export, tmp_path):
    path, sources = export
    model = seqtasks.load(path)
    targets = ["I am hungry.", ""]
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{s}\t{t}\n" for s, t in zip(sources, targets)), encoding="utf-8")
    result = seqtasks_command("score", path, "--input", pairs)
    expected = model.score(sources[:2], targets)
    assert result.stdout.splitlines() == [f"{r.score:.4f}\t{r.log_prob:.4f}\t{t}" for r, t in zip(expected, targets)]
    as_json = seqtasks_command("score", path, "--input", pairs, "--json").stdout.splitlines()
    assert '"tokens": ["[END]"]' in as_json[1]
    pairs.write_text(f"{sources[0]}\tfine\nno tab here\n", encoding="utf-8")
    result = seqtasks_command("score", path, "--input", pairs, expect=2)
    assert result.output.strip().splitlines()[-1] == (
        f"Error: {pairs}, line 2: expected an input and a target separated by a tab; got 1 field(s)"
    )


def _prefix(ids, k):
    """The first k ids of each row, PAD after (k 0: none)."""
    out = np.zeros((ids.shape[0], max(k, 1)), "int32")
    out[:, :k] = ids[:, :k]
    return out


def test_a_prefix_of_the_greedy_output_gives_the_same_output_scored_without_it():
    model = _model(1)
    ids, lengths, scores = (np.asarray(x) for x in search(model, SOURCE, dict(beam_width=1, max_length=7)))
    tokens = np.asarray(score_ids(model, SOURCE, ids, 0.0)[0])
    for k in (0, 1, 2):
        forced_ids, forced_lengths, forced_scores = (
            np.asarray(x) for x in search(model, SOURCE, dict(beam_width=1, max_length=7), prefix=_prefix(ids, k))
        )
        np.testing.assert_array_equal(forced_ids, ids)
        np.testing.assert_array_equal(forced_lengths, lengths)
        np.testing.assert_allclose(forced_scores, scores - tokens[:, :k].sum(1), atol=1e-5)


def test_a_prefix_of_a_sample_gives_the_same_sample_and_any_prefix_is_written_first():
    model = _model(2)
    sampling = dict(beam_width=1, max_length=6, n_best=3, num_samples=3, temperature=1.5, top_k=0, top_p=1.0, seed=11)
    ids, _, _ = (np.asarray(x) for x in search(model, SOURCE, sampling, lists=True))
    # Samples come back best first: force the first two tokens of the best one and it comes back, unchanged.
    again = np.asarray(search(model, SOURCE, sampling, prefix=_prefix(ids[:, 0], 2), lists=True)[0])
    assert any((again[:, k] == ids[:, 0]).all() for k in range(3))
    # An unlikely prefix (tokens 7 then 8 on every row, padding on the last) starts every hypothesis.
    prefix = np.array([[7, 8], [7, 8], [7, 0]], "int32")
    for settings, lists in ((dict(beam_width=3, n_best=3, coverage_penalty=0.3, no_repeat_ngram_size=2), True),
                            (dict(beam_width=1), False), (dict(beam_width=1, n_best=2, num_samples=2), True)):
        out = np.asarray(search(model, SOURCE, {**settings, "max_length": 6}, prefix=prefix, lists=lists)[0])
        out = out if out.ndim == 3 else out[:, None]
        assert (out[:2, :, :2] == [7, 8]).all() and (out[2, :, 0] == 7).all(), settings
