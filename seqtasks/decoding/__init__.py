"""Decoding: the settings' one declaration (`settings`), the one search (`search`) and its loops, written with
`keras.ops` so they run inside a graph.

The loops import Keras; the declaration does not, so a recipe or a client reads it without loading Keras:
the names below are imported on first use.
"""

import importlib

_WHERE = {
    "beam_search": "beam", "coverage_penalty": "beam", "length_penalty": "beam",
    "tile_beams": "beam", "greedy_search": "greedy", "sampling_search": "sampling",
    "search": "model_search", "score_ids": "model_search",
}

__all__ = sorted(_WHERE)


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError(f"module 'seqtasks.decoding' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"seqtasks.decoding.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
