"""Tests of seqtasks/tasks/translation/."""
