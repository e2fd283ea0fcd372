"""Decoding loops written with `keras.ops`, so they run inside a graph."""

from seqtasks.decoding.greedy_search import greedy_search

__all__ = ["greedy_search"]
