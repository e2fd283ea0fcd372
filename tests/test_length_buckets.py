"""Quality by source length: the buckets, the per-bucket scores, the table, and `seqtasks compare`."""

import json

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import REPO

from seqtasks.cli import main
from seqtasks.errors import RecipeError
from seqtasks.evaluation.length_buckets import bucket_labels, by_length_scalars, report_lines, scores_by_length
from seqtasks.recipe import load_recipe


def test_each_edge_closes_a_bucket_and_the_last_is_open():
    assert bucket_labels([5, 10, 15, 20, 30]) == ["1-5", "6-10", "11-15", "16-20", "21-30", "31+"]
    assert bucket_labels([1, 2, 4]) == ["1", "2", "3-4", "5+"]


def test_scores_come_from_the_examples_of_each_bucket_and_empty_buckets_keep_their_count():
    lengths = [0, 5, 6, 10, 11, 31, 200]
    seen = []

    def score(indices):
        seen.append(indices)
        return {"mean_length": float(np.mean([lengths[i] for i in indices]))}

    result = scores_by_length(lengths, [5, 10, 30], score, "source words")
    assert seen == [[0, 1], [2, 3], [4], [5, 6]]
    assert result == {
        "unit": "source words",
        "edges": [5, 10, 30],
        "buckets": [
            {"bucket": "1-5", "count": 2, "mean_length": 2.5},
            {"bucket": "6-10", "count": 2, "mean_length": 8.0},
            {"bucket": "11-30", "count": 1, "mean_length": 11.0},
            {"bucket": "31+", "count": 2, "mean_length": 115.5},
        ],
    }
    empty = scores_by_length([3], [5, 10], score, "symbols")["buckets"]
    assert empty[1] == {"bucket": "6-10", "count": 0} and empty[2] == {"bucket": "11+", "count": 0}


def test_the_table_and_the_tensorboard_scalars():
    result = scores_by_length([2, 7], [5, 10], lambda ix: {"bleu": 10.0 * len(ix), "chrf": 55.5}, "source words")
    lines = report_lines(result, ["bleu", "chrf"])
    assert lines[0] == "By source length (source words):"
    assert lines[1].split() == ["source", "words", "count", "bleu", "chrf"]
    assert lines[2].split() == ["1-5", "1", "10", "55.5"]
    assert lines[4].split() == ["11+", "0", "-", "-"]
    assert by_length_scalars(result)["6-10"] == {"count": 1, "bleu": 10.0, "chrf": 55.5}


@pytest.mark.parametrize(
    "edges, message",
    [
        ("[]", "expected increasing positive lengths"),
        ("[5, 5]", "expected increasing positive lengths"),
        ("[10, 5]", "expected increasing positive lengths"),
        ("[0, 5]", "expected entries of at least 1; got 0"),
    ],
)
def test_bucket_edges_must_increase(tmp_path, edges, message):
    recipe = tmp_path / "toy.yaml"
    recipe.write_text(f"task: toy\nevaluation:\n  length_buckets: {edges}\n")
    with pytest.raises(RecipeError, match=rf"toy.yaml: evaluation.length_buckets: {message}"):
        load_recipe(recipe)


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


def test_the_default_recipes_buckets_are_the_issue_s(tmp_path):
    assert load_recipe(REPO / "recipes" / "toy.yaml").evaluation.length_buckets == [5, 10, 15, 20, 30]
