"""The translation task end to end on a tiny slice of the shipped sample.

Translation over SentencePiece subwords: cased, detokenized, no [UNK], served by TensorFlow alone.
"""

import json
import unicodedata

import pytest

from seqtasks.export.serving_limits import MAX_SENTENCES, text_character_limit
from seqtasks.recipe import load_recipe
from seqtasks.text.clauses import split_long
from seqtasks.text.sentences import split_sentences
from tests.conftest import check_eval_export_predict, seqtasks_command, serve_in_tensorflow_only, write_sample_pairs
from tests.support.trained_runs import (
    SENTENCEPIECE_TRANSLATION,
    TRANSLATION,
    TRANSLATION_RECIPE,
    TRANSLATION_WITHOUT_ATTENTION,
)


@pytest.fixture(scope="module")
def translation_run(run_cache):
    """The tiny translation run (`trained_runs.TRANSLATION`), shared: tests that write into it take a copy."""
    return run_cache.get(TRANSLATION)


@pytest.mark.slow
def test_run_prints_and_records_bleu_chrf_and_speeds(translation_run):
    _, run_dir, output = translation_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert 0.0 <= metrics["validation"]["bleu"] <= 100.0
    assert 0.0 < metrics["validation"]["chrf"] <= 100.0  # some right characters, even this tiny
    assert metrics["sacrebleu_signatures"]["bleu"].startswith("nrefs:1|")
    assert metrics["train_target_tokens_per_second"] > 0
    assert metrics["decoding"] == {"beam_width": 3, "length_penalty": 0.6}
    assert "validation bleu:" in output and "Sample translations" in output


@pytest.mark.slow
def test_run_folder_holds_vocabularies_heatmaps_and_translations(translation_run):
    root, run_dir, _ = translation_run
    assert (run_dir / "source_vocab.txt").read_text().splitlines()[:4] == ["[PAD]", "[UNK]", "[START]", "[END]"]
    heatmaps = sorted((run_dir / "attention").glob("*.png"))
    assert len(heatmaps) == 3
    assert all(path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for path in heatmaps)
    rows = [line.split("\t") for line in (run_dir / "translations.tsv").read_text().splitlines()]
    assert len(rows) >= 40 and all(len(row) == 3 for row in rows)
    assert sum(bool(row[1]) for row in rows) > len(rows) // 2  # mostly non-empty outputs
    # The recipe's relative data path was resolved against the recipe's folder.
    assert load_recipe(run_dir / "recipe.yaml").data.path == str(root / "pairs.tsv")


@pytest.mark.slow
def test_saved_model_serves_like_the_run_decoded(translation_run):
    root, run_dir, _ = translation_run
    rows = [line.split("\t") for line in (run_dir / "translations.tsv").read_text().splitlines()[:5]]
    out = serve_in_tensorflow_only(
        root / "saved_models" / "tiny" / "1",
        {
            "validation": [row[0] for row in rows],
            "edge": ["", "a" * 2000, "¿Qué tal? Ünïcödé 漢字 🙂", "\x00\x07 tab\tnewline\n"],
            "one": ["Hola."],
            "none": [],
            "thousand": [row[0] for row in rows] * 200,
            "blank": ["", "   ", "\t\n"],
            # Cut to the characters read for data.max_length 20: the first reads "Hola." only.
            "long": [" " * (text_character_limit(20) - 5) + "Hola. Buenos días a todos.", "Hola.", "Hola. Buenos días a todos."],
        },
    )
    for name, size in (("validation", 5), ("edge", 4), ("one", 1), ("none", 0), ("thousand", 1000), ("blank", 3)):
        assert out[name]["translation"]["shape"] == [size] and out[name]["score"]["shape"] == [size]
        assert out[name]["translation"]["dtype"] == "string" and out[name]["score"]["dtype"] == "float32"
    assert out["validation"]["translation"]["value"] == [row[1] for row in rows]
    assert out["thousand"]["translation"]["value"] == [row[1] for row in rows] * 200
    # Nothing to translate: an empty translation, certain (log-probability 0).
    assert out["blank"]["translation"]["value"] == ["", "", ""] and out["blank"]["score"]["value"] == [0.0, 0.0, 0.0]
    assert out["edge"]["translation"]["value"][0] == "" and out["edge"]["score"]["value"][0] == 0.0
    long = out["long"]
    assert long["translation"]["value"][0] == long["translation"]["value"][1]
    assert long["score"]["value"][0] == long["score"]["value"][1] != long["score"]["value"][2]


