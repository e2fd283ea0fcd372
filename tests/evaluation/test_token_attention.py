"""Token attention drawn per text, with its tokens."""

import numpy as np
import pytest

pytestmark = pytest.mark.backends


def test_token_attention_is_drawn_per_text_with_its_tokens(tmp_path):
    from seqtasks.evaluation.token_attention import HEATMAPS, draw_token_attention

    maps = {"self_attention": np.full((7, 3, 3), 1 / 3), "hops": np.full((7, 2, 3), 1 / 3)}
    tokens = [["a", "b", "c"], [], *[["x", "y"]] * 5]
    assert draw_token_attention(maps, tokens, tmp_path / "attention") == 2 * (HEATMAPS - 1)
    drawn = sorted(path.name for path in (tmp_path / "attention").iterdir())
    assert drawn == sorted(f"{name}_{i}.png" for name in maps for i in (0, 2, 3, 4))


def test_a_long_text_is_drawn_up_to_its_first_tokens(tmp_path, monkeypatch):
    from seqtasks.evaluation import token_attention

    drawn = []
    monkeypatch.setattr(
        "seqtasks.evaluation.plots.save_attention_heatmap",
        lambda weights, tokens, rows, path, title, labels: drawn.append((np.shape(weights), len(tokens), len(rows), title)),
    )
    words = [f"w{i}" for i in range(token_attention.MAX_DRAWN_TOKENS + 5)]
    size = len(words)
    maps = {"self_attention": np.zeros((1, size, size)), "pooling": np.zeros((1, 1, size))}
    token_attention.draw_token_attention(maps, [words], tmp_path)
    cut = token_attention.MAX_DRAWN_TOKENS
    assert [entry[:3] for entry in drawn] == [((1, cut), cut, 1), ((cut, cut), cut, cut)]
    assert all(title.endswith(f"(its first {cut} of {size} tokens)") for *_, title in drawn)
