"""How the GPU panel's re-timed bar chart (app/lessons/retime.py `figure`) is laid out so that it reads at a narrow
chart's width: its runs cut into panels of at most MOST (each name wraps onto two or three lines and still fits), a
bar's value written over it only where every bar has room for one, a log axis with 1-2-5 ticks (its minor labels
crowd one another), each series' hatch, hover and wrapped legend name, and a foot tall enough for the tick names and
the legend. Pure: plotly objects in and out, no streamlit.
"""

from __future__ import annotations

import math
import textwrap

import plotly.graph_objects as go

from app.lessons.figures import esc

NARROW_PX = 680  # the plot's width in a narrow laptop window's chart (760 px, less the margins)
LABEL_PX = 40  # the room a bar's value ("≤1,360", "1.88×") needs over the bar, at 11 px
MOST = 6  # runs per panel: at NARROW_PX each has 110 px, room for its name wrapped at figures.TICK_CHARS
LEGEND_CHARS = 90  # a legend entry wraps at this many characters, not off the chart's right edge
TICK_LINE_PX, LEGEND_LINE_PX, FOOT_PX = 15, 22, 40
HOVER = "%{hovertext}<extra></extra>"


def chunks(items: list, most: int = MOST) -> list[list]:
    """`items` cut into the fewest runs of at most `most`, as even as can be, in order."""
    size = -(-len(items) // -(-len(items) // most)) if items else 1
    return [items[i : i + size] for i in range(0, len(items), size)] or [[]]


def labelled(categories: int, series: int) -> bool:
    """Whether every bar of a panel has room for its value over it at the narrow width."""
    return 0.8 / max(series, 1) * NARROW_PX / max(categories, 1) >= LABEL_PX


def log_axis(values: list[float]) -> dict:
    """A log y axis over `values` with 1-2-5 ticks, its top a third above the tallest bar for the labels over it."""
    lo, hi = math.log10(min(values) / 1.5), math.log10(max(values))
    decades = range(math.floor(lo), math.ceil(hi) + 1)
    ticks = [t for t in (m * 10**e for e in decades for m in (1, 2, 5)) if 10**lo <= t <= 2 * max(values)]
    return {"type": "log", "range": [lo, hi + 0.3 * (hi - lo) + 0.05], "tickvals": ticks, "ticktext": [f"{t:,g}" for t in ticks]}


def legend_name(name: str) -> str:
    """A legend entry wrapped onto lines of LEGEND_CHARS, escaped."""
    return "<br>".join(textwrap.wrap(esc(name), LEGEND_CHARS))


def dress(bars: list, series: list[dict]) -> None:
    """Each bar trace of grouped_bars as its series asks: hatch, wrapped legend name, hover from its hovertext, its full
    per-bar text (kept off the chart: textposition none) and, where given, customdata."""
    for bar, sr in zip(bars, series, strict=True):
        bar.update(name=legend_name(sr["name"]), marker_pattern_shape=sr["hatch"], hovertemplate=HOVER)
        bar.update(text=sr["full"], textposition="none", customdata=sr.get("customdata"))


def fit_foot(fig: go.Figure, tick_lines: int) -> go.Figure:
    """Grow the chart's foot (after figures.frame) so that the bottom panel's tick names and every legend line fit
    under the plot, one above the other."""
    lines = sum(1 + str(t.name).count("<br>") for t in fig.data if t.name and t.showlegend is not False)
    need = FOOT_PX + TICK_LINE_PX * tick_lines + LEGEND_LINE_PX * lines
    grow = max(0, need - fig.layout.margin.b)
    fig.update_layout(margin_b=fig.layout.margin.b + grow, height=fig.layout.height + grow)
    return fig
