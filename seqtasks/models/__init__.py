"""Models assembled from `seqtasks.layers`, shared by the task recipes."""

from seqtasks.models.seq2seq import Seq2Seq

__all__ = ["Seq2Seq"]
