"""PNG figures written into run folders (matplotlib, no display needed), readable in every cell."""

import os
from pathlib import Path


def relative_luminance(colour):
    """The WCAG relative luminance (0: black, 1: white) of an RGB or RGBA colour with components in [0, 1]."""

    def linear(component):
        return component / 12.92 if component <= 0.04045 else ((component + 0.055) / 1.055) ** 2.4

    red, green, blue = (linear(float(c)) for c in colour[:3])
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def contrast_ratio(first, second):
    """The WCAG contrast ratio of two colours, from 1 (none) to 21 (black on white)."""
    lighter, darker = sorted((relative_luminance(first), relative_luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def text_colour(background):
    """`"black"` or `"white"`: the text colour that contrasts more with `background` (at least 4.58:1)."""
    black, white = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
    return "black" if contrast_ratio(background, black) >= contrast_ratio(background, white) else "white"


def confusion_colours(confusion, cmap="Blues"):
    """`(cell colours, text colours)` of a confusion matrix's cells, as `save_confusion_matrix` draws them.

    Colours run from 0 (the lightest) to the largest count (the darkest), so
    equal counts look alike in every matrix; each cell's text is black or
    white, whichever reads better on the cell.
    """
    import matplotlib
    import numpy as np

    confusion = np.asarray(confusion)
    norm = matplotlib.colors.Normalize(vmin=0, vmax=max(1, int(confusion.max()) if confusion.size else 1))
    backgrounds = matplotlib.colormaps[cmap](norm(confusion))
    texts = [[text_colour(cell) for cell in row] for row in backgrounds]
    return backgrounds, texts


def save_attention_heatmap(weights, source_tokens, output_tokens, path, title=None, axis_labels=("source", "output")):
    """Saves `weights` `(len(output_tokens), len(source_tokens))` as a labelled heatmap.

    The colour scale runs from 0 to the largest weight (the colour bar says
    how large), so that the attention over a long source, where every weight
    is small, still shows where it goes.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    weights = np.asarray(weights, dtype=float)
    largest = float(weights.max()) if weights.size else 1.0
    figure, axes = plt.subplots(
        figsize=(max(4.0, 0.45 * len(source_tokens) + 2), max(3.0, 0.4 * len(output_tokens) + 1.5))
    )
    image = axes.imshow(weights, cmap="viridis", vmin=0.0, vmax=largest if largest > 0 else 1.0, aspect="auto")
    axes.set_xticks(range(len(source_tokens)), source_tokens, rotation=60, ha="right", rotation_mode="anchor")
    axes.set_yticks(range(len(output_tokens)), output_tokens)
    axes.set_xlabel(axis_labels[0])
    axes.set_ylabel(axis_labels[1])
    if title:
        axes.set_title(title, fontsize=9, wrap=True)
    figure.colorbar(image, ax=axes, fraction=0.04, label="attention")
    figure.tight_layout()
    _save(figure, path, dpi=100)
    plt.close(figure)


def save_confusion_matrix(confusion, names, path):
    """Saves a confusion matrix (rows: actual class, columns: predicted) with counts in the cells."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backgrounds, texts = confusion_colours(confusion)
    size = max(3.5, 0.6 * len(names) + 2)
    figure, axes = plt.subplots(figsize=(size, size))
    axes.imshow(backgrounds)
    axes.set_xticks(range(len(names)), names, rotation=45, ha="right", rotation_mode="anchor")
    axes.set_yticks(range(len(names)), names)
    axes.set_xlabel("predicted")
    axes.set_ylabel("actual")
    for row in range(len(names)):
        for column in range(len(names)):
            axes.text(column, row, str(confusion[row, column]), ha="center", va="center", color=texts[row][column])
    figure.tight_layout()
    _save(figure, path, dpi=100)
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
        ax.set_title(_shortened(words[index - 1]), fontsize=10)
    figure.tight_layout()
    _save(figure, path, dpi=80)
    plt.close(figure)


def _shortened(word, most=18):
    """`word`, cut with an ellipsis to `most` characters so that it stays above its own panel."""
    return word if len(word) <= most else word[: most - 1] + "…"


def _save(figure, path, dpi):
    """Writes the figure as a PNG through a temporary file and a rename: never a half-written figure."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        figure.savefig(temporary, dpi=dpi, format="png")
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def save_length_comparison(labels, buckets, series, metric, unit, path):
    """One line per run of `metric` over the length `buckets` (`series`: `{label: [value or None, ...]}`).

    Empty buckets leave gaps. The x labels carry each bucket's size, `labels`
    `[bucket label with count, ...]`, from the first run.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    figure, axes = plt.subplots(figsize=(max(5.0, 1.1 * len(buckets) + 2), 4.0))
    positions = np.arange(len(buckets))
    for (name, values), marker in zip(series.items(), "osD^v<>ph*"):
        points = np.array([np.nan if value is None else value for value in values], dtype=float)
        axes.plot(positions, points, marker=marker, label=name)
    axes.set_xticks(positions, labels)
    axes.set_xlabel(f"length in {unit}; examples per bucket in brackets")
    axes.set_ylabel(metric)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    _save(figure, path, dpi=100)
    plt.close(figure)
