"""Tests of seqtasks/evaluation/."""
