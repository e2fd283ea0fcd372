"""Tests of seqtasks/layers/."""
