"""Tests of seqtasks/data/."""
