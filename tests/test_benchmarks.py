"""The benchmark harness: records with ratios, the results file, the generated table in BENCHMARKS.md."""

import json

import pytest

from benchmarks import records
from benchmarks.__main__ import main


def test_a_record_carries_each_baseline_and_its_ratio():
    r = records.record("translation.train.target_tokens_per_s", 4330.0, "target tokens/s", 1125.0, 250.0)
    assert r == {
        "name": "translation.train.target_tokens_per_s",
        "value": 4330.0,
        "unit": "target tokens/s",
        "baseline_a": 1125.0,
        "ratio_a": 3.85,
        "baseline_b": 250.0,
        "ratio_b": 17.32,
    }
    assert "baseline_a" not in records.record("cli.help_s", 0.0561, "s") and records.record("x", 0.0561, "s")["value"] == 0.056


def test_results_accumulate_by_name_and_another_machine_starts_afresh(tmp_path):
    path = tmp_path / "results.json"
    records.merge(path, "m1", "2026-11-20", [records.record("a", 1.0, "s"), records.record("b", 2.0, "s")])
    stored = records.merge(path, "m1", "2026-11-22", [records.record("b", 3.0, "s")])
    assert [(r["name"], r["value"], r["date"]) for r in stored["records"]] == [("a", 1.0, "2026-11-20"), ("b", 3.0, "2026-11-22")]
    stored = records.merge(path, "m2", "2026-11-22", [records.record("c", 4.0, "s")])
    assert [r["name"] for r in stored["records"]] == ["c"]
    assert json.loads(path.read_text())["machine"] == "m2"


def test_the_generated_table_replaces_only_its_own_section(tmp_path):
    page = tmp_path / "BENCHMARKS.md"
    page.write_text("# Benchmarks\n\nHand-written text.\n")
    stored = {"machine": "m1", "records": [{**records.record("a", 1.5, "s", 3.0), "date": "2026-11-22"}]}
    records.update_benchmarks_md(page, stored, "python -m benchmarks")
    first = page.read_text()
    assert first.startswith("# Benchmarks\n\nHand-written text.\n\n## Benchmark suite\n")
    assert "| `a` | 1.5 | s | 3.0 | 0.5 |  |  | 2026-11-22 |  |" in first
    page.write_text(first + "\n## Later section\n")
    stored["records"][0]["value"] = 2.5
    records.update_benchmarks_md(page, stored, "python -m benchmarks")
    second = page.read_text()
    assert "| `a` | 2.5 |" in second and "| `a` | 1.5 |" not in second
    assert second.count(records.BEGIN) == 1 and second.endswith("\n## Later section\n")


def test_only_names_a_known_benchmark(capsys):
    with pytest.raises(SystemExit) as raised:
        main(["--only", "speech.train"])
    assert raised.value.code == 2
    assert "--only: expected a name starting with one of translation, sentiment, ner, captioning, cli; got 'speech.train'" in capsys.readouterr().err
