"""Tests of seqtasks/training/."""
