"""Tests of seqtasks/tasks/captioning/."""
