"""Tests of seqtasks/lifecycle/."""
