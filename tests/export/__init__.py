"""Tests of seqtasks/export/."""
