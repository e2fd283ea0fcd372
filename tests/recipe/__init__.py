"""Tests of seqtasks/recipe/."""
