"""Translation over SentencePiece subwords: cased, detokenized, no [UNK], served by TensorFlow alone."""

import json
import unicodedata

import pytest
from conftest import serve_in_tensorflow_only, write_sample_pairs
from trained_runs import SENTENCEPIECE_TRANSLATION, TRANSLATION_RECIPE

from seqtasks.recipe import load_recipe
from seqtasks.export.serving_limits import MAX_SENTENCES, text_character_limit
from seqtasks.text.clauses import split_long
from seqtasks.text.sentences import split_sentences

pytestmark = pytest.mark.slow  # a small training and an export

# The tiny translation recipe's overrides for SentencePiece (`trained_runs.SENTENCEPIECE_TRANSLATION`).
SENTENCEPIECE = list(SENTENCEPIECE_TRANSLATION.overrides)


@pytest.fixture(scope="module")
def sentencepiece_run(run_cache):
    return run_cache.get(SENTENCEPIECE_TRANSLATION)


def test_a_model_for_each_side_is_kept_in_the_run_folder(sentencepiece_run):
    _, run_dir, output = sentencepiece_run
    source, target = (run_dir / "source.spm.model").read_bytes(), (run_dir / "target.spm.model").read_bytes()
    assert source != target and min(len(source), len(target)) > 1000
    assert not (run_dir / "source_vocab.txt").exists()
    assert "Vocabularies: 500 source, 400 target sentencepiece subwords" in output


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


def test_scores_are_cased_with_the_lower_cased_bleu_beside_them(sentencepiece_run):
    _, run_dir, output = sentencepiece_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert set(metrics["validation"]) == {"bleu", "chrf", "bleu_lowercase"}
    assert "|case:mixed|" in metrics["sacrebleu_signatures"]["bleu"]
    assert "|case:lc|" in metrics["sacrebleu_signatures"]["bleu_lowercase"]
    assert metrics["validation"]["bleu_lowercase"] >= metrics["validation"]["bleu"]
    assert "validation bleu_lowercase:" in output


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
