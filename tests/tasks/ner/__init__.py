"""Tests of seqtasks/tasks/ner/."""
