"""Tests of seqtasks/tasks/sentiment/."""
