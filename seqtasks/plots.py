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


def save_confusion_matrix(confusion, names, path):
    """Saves a confusion matrix (rows: actual class, columns: predicted) with counts in the cells."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    size = max(3.5, 0.6 * len(names) + 2)
    figure, axes = plt.subplots(figsize=(size, size))
    axes.imshow(confusion, cmap="Blues")
    axes.set_xticks(range(len(names)), names, rotation=45, ha="right")
    axes.set_yticks(range(len(names)), names)
    axes.set_xlabel("predicted")
    axes.set_ylabel("actual")
    threshold = confusion.max() / 2 if confusion.size else 0
    for row in range(len(names)):
        for column in range(len(names)):
            value = confusion[row, column]
            axes.text(column, row, str(value), ha="center", va="center", color="white" if value > threshold else "black")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def save_attention_overlay(image, weights, words, path, columns=5):
    """Saves the image once per word with that word's attention grid laid over it.

    `image` `(height, width, 3)` uint8; `weights` `(len(words), grid_h, grid_w)`,
    stretched over the whole image (brighter: more attention).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = len(words) + 1
    rows = -(-panels // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(2.2 * columns, 2.4 * rows), squeeze=False)
    extent = (0, image.shape[1], image.shape[0], 0)
    for index, ax in enumerate(axes.flat):
        ax.axis("off")
        if index >= panels:
            continue
        ax.imshow(image, extent=extent)
        if index == 0:
            ax.set_title("image", fontsize=9)
            continue
        grid = weights[index - 1]
        ax.imshow(grid / max(float(grid.max()), 1e-9), cmap="gray", alpha=0.65, extent=extent, interpolation="bilinear")
        ax.set_title(words[index - 1], fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)
