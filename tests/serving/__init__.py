"""Tests of seqtasks/serving/."""
