"""The NER task's recipe sections (`seqtasks/tasks/ner/config.py`)."""


def test_a_tagging_recipe_sets_aside_documents_or_sentences_not_both():
    from seqtasks.tasks.ner.config import TaggingDataConfig

    both = TaggingDataConfig(path="train.txt", heldout_sentences=100, heldout_documents=5)
    assert both.check() == [("heldout_sentences", "set aside documents or sentences, not both (heldout_documents is set)")]
    assert TaggingDataConfig(path="train.txt", heldout_documents=5).check() == []
