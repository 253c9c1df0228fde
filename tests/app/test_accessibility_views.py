"""Accessibility of the pure views (issue 30, item 6); the browser test (test_browser.py) runs axe-core on every
page. Here: every token state's contrast, what a screen reader hears, the race's reduced-motion and keyboard
code, and heatmaps without red against green."""

from __future__ import annotations

import colorsys
import re

import pytest

from app.common import a11y
from app.views import race, tokens
from app.views.tokens import TOKEN_COLORS, TokenRecord

WHITE, STREAMLIT_GREY = (255, 255, 255), (240, 242, 246)  # page and secondary background


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    h = hex_colour.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def _luminance(rgb) -> float:
    def lin(c):
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg, bg) -> float:
    hi, lo = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _over(rgba, base):
    *c, a = rgba
    return tuple(a * x + (1 - a) * y for x, y in zip(c, base))


@pytest.mark.parametrize("kind", sorted(TOKEN_COLORS))
@pytest.mark.parametrize("page", [WHITE, STREAMLIT_GREY], ids=["white", "grey"])
def test_every_token_state_has_aa_contrast(kind, page):
    fg, bg = TOKEN_COLORS[kind]
    assert contrast(_rgb(fg), _over(bg, page)) >= 4.5


def test_no_token_style_fades_its_text():
    """Opacity below 1 on a token is how rejected drafts fell to 3.95:1."""
    for css in (tokens.STYLE, race._page()):
        for rule in re.findall(r"\.(?:tok-\w+|accepted|rejected|correction|bonus)[^{]*\{([^}]*)\}", css):
            assert "opacity" not in rule


def test_page_greys_have_aa_contrast():
    assert contrast(_rgb(a11y.CAPTION_GREY), STREAMLIT_GREY) >= 4.5
    assert contrast(_rgb(a11y.DISABLED_GREY), WHITE) >= 4.5
    assert contrast(_rgb(tokens.FLAG_COLOR), WHITE) >= 4.5


def _rec(kind: str) -> TokenRecord:
    return TokenRecord(
        seq=0, text="Paris", kind=kind, step=1, t_s=0.1, out_index=None if kind == "rejected" else 0, draft_prob=0.5, target_prob=0.4
    )


def test_token_states_are_said_not_only_shown():
    assert tokens.token_span(_rec("accepted")).startswith('<ins class="tok tok-acc"')
    assert tokens.token_span(_rec("rejected")).startswith('<del class="tok tok-rej"')
    for kind, word in tokens.SR_LABEL.items():
        assert f'<span class="sl-sr"> ({word})</span>' in tokens.token_span(_rec(kind))
    assert "sl-sr" not in tokens.token_span(_rec("plain"))
    assert '<span class="tok-mark" aria-hidden="true">↺</span>' in tokens.token_span(_rec("correction"))
    flagged = tokens.token_span(_rec("accepted"), diff=True)
    assert '<span aria-hidden="true">⚑</span><span class="sl-sr">first difference: </span>' in flagged


def test_scrolling_lanes_take_focus_and_have_names():
    lane = tokens.lane_html([[_rec("accepted")], [_rec("rejected")]], speculative=True)
    assert lane.count('tabindex="0" role="region" aria-label="speculative lane, sequence ') == 2


def test_the_race_honours_reduced_motion_and_the_keyboard():
    page = race.race_html([[_rec("plain")]], [[_rec("accepted"), _rec("rejected")]], 0.2, 0.1)
    assert '<html lang="en">' in page and "<title>Race replay</title>" in page
    assert "prefers-reduced-motion: reduce" in page and "if (REDUCED) { now = maxT; playing = false;" in page
    assert page.count('<button type="button"') == 3 and 'role="toolbar"' in page
    assert "ArrowRight" in page and "root.addEventListener('keydown'" in page
    assert "b.tabIndex = 0" in page and 'role="status"' in page
    assert '"accepted": "accepted draft"' in page  # the screen-reader words travel with the data
    for fg, _ in TOKEN_COLORS.values():
        assert fg in page
    assert "__" not in page.split("<script>")[0]  # every placeholder filled


def _hue(hex_colour: str) -> float:
    return colorsys.rgb_to_hsv(*(c / 255 for c in _rgb(hex_colour)))[0] * 360


def test_speedup_heatmaps_diverge_without_red_against_green():
    from app.views.predictor import speedup_heatmap
    from app.views.sweep import speedup_figure
    from engine.roofline.predictor import SpeedupGrid

    red_or_green = lambda h: h < 15 or h > 345 or 75 < h < 165
    grid = SpeedupGrid(batches=(1, 8), depths=(2, 4), values=((1.4, 0.8), (1.6, 0.6)), crossover={2: 8, 4: 8})
    rows = [{"batch": b, "depth": d, "speedup": v} for b, d, v in ((1, 2, 1.4), (8, 2, 0.8), (1, 4, 1.6), (8, 4, 0.6))]
    for fig in (speedup_heatmap(grid, "t"), speedup_figure(rows)):
        ends = [colour for _, colour in fig.data[0].colorscale]
        low, high = _hue(ends[0]), _hue(ends[-1])
        assert not red_or_green(low) and not red_or_green(high), ends  # orange below 1x, blue above
        assert fig.data[0].texttemplate == "%{text}"  # each cell prints its number too


def test_chart_text_colours_have_aa_contrast_on_both_plot_backgrounds():
    """Text on a lesson chart is drawn in TEXT_COLOR or a series colour made readable (a11y.readable); the
    browser test (test_chart_readability.py) reads every drawn text's colour back as well."""
    from app.views.bars import COLORS, PLAIN_COLOR, RIDGE_COLOR, TEXT_COLOR, WASTE_COLOR

    series = [*COLORS, PLAIN_COLOR, RIDGE_COLOR, WASTE_COLOR]
    for colour in [TEXT_COLOR, *(a11y.readable(c) for c in series)]:
        for bg in a11y.PLOT_BACKGROUNDS:
            assert a11y.contrast(colour, bg) >= 4.5, (colour, bg)
            assert a11y.contrast(colour, bg) == pytest.approx(contrast(_rgb(colour), _rgb(bg)))  # one formula
    assert a11y.contrast("#E69F00") < 4.5 and a11y.readable("#E69F00") != "#E69F00"  # the orange is never text as it is


def test_the_pages_line_charts_tell_series_apart_by_more_than_colour_and_draw_text_in_ink():
    """The Serving, Sweep and Predictor figures (not drawn through the lessons' frame): each line series has its own
    dash or marker, and the figure's own text is in the page's ink (AA contrast), not Streamlit's grey."""
    from app.views import kv_check, roofline
    from app.views.palette import INK
    from engine.roofline.kv_check import KV_RECORDING, kv_rows, read_kv_check

    passes = [
        {"batch": b, "tokens_per_pass": b * n, "ms": 5.0 + b * n, "ms_per_token": (5.0 + b * n) / (b * n)}
        for b in (1, 8)
        for n in (1, 2, 4)
    ]
    kv = kv_check.kv_figure(kv_rows(read_kv_check(KV_RECORDING)), "t")
    for fig in (roofline.pass_cost_figure(passes), kv):
        named = [t for t in fig.data if t.showlegend is not False and t.mode and "lines" in t.mode]
        looks = {(t.line.dash, t.marker.symbol) for t in named}
        assert len(named) >= 2 and len(looks) == len(named)
        assert fig.layout.font.color == INK and fig.layout.xaxis.tickfont.color == INK
