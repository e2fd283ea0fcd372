"""Tests of seqtasks/inference/."""
