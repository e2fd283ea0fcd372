"""Tests of seqtasks/text/."""
