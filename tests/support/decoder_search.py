"""A check both decoder test files share: a built `AttentionDecoder` decodes with greedy and beam search."""

import keras
import numpy as np

from seqtasks.decoding import beam_search, greedy_search, tile_beams


def check_beam_one_is_greedy_and_wider_no_worse(decoder, state, cache, rng, batch=3, vocabulary=7):
    """Projects the decoder's outputs onto a small random vocabulary and decodes from `state` and `cache`.

    Beam search of width 1 must give greedy search's ids, and a width of 4 a
    hypothesis at least as probable as the greedy one.
    """
    embeddings = rng.normal(size=(vocabulary, decoder._inputs_dim)).astype("float32")
    projection = rng.normal(scale=3.0, size=(decoder.attentional_size, vocabulary)).astype("float32")

    def step_fn(ids, carry):
        step_state, step_cache = carry
        output, step_state, _ = decoder.step(keras.ops.take(embeddings, ids, axis=0), step_state, step_cache)
        return keras.ops.matmul(output, projection), (step_state, step_cache)

    def initial(beam_width):
        return (state, cache) if beam_width is None else tile_beams((state, cache), beam_width)

    start = np.ones(batch, "int32")
    greedy_ids, _, greedy_scores, _ = greedy_search(step_fn, initial(None), start, end_id=2, max_length=6)
    ids, _, _, _ = beam_search(step_fn, initial(1), start, end_id=2, max_length=6, beam_width=1)
    np.testing.assert_array_equal(np.array(ids), np.array(greedy_ids))
    _, _, wide_scores, _ = beam_search(step_fn, initial(4), start, end_id=2, max_length=6, beam_width=4)
    assert np.all(np.array(wide_scores) >= np.array(greedy_scores) - 1e-5)
