"""Tests of seqtasks/tasks/toy/."""
