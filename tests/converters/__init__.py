"""Tests of seqtasks/converters/."""
