"""Every lesson's figures are readable (issue 53, item 7), drawn from the shipped recordings by plotly.js in a real
headless Chromium at a narrow and a wide chart width, under a grey theme like Streamlit's (tests/app/lesson_charts.py),
and read back from the page: no label, annotation, title or tick label overlaps another or a whisker, every text is
at least 4.5:1 against the plot's background and big enough to read, and (without a browser) every series in every
lesson figure is told apart by more than its colour. Lesson 6's depths: a panel per batch size, so no line hides
another."""

from __future__ import annotations

import os
import re
from itertools import combinations

import pytest

from app.common import a11y
from tests.app import lesson_charts

FIGURES = lesson_charts.lesson_figures()
NAMES = sorted(FIGURES)
SLACK = 1.0  # px: boxes that only touch do not overlap
MIN_TEXT_PX = 9.0  # a label's drawn height; plotly shrinks a bar's text to the bar's width, down to unreadable


def _overlap(a: dict, b: dict) -> bool:
    return min(a["x1"], b["x1"]) - max(a["x0"], b["x0"]) > SLACK and min(a["y1"], b["y1"]) - max(a["y0"], b["y0"]) > SLACK


def _struck(label: dict, rule: dict) -> bool:
    """A horizontal reference line (the dotted 1×) runs through the label's text."""
    y = (rule["y0"] + rule["y1"]) / 2
    return min(label["x1"], rule["x1"]) - max(label["x0"], rule["x0"]) > SLACK and label["y0"] + SLACK < y < label["y1"] - SLACK


def _rgb(css: str) -> str:
    r, g, b = (int(v) for v in re.findall(r"\d+", css)[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


@pytest.fixture(scope="module")
def drawn():
    if not os.path.exists(lesson_charts.CHROMIUM):
        pytest.skip(f"Chromium not found at {lesson_charts.CHROMIUM} (apt-get install chromium to run this test)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        renderer = lesson_charts.Renderer(p)
        out = {(name, w): renderer.boxes(FIGURES[name], w) for name in NAMES for w in lesson_charts.WIDTHS}
        for name in NAMES:  # the narrowest width: the title's lines reach furthest right there
            out[(name, lesson_charts.WIDTHS[0])]["toolbar"] = renderer.toolbar(FIGURES[name], lesson_charts.WIDTHS[0])
        renderer.close()
    return out


@pytest.mark.browser
@pytest.mark.parametrize("width", lesson_charts.WIDTHS)
@pytest.mark.parametrize("name", NAMES)
def test_no_label_overlaps_another_label_or_a_whisker(drawn, name, width):
    b = drawn[(name, width)]
    texts = b["labels"] + b["notes"]
    clashes = [(x["text"], y["text"]) for x, y in combinations(texts + b["ticks"], 2) if _overlap(x, y)]
    clashes += [(x["text"], "whisker") for x in texts for w in b["whiskers"] if _overlap(x, w)]
    clashes += [(x["text"], "a reference line") for x in b["labels"] for r in b["rules"] if _struck(x, r)]
    clashes += [(x["text"], y["text"]) for x in texts for y in b["legend"] if _overlap(x, y)]
    assert not clashes, f"{name} at {width} px: {clashes}"
    small = [x["text"] for x in b["labels"] if x["y1"] - x["y0"] < MIN_TEXT_PX]
    assert not small, f"{name} at {width} px: labels shrunk below {MIN_TEXT_PX} px: {small}"


@pytest.mark.browser
@pytest.mark.parametrize("name", NAMES)
def test_plotly_toolbar_never_covers_a_title(drawn, name):
    """The toolbar plotly shows at a chart's top right on hover stands above the title (bars.frame), not over it, at
    the narrowest width, where a title's lines reach furthest right."""
    t = drawn[(name, lesson_charts.WIDTHS[0])]["toolbar"]
    covered = [x["text"] for x in t["titles"] if _overlap(x, t["toolbar"])]
    assert not covered, f"{name}: the toolbar covers {covered}"


PAGES = lesson_charts.page_figures()


@pytest.fixture(scope="module")
def pages_drawn(drawn):
    """The other pages' figures with their toolbars, at the narrowest width (after the lessons' drawing)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        renderer = lesson_charts.Renderer(p)
        out = {name: [renderer.toolbar(fig, lesson_charts.WIDTHS[0])] for name, fig in PAGES.items()}
        renderer.close()
    return out


@pytest.mark.browser
@pytest.mark.parametrize("name", sorted(PAGES))
def test_plotly_toolbar_never_covers_a_title_on_the_other_pages(pages_drawn, name):
    """The same for the figures that draw their own title (palette.under_toolbar), and no title line runs past the
    chart's right edge (the Benchmarks label was wrapped at 150 characters: cut at a laptop's width)."""
    for t in pages_drawn[name]:
        assert t["titles"], name
        covered = [x["text"] for x in t["titles"] if _overlap(x, t["toolbar"])]
        assert not covered, f"{name}: the toolbar covers {covered}"
        cut = [x["text"] for x in t["titles"] if x["x1"] > lesson_charts.WIDTHS[0] + SLACK]
        assert not cut, f"{name}: a title runs past the chart's right edge: {cut}"


@pytest.mark.browser
@pytest.mark.parametrize("name", NAMES)
def test_every_text_reads_at_aa_contrast_on_the_plot_background(drawn, name):
    b = drawn[(name, lesson_charts.WIDTHS[0])]
    assert b["fonts"]
    for t in b["fonts"]:
        colour = _rgb(t["fill"])
        assert float(t["opacity"]) == 1.0, (name, t["text"])
        for bg in a11y.PLOT_BACKGROUNDS:
            assert a11y.contrast(colour, bg) >= a11y.AA_TEXT, f"{name}: {t['text']!r} in {colour} on {bg}"


def _look(trace) -> tuple:
    """What tells a trace apart besides its colour: its kind and mode, dash, marker symbol, bar pattern."""
    line = getattr(trace, "line", None)
    marker = getattr(trace, "marker", None)
    pattern = getattr(marker, "pattern", None) if marker is not None else None
    return (
        trace.type,
        getattr(trace, "mode", None),
        getattr(line, "dash", None) if line is not None else None,
        getattr(marker, "symbol", None) if marker is not None and trace.type == "scatter" else None,
        str(pattern.shape) if pattern is not None and pattern.shape is not None else None,
    )


@pytest.mark.parametrize("name", NAMES)
def test_series_are_told_apart_by_more_than_colour(name):
    """Traces named in the legend look different with the colour taken away (greyscale print, colour blindness)."""
    fig = FIGURES[name]
    shown = [tr for tr in fig.data if tr.name and tr.showlegend is not False and getattr(tr, "mode", None) != "text"]
    looks = {}
    for tr in shown:
        looks.setdefault(_look(tr), []).append(tr.name)
    assert all(len(names) == 1 for names in looks.values()), f"{name}: told apart by colour alone: {looks}"


def test_readable_darkens_a_colour_only_as_far_as_it_must():
    assert a11y.readable("#333333") == "#333333"
    orange = a11y.readable("#E69F00")
    assert all(a11y.contrast(orange, bg) >= 4.5 for bg in a11y.PLOT_BACKGROUNDS)
    assert a11y.contrast("#E69F00") == pytest.approx(2.25, abs=0.01)  # the orange the issue measured
    r, g, b = a11y._rgb(orange)
    assert r > g > b  # still an orange
