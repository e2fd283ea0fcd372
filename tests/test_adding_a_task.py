"""docs/adding-a-task.md's worked example, as written there: one task file, one table row, one recipe."""

import json
import re

import pytest

from tests.conftest import REPO, run_recipe, seqtasks_command, serve_in_tensorflow_only

DOC = (REPO / "docs" / "adding-a-task.md").read_text(encoding="utf-8")


def _block(language, starts_with):
    (block,) = [b for b in re.findall(rf"```{language}\n(.*?)```", DOC, re.S) if b.startswith(starts_with)]
    return block


@pytest.mark.slow
def test_the_documented_fifth_task_trains_evaluates_and_serves(tmp_path, monkeypatch):
    from seqtasks.tasks.table import TASKS

    (tmp_path / "summarisation.py").write_text(_block("python", '"""Summarisation'), encoding="utf-8")
    row = _block("python", "TaskSpec(").rstrip().removesuffix(",")
    (tmp_path / "summarisation_row.py").write_text(
        "from seqtasks.recipe.schema import Seq2SeqModelConfig\n"
        "from seqtasks.tasks.translation.config import TranslationDataConfig\n"
        "from seqtasks.tasks.table import TaskSpec\n"
        f"ROW = {row}\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from summarisation_row import ROW

    assert ROW.implementation == "seqtasks.tasks.summarisation:SummarisationTask"
    # The file lives in the test's folder rather than in seqtasks/tasks/.
    monkeypatch.setitem(TASKS, ROW.name, ROW.__class__(**{**ROW.__dict__, "implementation": "summarisation:SummarisationTask"}))

    sample = (REPO / "tests" / "data" / "spa-eng-sample.tsv").read_text(encoding="utf-8").splitlines()
    english = [line.split("\t")[0] for line in sample[:400]]
    (tmp_path / "data").mkdir()
    # An "article" of two sentences summarised by its first.
    (tmp_path / "data" / "articles.tsv").write_text(
        "".join(f"{a} {b}\t{a}\n" for a, b in zip(english[0::2], english[1::2])), encoding="utf-8"
    )
    (tmp_path / "summarisation.yaml").write_text(_block("yaml", "task: summarisation"), encoding="utf-8")

    run_dir, output = run_recipe(tmp_path / "summarisation.yaml", tmp_path / "runs", f"export.directory={tmp_path / 'exports'}")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert set(metrics["validation"]) == {"chrf", "length_ratio"}
    assert 0.0 < metrics["validation"]["length_ratio"] < 2.0 and metrics["train_pairs"] == 180
    assert "Sample summaries:" in output and "validation chrf:" in output
    summaries = [line.split("\t") for line in (run_dir / "summaries.tsv").read_text(encoding="utf-8").splitlines()]
    assert len(summaries) == 20

    export = tmp_path / "exports" / "summarisation" / "1"
    out = serve_in_tensorflow_only(export, {"articles": [row[0] for row in summaries[:3]]})
    assert sorted(out["articles"]) == ["score", "summary"]
    assert out["articles"]["summary"]["value"] == [row[1] for row in summaries[:3]]
    result = seqtasks_command("predict", export, summaries[0][0])
    assert result.stdout.splitlines() == [summaries[0][1]]
