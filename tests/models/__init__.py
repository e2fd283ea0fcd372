"""Tests of seqtasks/models/."""
