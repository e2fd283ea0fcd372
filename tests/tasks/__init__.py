"""Tests of seqtasks/tasks/."""
