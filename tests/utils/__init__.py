"""Tests of seqtasks/utils/."""
