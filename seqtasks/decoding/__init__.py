"""Decoding loops written with `keras.ops`, so they run inside a graph."""

from seqtasks.decoding.beam_search import beam_search, length_penalty, tile_beams
from seqtasks.decoding.greedy_search import greedy_search

__all__ = ["beam_search", "greedy_search", "length_penalty", "tile_beams"]