@pytest.mark.slow
def test_evaluating_the_run_folder_again_reproduces_its_scores(translation_run, tmp_path):
    from seqtasks.lifecycle.runner import Runner

    _, run_dir, _ = translation_run.copy_to(tmp_path / "copy")  # evaluating rewrites the run's outputs
    recorded = json.loads((run_dir / "metrics.json").read_text())
    again = Runner.open(run_dir).evaluate()
    assert again["validation"] == recorded["validation"]
    greedy = Runner.open(run_dir, ["model.decoding.beam_width=1"]).evaluate()
    assert greedy["decoding"]["beam_width"] == 1
    assert "export" not in greedy


@pytest.mark.slow
def test_eval_export_and_predict_commands(translation_run, tmp_path):
    from seqtasks.tasks import make_task

    root, run_dir, _ = translation_run.copy_to(tmp_path / "copy")  # eval writes into the run folder
    recipe = load_recipe(run_dir / "recipe.yaml")
    _, validation = make_task(recipe).read_splits()
    # The validation pairs in the recipe's column layout: evaluating them gives the run's scores.
    data = tmp_path / "validation.tsv"
    data.write_text("".join(f"{target}\t{source}\n" for source, target in validation), encoding="utf-8")
    assert (recipe.data.target_column, recipe.data.source_column) == (0, 1)
    recorded = json.loads((run_dir / "metrics.json").read_text())["validation"]

    def examples(folder):
        rows = [line.split("\t") for line in (folder / "translations.tsv").read_text().splitlines()[:5]]
        # Blank lines are inputs too: each gets an empty line.
        return [row[0] for row in rows] + ["", "   "], [row[1] for row in rows] + ["", ""]

    check_eval_export_predict(run_dir, data, examples, tmp_path / "exports", recorded)
    assert len((run_dir / "eval" / "validation" / "translations.tsv").read_text().splitlines()) == len(validation)
    # A recipe names its newest finished run; --set changes the decoding for this evaluation only.
    result = seqtasks_command(
        "eval", root / "tiny.yaml", "--output-dir", root / "runs", "--data", data, "--set", "model.decoding.beam_width=1"
    )
    assert f"Run folder: {run_dir}" in result.stdout
    greedy = json.loads((run_dir / "eval" / "validation" / "metrics.json").read_text())
    assert greedy["decoding"]["beam_width"] == 1 and "bleu" in greedy["validation"]
    assert load_recipe(run_dir / "recipe.yaml").model.decoding.beam_width == 3


