"""Figures a person can read: every cell's text stands out from the cell, figures are written whole."""

import numpy as np
import pytest

from seqtasks.evaluation.plots import confusion_colours, contrast_ratio, relative_luminance, save_confusion_matrix, text_colour

BLACK, WHITE = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
TEXT = {"black": BLACK, "white": WHITE}


def test_luminance_and_contrast_follow_wcag():
    assert relative_luminance(WHITE) == pytest.approx(1.0)
    assert relative_luminance((0.0, 0.0, 0.0, 1.0)) == 0.0  # alpha is ignored
    assert relative_luminance((0.5, 0.5, 0.5)) == pytest.approx(0.2140, abs=1e-4)
    assert relative_luminance((0.0, 1.0, 0.0)) == pytest.approx(0.7152)  # green weighs most
    assert contrast_ratio(BLACK, WHITE) == pytest.approx(21.0)
    assert contrast_ratio(WHITE, BLACK) == contrast_ratio(BLACK, WHITE)
    assert contrast_ratio((0.3, 0.6, 0.9), (0.3, 0.6, 0.9)) == 1.0


@pytest.mark.parametrize(
    "background, expected",
    [
        (WHITE, "black"),
        (BLACK, "white"),
        ((0.03, 0.19, 0.42), "white"),
        ((0.42, 0.68, 0.84), "black"),
        ((0.0, 0.0, 1.0), "white"),
        ((1.0, 1.0, 0.0), "black"),
        ((0.5, 0.5, 0.5), "black"),
    ],
)
def test_text_colour_is_the_one_that_contrasts_more(background, expected):
    assert text_colour(background) == expected
    other = "white" if expected == "black" else "black"
    assert contrast_ratio(background, TEXT[expected]) >= contrast_ratio(background, TEXT[other])


@pytest.mark.parametrize(
    "confusion",
    [
        [[4, 4], [4, 4]],  # equal counts: all white text on the lightest colour before
        [[5, 3], [2, 4]],  # the 3 was white on light blue: colours were scaled from the smallest count
        [[0, 0], [0, 0]],
        [[812, 35, 3], [41, 701, 60], [9, 30, 790]],
        np.arange(100).reshape(10, 10),
    ],
)
def test_every_confusion_cell_is_readable(confusion):
    backgrounds, texts = confusion_colours(np.array(confusion))
    ratios = [
        contrast_ratio(cell, TEXT[text]) for row, colours in zip(backgrounds, texts) for cell, text in zip(row, colours)
    ]
    assert min(ratios) >= 4.5  # WCAG AA for normal text


def test_confusion_colours_run_from_zero_to_the_largest_count():
    backgrounds, texts = confusion_colours(np.array([[4, 4], [4, 0]]))
    assert np.allclose(backgrounds[0, 0], backgrounds[1, 0]) and texts[0][0] == texts[1][0] == "white"
    assert relative_luminance(backgrounds[1, 1]) > 0.9 and texts[1][1] == "black"  # a zero is nearly white
    backgrounds, _ = confusion_colours(np.array([[5, 3], [2, 4]]))
    luminances = [relative_luminance(backgrounds[index]) for index in [(0, 0), (1, 1), (0, 1), (1, 0)]]
    assert luminances == sorted(luminances)  # more: darker


def test_a_figure_replaces_the_old_one_whole(tmp_path, monkeypatch):
    import matplotlib.figure

    path = tmp_path / "confusion_matrix.png"
    path.write_bytes(b"old")
    save_confusion_matrix(np.array([[3, 1], [0, 2]]), ["negative", "positive"], path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["confusion_matrix.png"]  # no temporary file left

    def fails_half_way(figure, target, **options):
        with open(target, "wb") as handle:
            handle.write(b"\x89PNG half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", fails_half_way)
    written = path.read_bytes()
    with pytest.raises(OSError, match="No space left"):
        save_confusion_matrix(np.array([[3, 1], [0, 2]]), ["negative", "positive"], path)
    assert path.read_bytes() == written
    assert [p.name for p in tmp_path.iterdir()] == ["confusion_matrix.png"]
