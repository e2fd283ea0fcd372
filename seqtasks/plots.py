"""PNG figures written into run folders (matplotlib, no display needed)."""


def save_attention_heatmap(weights, source_tokens, output_tokens, path, title=None):
    """Saves `weights` `(len(output_tokens), len(source_tokens))` as a labelled heatmap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(
        figsize=(max(4.0, 0.45 * len(source_tokens) + 2), max(3.0, 0.4 * len(output_tokens) + 1.5))
    )
    image = axes.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    axes.set_xticks(range(len(source_tokens)), source_tokens, rotation=60, ha="right")
    axes.set_yticks(range(len(output_tokens)), output_tokens)
    axes.set_xlabel("source")
    axes.set_ylabel("output")
    if title:
        axes.set_title(title, fontsize=9)
    figure.colorbar(image, ax=axes, fraction=0.04)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
