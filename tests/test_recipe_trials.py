"""benchmarks.recipe_trials: reading the trials from the command line and picking each trial's best epoch."""

import pytest

from benchmarks.recipe_trials import best_epoch, heldout_scores, parse_trials, row, split_arguments


def test_trials_are_read_with_their_own_overrides_in_order():
    words = ["--trial", "recipe", "--trial", "mirror", "data.mirror_images=true", "model.x=1", "--trial", "b"]
    assert parse_trials(words) == [("recipe", []), ("mirror", ["data.mirror_images=true", "model.x=1"]), ("b", [])]


@pytest.mark.parametrize(
    "words, message",
    [
        ([], "expected at least one --trial NAME"),
        (["--trial"], "expected at least one --trial NAME"),
        (["x=1"], "expected --trial NAME before 'x=1'"),
        (["--trial", "a", "oops"], "expected KEY=VALUE after the trial's name; got 'oops'"),
        (["--trial", "a", "--trial", "a"], r"trial names must differ; got \['a', 'a'\]"),
    ],
)
def test_bad_trial_lists_are_refused_with_what_was_expected(words, message):
    with pytest.raises(SystemExit, match=message):
        parse_trials(words)


def test_the_best_epoch_is_the_lowest_loss_or_the_highest_score_first_of_ties_and_counts_from_one():
    history = {"val_loss": [3.0, 2.5, None, 2.7], "val_token_accuracy": [0.2, 0.4, 0.4, None]}
    assert best_epoch({"history": history}, "val_loss") == 2
    assert best_epoch({"history": history}, "val_token_accuracy") == 2
    assert best_epoch({"history": history}, "val_bleu") is None
    assert best_epoch({"history": {"val_loss": [None]}}, "val_loss") is None


def test_options_may_come_before_or_after_the_trials():
    argv = ["r.yaml", "--output-dir", "d", "--trial", "a", "x=1", "--trial", "b", "--json", "out.json"]
    assert split_arguments(argv) == (["r.yaml", "--output-dir", "d", "--json", "out.json"],
                                     ["--trial", "a", "x=1", "--trial", "b"])
    assert split_arguments(["r.yaml", "--json", "o"]) == (["r.yaml", "--json", "o"], [])


@pytest.mark.parametrize("replaced", ["best_validation", "final_validation"])  # the second: before 2026-12-02
def test_the_row_gives_the_held_out_splits_scores_beside_validation(replaced):
    metrics = {
        "validation": {"f1": 0.94, "precision": 0.9417}, replaced: {"f1": 0.93, "precision": 0.92},
        "heldout": {"f1": 0.8951, "precision": 0.9052}, "heldout_per_type": {"LOC": {"f1-score": 0.9}},
        "word_vectors": {"dimension": 50}, "epochs_run": 18, "train_seconds": 1454.5,
        "history": {"val_loss": [2.0, 1.5, 1.6]},
    }
    assert heldout_scores(metrics) == {"heldout": {"f1": 0.8951, "precision": 0.9052}}
    assert heldout_scores({"heldout": {"f1": 0.5}}) == {}
    assert row("t", ["x=1"], metrics, "val_loss", 25.04) == {
        "trial": "t", "overrides": ["x=1"], "validation": "f1 0.94, precision 0.9417",
        "heldout": "heldout: f1 0.8951, precision 0.9052", "epochs": 18, "best_epoch": 2, "train_minutes": 24.2,
        "whole_minutes": 25.0,
    }
