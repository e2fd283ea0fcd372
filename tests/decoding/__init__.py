"""Tests of seqtasks/decoding/."""
