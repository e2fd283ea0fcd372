"""Quality by source length: the buckets, the per-bucket scores, the table, and `seqtasks compare`."""

import numpy as np
import pytest

from seqtasks.errors import RecipeError
from seqtasks.evaluation.length_buckets import bucket_labels, by_length_scalars, report_lines, scores_by_length
from seqtasks.recipe import load_recipe
from tests.conftest import REPO


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


def test_the_default_recipes_buckets_are_the_issue_s(tmp_path):
    assert load_recipe(REPO / "recipes" / "toy.yaml").evaluation.length_buckets == [5, 10, 15, 20, 30]