@pytest.mark.slow
def test_the_python_api_translates_from_the_export_and_the_run_folder_with_attention(translation_run):
    import numpy as np

    import seqtasks
    from seqtasks.errors import SeqtasksError

    root, run_dir, _ = translation_run
    sources = [line.split("\t")[0] for line in (run_dir / "translations.tsv").read_text().splitlines()[:3]]
    exported = seqtasks.load(root / "saved_models" / "tiny")  # the base path: its newest version
    assert exported.task == "translation" and exported.path == root / "saved_models" / "tiny" / "1"
    results = exported.translate(sources + [""])
    assert all(isinstance(result.score, float) for result in results)
    assert results[-1].text == "" and results[-1].score == 0.0 and all(result.text for result in results[:-1])
    assert [row["translation"] for row in exported.predict(sources + [""])] == [result.text for result in results]
    assert len(exported.translate(sources, batch_size=2)) == 3
    assert isinstance(exported.translate(sources[0]), type(results[0]))  # one text in, one result out
    from_export = exported.translate(sources + ["   "], attention=True)  # the export's `attention` signature
    with pytest.raises(SeqtasksError, match=r"a translation model has no tag\(\); use predict\(\)"):
        exported.tag(sources)

    # The run folder's own model, in this process, translates as its export does.
    trained = seqtasks.load(run_dir)
    with_attention = trained.translate(sources + ["   "], attention=True)
    assert [result.text for result in with_attention] == [result.text for result in results]
    for result in with_attention[:-1]:
        weights = result.attention
        assert weights.shape == (len(result.target_tokens), len(result.source_tokens)) and weights.shape[0] > 0
        assert np.allclose(weights.sum(axis=1), 1.0, atol=1e-5)
    assert with_attention[-1].attention.shape == (0, 0) and with_attention[-1].source_tokens == []
    for mine, theirs in zip(from_export, with_attention):
        assert (mine.text, mine.source_tokens, mine.target_tokens) == (theirs.text, theirs.source_tokens, theirs.target_tokens)
        assert np.allclose(mine.attention, theirs.attention, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("module", ["tutorial_attention", "tutorial_bahdanau"])
def test_benchmark_baselines_train_and_decode_from_a_run_folder(translation_run, tmp_path, fresh_python, module):
    """The suite's tutorial baselines, for two seconds on the tiny run: their records have every figure."""
    _, run_dir, _ = translation_run
    out = tmp_path / "baseline.json"
    result = fresh_python(
        f"from benchmarks.baselines.{module} import main\nmain({str(run_dir)!r}, 2.0, {str(out)!r})"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(out.read_text())
    assert record["first_step_seconds"] > 0 and record["train_target_tokens_per_second"] > 0
    assert 0.0 <= record["bleu_greedy"] <= 100.0 and record["greedy_sentences_per_second"] > 0
    assert record["parameters"] > 0


@pytest.mark.slow
def test_the_run_scores_each_source_length_bucket_and_counts_them(translation_run):
    _, run_dir, output = translation_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    by_length = metrics["by_length"]
    assert by_length["unit"] == "source words" and by_length["edges"] == [5, 10, 15, 20, 30]
    assert [entry["bucket"] for entry in by_length["buckets"]] == ["1-5", "6-10", "11-15", "16-20", "21-30", "31+"]
    sources = [line.split("\t")[0] for line in (run_dir / "translations.tsv").read_text().splitlines()]
    counts = [sum(lo <= len(s.split()) <= hi for s in sources) for lo, hi in [(0, 5), (6, 10), (11, 15), (16, 20), (21, 30), (31, 999)]]
    assert [entry["count"] for entry in by_length["buckets"]] == counts
    for entry in by_length["buckets"]:
        assert ("bleu" in entry and "chrf" in entry) == (entry["count"] > 0)
    assert "By source length (source words):" in output


@pytest.mark.slow
def test_a_model_without_attention_trains_decodes_and_serves_but_draws_no_heatmaps(run_cache):
    import seqtasks
    from seqtasks.errors import SeqtasksError

    root, run_dir, output = run_cache.get(TRANSLATION_WITHOUT_ATTENTION)  # two epochs, two best translations
    assert "Attention heatmaps: none drawn, this model has no attention" in output
    assert not (run_dir / "attention").exists()
    assert sum(entry["count"] for entry in json.loads((run_dir / "metrics.json").read_text())["by_length"]["buckets"]) == 40
    rows = [line.split("\t") for line in (run_dir / "translations.tsv").read_text().splitlines()[:6]]
    served = serve_in_tensorflow_only(root / "saved_models" / "tiny" / "1", {"rows": [row[0] for row in rows]})["rows"]
    assert served["translation"]["value"] == [row[1] for row in rows]
    assert served["translations"]["shape"] == [6, 2]
    assert all(a >= b for a, b in served["scores"]["value"])
    with pytest.raises(SeqtasksError, match="this translation model has no attention weights to show"):
        seqtasks.load(run_dir).translate(rows[0][0], attention=True)


@pytest.mark.slow  # reads the 116,658 shipped pairs: not tiny data
def test_the_split_seed_fixes_the_validation_split_whatever_the_recipe_seed():
    from seqtasks.tasks import make_task

    def validation(*overrides):
        return make_task(load_recipe("recipes/translation.yaml", overrides)).read_splits()[1]

    assert validation("seed=1", "data.split_seed=7") == validation("seed=7")
    assert validation("seed=1", "data.split_seed=7") != validation("seed=1")
    assert validation("seed=3", "data.split_seed=null") == validation("seed=3")


# The tiny translation recipe's overrides for SentencePiece (`trained_runs.SENTENCEPIECE_TRANSLATION`).
SENTENCEPIECE = list(SENTENCEPIECE_TRANSLATION.overrides)


@pytest.fixture(scope="module")
def sentencepiece_run(run_cache):
    return run_cache.get(SENTENCEPIECE_TRANSLATION)


@pytest.mark.slow
def test_a_model_for_each_side_is_kept_in_the_run_folder(sentencepiece_run):
    _, run_dir, output = sentencepiece_run
    source, target = (run_dir / "source.spm.model").read_bytes(), (run_dir / "target.spm.model").read_bytes()
    assert source != target and min(len(source), len(target)) > 1000
    assert not (run_dir / "source_vocab.txt").exists()
    assert "Vocabularies: 500 source, 400 target sentencepiece subwords" in output


@pytest.mark.slow
def test_a_shared_vocabulary_is_one_model_learned_from_both_sides(tmp_path):
    from seqtasks.tasks import make_task

    write_sample_pairs(tmp_path / "pairs.tsv", 300)
    (tmp_path / "tiny.yaml").write_text(TRANSLATION_RECIPE)
    recipe = load_recipe(tmp_path / "tiny.yaml", SENTENCEPIECE + ["data.shared_vocabulary=true"])
    task = make_task(recipe)
    train, validation = task.read_splits()
    task.prepare(train, validation, tmp_path)
    source, target = (tmp_path / "source.spm.model").read_bytes(), (tmp_path / "target.spm.model").read_bytes()
    assert source == target
    pieces = set(task.source_tokenizer.vocab)
    assert task.source_tokenizer.vocab == task.target_tokenizer.vocab and len(pieces) == 500
    assert {"▁Tom", "▁está"} <= pieces  # English and Spanish pieces in the one vocabulary


@pytest.mark.slow
def test_scores_are_cased_with_the_lower_cased_bleu_beside_them(sentencepiece_run):
    _, run_dir, output = sentencepiece_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert set(metrics["validation"]) == {"bleu", "chrf", "bleu_lowercase"}
    assert "|case:mixed|" in metrics["sacrebleu_signatures"]["bleu"]
    assert "|case:lc|" in metrics["sacrebleu_signatures"]["bleu_lowercase"]
    assert metrics["validation"]["bleu_lowercase"] >= metrics["validation"]["bleu"]
    assert "validation bleu_lowercase:" in output


@pytest.mark.slow
def test_references_are_kept_as_written_and_outputs_hold_no_unknown_or_stray_spaces(sentencepiece_run):
    root, run_dir, _ = sentencepiece_run
    rows = [line.split("\t") for line in (run_dir / "translations.tsv").read_text(encoding="utf-8").splitlines()]
    pairs = [line.split("\t")[:2] for line in (root / "pairs.tsv").read_text(encoding="utf-8").splitlines()]
    written = {source: target for target, source in pairs}
    assert all(row[2] == unicodedata.normalize("NFKC", written[row[0]]) for row in rows)
    assert any(row[2] != row[2].lower() for row in rows)  # cased references
    outputs = [row[1] for row in rows]
    assert sum(bool(output) for output in outputs) > len(outputs) // 2
    for output in outputs:
        assert "[UNK]" not in output and "▁" not in output
        assert output == output.strip() and "  " not in output
        assert not any(f" {mark}" in output for mark in ".,!?;:")


@pytest.mark.slow
def test_the_export_serves_the_run_s_translations_with_tensorflow_alone(sentencepiece_run):
    root, run_dir, _ = sentencepiece_run
    rows = [line.split("\t") for line in (run_dir / "translations.tsv").read_text(encoding="utf-8").splitlines()[:5]]
    out = serve_in_tensorflow_only(
        root / "saved_models" / "tiny" / "1",
        {"validation": [row[0] for row in rows], "edge": ["", "   ", "Tom tiene 35 años. 😀 漢字"]},
    )
    assert out["validation"]["translation"]["value"] == [row[1] for row in rows]
    edge = out["edge"]["translation"]["value"]
    assert edge[:2] == ["", ""] and out["edge"]["score"]["value"][:2] == [0.0, 0.0]
    assert "[UNK]" not in edge[2]


PUNCTUATION_ONLY = ["¡¿...?!", "— … «» ,;:"]
MIXED_SCRIPTS = ["Привет, Tom! مرحبا 你好 🙂👍🏽 35", "Tom tiene 35 años. 😀 漢字"]


@pytest.mark.slow
def test_hostile_texts_are_cut_on_subwords_and_give_bounded_clean_outputs(sentencepiece_run):
    import sentencepiece

    from seqtasks.text.special_ids import UNK_ID

    root, run_dir, _ = sentencepiece_run
    recipe = load_recipe(run_dir / "recipe.yaml")
    source = sentencepiece.SentencePieceProcessor(model_proto=(run_dir / "source.spm.model").read_bytes())
    target = sentencepiece.SentencePieceProcessor(model_proto=(run_dir / "target.spm.model").read_bytes())
    long = ("Tom tiene 35 años y vive en Madrid. " * 300)[:10_000]
    assert len(long) == 10_000
    for text in MIXED_SCRIPTS:  # unseen characters become byte pieces, never [UNK]
        assert UNK_ID not in source.encode(text)
    sentence = "Tom tiene 35 años y vive en Madrid."
    out = serve_in_tensorflow_only(
        root / "saved_models" / "tiny" / "1",
        {"long": [long, sentence], "hostile": PUNCTUATION_ONLY + MIXED_SCRIPTS + [" \t\n "]},
    )
    long_out = out["long"]["translation"]["value"]
    # About 280 sentences: the first 63 are translated each on its own, the rest are read with the 64th as one
    # sentence (MAX_SENTENCES), longer than the model reads, so in parts cut between its words, none left out.
    assert long_out[0].startswith(" ".join([long_out[1]] * (MAX_SENTENCES - 1)) + " ")
    assert recipe.data.augment.join == 0 and recipe.data.split_longer_than is None
    sentences, separators = split_sentences(long[: text_character_limit(recipe.data.max_length)])
    rest = "".join(s + after for s, after in zip(sentences[MAX_SENTENCES - 1 :], separators[MAX_SENTENCES:])).rstrip()
    parts, _ = split_long(rest, lambda text: len(source.encode(text)), recipe.data.max_length)
    assert len(parts) > 1 and all(len(source.encode(part)) <= recipe.data.max_length for part in parts)
    tail = long_out[0][len(" ".join([long_out[1]] * (MAX_SENTENCES - 1))) + 1 :]
    assert recipe.model.decoding.max_length < len(target.encode(tail)) <= len(parts) * recipe.model.decoding.max_length
    outputs = long_out[1:] + out["hostile"]["translation"]["value"]
    assert outputs[-1] == ""
    assert all(len(target.encode(output)) <= recipe.model.decoding.max_length for output in outputs)
    for output in [long_out[0], *outputs]:
        assert "[UNK]" not in output and "▁" not in output and "\ufffd" not in output
        assert output == output.strip() and "  " not in output
        assert not any(f" {mark}" in output for mark in ".,!?;:")
