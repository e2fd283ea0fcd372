"""Translation over SentencePiece subwords: cased, detokenized, no [UNK], served by TensorFlow alone."""

import json
import unicodedata

import pytest
from conftest import REPO, run_recipe, serve_in_tensorflow_only
from test_translation_task import RECIPE

pytestmark = pytest.mark.slow  # a small training and an export

SENTENCEPIECE = [
    "data.tokenizer=sentencepiece",
    "data.lower_case=false",
    "data.shared_vocabulary=true",
    "data.source_vocab_size=500",
]


@pytest.fixture(scope="module")
def sentencepiece_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("sentencepiece")
    sample = (REPO / "recipes" / "data" / "spa-eng-sample.tsv").read_text(encoding="utf-8").splitlines()
    (root / "pairs.tsv").write_text("\n".join(sample[:300]) + "\n", encoding="utf-8")
    (root / "tiny.yaml").write_text(RECIPE)
    run_dir, output = run_recipe(
        root / "tiny.yaml", root / "runs", f"export.directory={root / 'saved_models'}", *SENTENCEPIECE
    )
    return root, run_dir, output


def test_one_shared_model_is_kept_in_the_run_folder(sentencepiece_run):
    _, run_dir, output = sentencepiece_run
    source, target = (run_dir / "source.spm.model").read_bytes(), (run_dir / "target.spm.model").read_bytes()
    assert source == target and len(source) > 1000
    assert not (run_dir / "source_vocab.txt").exists()
    assert "Vocabularies (shared): " in output and " sentencepiece subwords" in output


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
