"""What the README says the shipped recipes choose (BENCHMARKS.md, issues 54 and 64) is what their files say."""

from seqtasks.recipe import load_recipe
from tests.conftest import REPO


def test_the_flickr8k_recipe_decays_along_a_cosine_with_weight_decay_mirrors_and_weighs_the_last_four():
    recipe = load_recipe(REPO / "recipes" / "captioning-flickr8k.yaml")
    training = recipe.training
    assert training.learning_rate_schedule == "cosine" and training.weight_decay == 0.1
    assert recipe.data.mirror_images and recipe.model.embedding_dropout == 0.0
    assert training.average_last == training.keep_checkpoints == 4
    # No early stopping: the cosine's low rates at the end are where the kept average comes from.
    assert training.early_stopping_patience is None and training.max_minutes == 60


def test_the_20_minute_translation_recipe_weighs_the_mean_of_its_last_four_checkpoints():
    training = load_recipe(REPO / "recipes" / "translation-anki-spa-eng.yaml").training
    assert training.average_last == training.keep_checkpoints == 4 and training.ema_momentum is None


def test_the_conll_recipe_ensembles_five_taggers_and_keeps_the_epoch_of_the_best_validation_f1():
    recipe = load_recipe(REPO / "recipes" / "ner-conll2003.yaml")
    assert recipe.model.ensemble == 5 and recipe.model.output == "crf"
    assert recipe.training.monitor == "val_f1" and recipe.training.early_stopping_patience == 5
    assert recipe.training.max_minutes == 60


def test_the_translation_recipes_train_on_typed_and_joined_text_and_decode_long_sentences_whole():
    # README, "Text as people type it", "Long sentences are never cut", "Beam search preferences" (issue 64).
    for name in ("translation", "translation-anki-spa-eng", "translation-bahdanau"):
        recipe = load_recipe(REPO / "recipes" / f"{name}.yaml")
        augment, decoding = recipe.data.augment, recipe.model.decoding
        assert (augment.lower_case, augment.drop_punctuation, augment.strip_accents, augment.typos) == (
            0.4, 0.4, 0.3, 0.0), name
        assert (augment.join, augment.join_max, list(augment.conjunctions)) == (0.15, 3, ["y", "and"]), name
        assert (augment.upper_case, augment.title_case) == (0.0, 0.0), name
        assert (decoding.length_factor, decoding.max_length) == (2.0, 256), name
        assert (decoding.no_repeat_ngram_size, decoding.length_penalty) == (3, 1.0), name
        assert recipe.data.split_longer_than is None, name


def test_the_ner_recipes_train_on_lower_and_upper_cased_copies():
    for name, shares in (("ner", (0.4, 0.1)), ("ner-conll2003", (0.4, 0.1)), ("ner-wnut17", (0.2, 0.05))):
        augment = load_recipe(REPO / "recipes" / f"{name}.yaml").data.augment
        assert (augment.lower_case, augment.upper_case) == shares, name
