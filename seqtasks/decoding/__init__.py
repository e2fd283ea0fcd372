"""Decoding loops written with `keras.ops`, so they run inside a graph."""

from seqtasks.decoding.beam_search import beam_search, coverage_penalty, length_penalty, tile_beams
from seqtasks.decoding.greedy_search import greedy_search
from seqtasks.decoding.sampling import sampling_search

__all__ = ["beam_search", "coverage_penalty", "greedy_search", "length_penalty", "sampling_search", "tile_beams"]
