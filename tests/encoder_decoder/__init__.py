"""Tests of seqtasks/encoder_decoder/."""
