"""`seqtasks compare`: the quality by source length of several runs, drawn, with the numbers beside it."""

import json

import pytest
from click.testing import CliRunner

from seqtasks.cli import main
from seqtasks.evaluation.length_buckets import bucket_labels


def _run(tmp_path, name, values, edges=(5, 10)):
    folder = tmp_path / name / "20261124-000000"
    folder.mkdir(parents=True)
    buckets = [{"bucket": label, "count": count, **({"bleu": v, "chrf": v + 20} if count else {})}
               for label, count, v in zip(bucket_labels(list(edges)), [40, 12, 0], values)]
    (folder / "metrics.json").write_text(json.dumps(
        {"validation": {"bleu": 1.0}, "by_length": {"unit": "source words", "edges": list(edges), "buckets": buckets}}
    ))
    return folder


def test_compare_draws_a_line_per_run_and_writes_the_numbers_beside_it(tmp_path):
    plain, attention = _run(tmp_path, "plain", [30.0, 12.5, 0]), _run(tmp_path, "luong", [35.0, 30.0, 0])
    figure = tmp_path / "figures" / "by_length.png"
    result = CliRunner().invoke(main, ["compare", str(plain), str(attention), "--output", str(figure)])
    assert result.exit_code == 0, result.output
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "figures" / "by_length.csv").read_text().splitlines() == [
        "run,bucket,count,bleu,chrf",
        "plain,1-5,40,30.0,50.0",
        "plain,6-10,12,12.5,32.5",
        "plain,11+,0,,",
        "luong,1-5,40,35.0,55.0",
        "luong,6-10,12,30.0,50.0",
        "luong,11+,0,,",
    ]
    assert f"Numbers: {tmp_path / 'figures' / 'by_length.csv'}" in result.output
    labelled = CliRunner().invoke(
        main, ["compare", str(plain), str(attention), "--output", str(figure), "--metric", "chrf", "--label", "none",
               "--label", "attention"],
    )
    assert labelled.exit_code == 0 and "none,6-10,12,12.5,32.5" in figure.with_suffix(".csv").read_text()


@pytest.mark.parametrize(
    "setup, args, message",
    [
        (lambda p: _run(p, "a", [1, 2, 0]), ["--output", "out.svg"], "the figure is a PNG file"),
        (lambda p: _run(p, "a", [1, 2, 0]), ["--output", "o.png", "--metric", "ter"], "no score 'ter' by length in these runs; they have: bleu, chrf"),
        (lambda p: _run(p, "a", [1, 2, 0]), ["--output", "o.png", "--label", "x", "--label", "y"], "got 2 --label values for 1 runs"),
        (lambda p: p / "missing", ["--output", "o.png"], "missing: no such file (is "),
    ],
)
def test_compare_errors_name_what_is_wrong(tmp_path, setup, args, message):
    result = CliRunner().invoke(main, ["compare", str(setup(tmp_path)), *args])
    assert result.exit_code == 2 and message in result.output, result.output


def test_compare_refuses_runs_bucketed_differently_or_without_buckets(tmp_path):
    first, other = _run(tmp_path, "a", [1, 2, 0]), _run(tmp_path, "b", [1, 2, 0], edges=(4, 10))
    result = CliRunner().invoke(main, ["compare", str(first), str(other), "--output", str(tmp_path / "o.png")])
    assert result.exit_code == 2 and "differ from" in result.output and "evaluation.length_buckets" in result.output
    (first / "metrics.json").write_text(json.dumps({"validation": {"f1": 0.9}}))
    result = CliRunner().invoke(main, ["compare", str(first), "--output", str(tmp_path / "o.png")])
    assert result.exit_code == 2 and "no scores by source length" in result.output
