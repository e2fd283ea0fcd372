"""Attention over a text's own tokens (self-attention, attention pooling, structured hops), drawn after evaluation."""

HEATMAPS = 5
# A review of 400 words drawn whole is a picture 16,000 pixels wide: its first tokens are drawn.
MAX_DRAWN_TOKENS = 60

_ROWS = {
    "self_attention": ("self-attention: each token (row) over its text", "attending token"),
    "pooling": ("attention pooling: the text vector's weights", "pooling"),
    "hops": ("structured self-attention: one row per hop", "hop"),
}


def draw_token_attention(maps, tokens, folder):
    """Saves each map of the first texts as `folder/<name>_<index>.png`; returns the files' count.

    `maps` holds a model's `attention_maps` as NumPy arrays `(texts, rows,
    time)` by name; `tokens` one list per text (padding cut), in the same
    order. Nothing is drawn for a text without tokens; a long one is drawn
    up to its first `MAX_DRAWN_TOKENS` tokens.
    """
    from seqtasks.evaluation.plots import save_attention_heatmap

    drawn = 0
    for name, weights in sorted(maps.items()):
        title, row_label = _ROWS[name]
        for index, words in enumerate(tokens[:HEATMAPS]):
            if not words:
                continue
            shown = words[:MAX_DRAWN_TOKENS]
            rows = weights[index][: len(shown) if name == "self_attention" else None, : len(shown)]
            labels = shown if name == "self_attention" else [f"{row_label} {row + 1}" for row in range(len(rows))]
            cut = f" (its first {len(shown)} of {len(words)} tokens)" if len(shown) < len(words) else ""
            folder.mkdir(parents=True, exist_ok=True)
            save_attention_heatmap(rows, shown, labels, folder / f"{name}_{index}.png", title + cut, ("token", row_label))
            drawn += 1
    return drawn
