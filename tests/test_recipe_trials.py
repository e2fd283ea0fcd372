"""benchmarks.recipe_trials: reading the trials from the command line and picking each trial's best epoch."""

import pytest

from benchmarks.recipe_trials import best_epoch, parse_trials


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
