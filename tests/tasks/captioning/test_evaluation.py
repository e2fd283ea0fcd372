"""The captioning task's evaluation: cleaned captions, and corpus BLEU over every reference."""

import pytest

from seqtasks.tasks.captioning.data import clean_captions
from seqtasks.tasks.captioning.evaluation import corpus_bleu


def test_captions_are_cleaned_and_bleu_uses_every_reference():
    assert clean_captions(["A dog's ball.", "Two  CATS, sleeping!"], True, True) == ["a dog s ball", "two cats sleeping"]
    assert clean_captions(["A dog."], False, False) == ["A dog."]
    scores, signature = corpus_bleu(["a red circle"], [["a blue square", "a red circle"]])
    assert scores["bleu_1"] == pytest.approx(100.0) and "nrefs:2" in signature
    # A missing reference is padded with the first: same score as listing it twice.
    ragged, _ = corpus_bleu(["a red circle", "a cat"], [["a red square", "the red circle"], ["a cat"]])
    padded, _ = corpus_bleu(["a red circle", "a cat"], [["a red square", "the red circle"], ["a cat", "a cat"]])
    assert ragged == padded
