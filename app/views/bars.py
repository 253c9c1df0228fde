"""The charts' shared vocabulary, for every page that draws bars with whiskers (the Lessons, the Playground's H200
view): colours readable on both plot backgrounds, patterns and dashes so series are told apart by more than colour, the
frame every chart carries (title with machine and date), bars grouped with whiskers, and labels placed clear of each
other. No streamlit.
"""

from __future__ import annotations

import html
import math
import re
import textwrap

import plotly.graph_objects as go

from app.views.palette import INK, MODEBAR_PX, ink

# Okabe-Ito: blue, orange, sky blue, reddish purple, grey, vermillion (never paired with a green). These fill bars and
# draw lines; text is never drawn in them (orange on white is 2.25:1): labels use TEXT_COLOR, or readable(colour).
PLAIN_COLOR = "#8a8d99"


COLORS = ["#0072B2", "#E69F00", "#56B4E9", "#CC79A7", "#D55E00"]


WASTE_COLOR = "#CC79A7"


RIDGE_COLOR = "#D55E00"


TEXT_COLOR = INK  # 12.6:1 on white, 10.6:1 on plotly's plot background


# ... and each series is told apart by more than its colour: bar i gets PATTERNS[i], line i DASHES[i] and SYMBOLS[i].
PATTERNS = ("", "/", "x", ".", "\\", "+")


DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star")


LABEL_FONT = {"size": 11, "color": TEXT_COLOR}


# A label is drawn beside an unseen marker: plotly keeps text a marker's height off its point, clear of a whisker's
# cap in any font (with mode "text" alone a label's foot touched the cap under Streamlit's font).
LABEL_MARK = {"mode": "markers+text", "marker": {"size": 8, "opacity": 0}}


TICK_CHARS = 16  # a category's name wraps at this many characters


ROW_PX, HEADER_PX = 35, 38


MAX_LABEL = 160


def esc(text) -> str:
    """Plain text safe for a plotly string: tags escaped, length capped."""
    s = " ".join(str(text).split())
    return html.escape(s if len(s) <= MAX_LABEL else s[: MAX_LABEL - 1] + "…")


def table_height(rows: list) -> int:
    """A st.dataframe height that shows every row (no inner scroll) up to ~20 rows."""
    return HEADER_PX + ROW_PX * max(1, min(len(rows), 20))


TITLE_CHARS, LABEL_CHARS, MAX_SUBTITLE = 62, 90, 400  # per title line, per subtitle line (a chart ~560 px wide: a
# laptop with the sidebar open), and the subtitle's cap


LEGEND_ROW_CHARS = 80  # legend characters that fit on one row of a chart ~560 px wide


PHRASE_CHARS = 40  # a phrase this short stays on one line


def _lines(text: str, width: int, cap: int) -> list[str]:
    """Plain text cut into lines of about `width` characters, each escaped: a long subtitle wraps instead of running
    off the chart. A short phrase (between ", " or "; ", e.g. a machine's name) is never split across lines."""
    s = " ".join(str(text).split())
    s = s if len(s) <= cap else s[: cap - 1] + "…"
    phrases = re.split(r"(?<=[,;]) ", s)
    glued = " ".join(p.replace(" ", "\0") if len(p) <= PHRASE_CHARS else p for p in phrases)
    return [html.escape(line.replace("\0", " ")) for line in textwrap.wrap(glued, width, break_long_words=False)] or [""]


def _legend_rows(fig: go.Figure) -> int:
    names = [str(t.name) for t in fig.data if t.name and t.showlegend is not False]
    return max(1, -(-sum(len(n) + 6 for n in names) // LEGEND_ROW_CHARS)) if names else 0


def frame(fig: go.Figure, title: str, label: str, height: int = 380) -> go.Figure:
    """Title (the claim) and, under it, where and when it was measured, both wrapped to the chart's width; the legend
    at the foot of the chart, under the x-axis title (room is made for its rows, so neither covers the other)."""
    title_lines = [f"<b>{line}</b>" for line in _lines(title, TITLE_CHARS, MAX_SUBTITLE)]
    label_lines = [f"<sup>{line}</sup>" for line in _lines(label, LABEL_CHARS, MAX_SUBTITLE)] if label else []
    top = 40 + MODEBAR_PX + 24 * len(title_lines) + 20 * len(label_lines)
    bottom = 60 + 24 * _legend_rows(fig)
    fig.update_layout(
        title={
            "text": "<br>".join(title_lines + label_lines),
            "x": 0,
            "xanchor": "left",
            "y": 1.0,
            "yref": "container",
            "yanchor": "top",
            "pad": {"t": 18 + MODEBAR_PX},  # under plotly's toolbar, which shows at the top right on hover
        },
        height=height + top - 50 + bottom - 45,
        margin={"l": 55, "r": 20, "t": top, "b": bottom},
        legend={"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0.0, "x": 0},
        barmode="group",
    )
    return ink(fig)  # under Streamlit's theme too, every text at AA contrast


def label_above_whiskers(fig: go.Figure, xs: list, values: list[tuple[float, float | None, float | None]], text: list[str], **cell) -> None:
    """Each bar's label just above its whisker's top (the bar's own top where it has no whisker), as a text trace: a
    bar's own outside text sits at the bar's top, where the whisker runs through it. One bar per x (not grouped)."""
    tops = [hi if hi is not None else v for v, _, hi in values]
    fig.add_scatter(
        x=xs, y=tops, text=text, textposition="top center", textfont=LABEL_FONT, showlegend=False, hoverinfo="skip", **LABEL_MARK, **cell
    )
    fig.data[-1].update(cliponaxis=False)
    fig.update_yaxes(range=[0, 1.15 * max(tops, default=1.0) or 1.0], **cell)


def grouped_bars(fig: go.Figure, cats: list[str], series: list[dict], rule: float | None = None, **cell) -> list[list[float]]:
    """Bars of several series side by side in each category, drawn at numeric positions (category j at x = j, its
    ticks named) so that each bar's label can sit at the bar's own centre just above its whisker. `series`: dicts of
    name, values [(value, min, max) or None per category], color, and optionally text (a label per bar), hovertext,
    legendgroup, showlegend. Series i is hatched with PATTERNS[i]. `rule`: the y of a dotted reference line (1×) the
    caller draws; a label whose top sits just under it is lifted over it, never struck through. Returns each series'
    bar centres."""
    width = 0.8 / max(len(series), 1)
    centres, tops, ticks, labels = [], [0.0], list(range(len(cats))), []
    for i, sr in enumerate(series):
        vals = [v if v is not None and v[0] is not None else (None, None, None) for v in sr["values"]]
        xs = [j - 0.4 + width * (i + 0.5) for j in ticks]
        centres.append(xs)
        fig.add_bar(
            x=xs,
            y=[v for v, _, _ in vals],
            width=width * 0.95,
            offset=-width * 0.95 / 2,  # a bar with an offset is left out of plotly's own grouping: it stands at its x
            name=esc(sr["name"]),
            marker={"color": sr["color"], "pattern": {"shape": PATTERNS[i % len(PATTERNS)]}},
            error_y=whiskers([v if v[0] is not None else (0.0, None, None) for v in vals]),
            hovertext=sr.get("hovertext"),
            legendgroup=sr.get("legendgroup"),
            showlegend=sr.get("showlegend", True),
            **cell,
        )
        top = [(hi if hi is not None else v) for v, _, hi in vals]
        tops += [t for t in top if t is not None]
        keep = [k for k, t in enumerate(top) if t is not None]
        if sr.get("text") and keep:
            fig.add_scatter(
                x=[xs[k] for k in keep],
                y=[top[k] for k in keep],
                text=[sr["text"][k] for k in keep],
                **LABEL_MARK,
                textposition="top center",
                textfont=LABEL_FONT,
                showlegend=False,
                hoverinfo="skip",
                cliponaxis=False,
                **cell,
            )
            labels.append(fig.data[-1])
    names = ["<br>".join(textwrap.wrap(esc(c), TICK_CHARS)) for c in cats]  # wrapped, never tilted
    fig.update_xaxes(tickvals=ticks, ticktext=names, tickangle=0, range=[-0.5, len(cats) - 0.5], **cell)
    top = 1.18 * max(tops) or 1.0
    fig.update_yaxes(range=[0, top], **cell)
    for trace in labels if rule is not None else []:
        trace.y = lift(list(trace.y), rule, top)
    return centres


RULE_BAND = 0.15  # of the y-axis: a label starting this close under a reference line would be struck through by it


def lift(ys: list[float], rule: float, top: float) -> list[float]:
    """Label heights with those that start just under the reference line `rule` moved onto it, so that the label is
    drawn over the line, not through it (`top`: the y-axis' upper end)."""
    band = RULE_BAND * top
    return [rule if rule - band <= y < rule else y for y in ys]


def whiskers(values: list[tuple[float, float | None, float | None]]) -> dict | None:
    if all(lo is None for _, lo, _ in values):
        return None
    return {
        "type": "data",
        "symmetric": False,
        "array": [(hi - v) if hi is not None else 0.0 for v, _, hi in values],
        "arrayminus": [(v - lo) if lo is not None else 0.0 for v, lo, _ in values],
        "color": "#333",
        "thickness": 1.5,
    }


NARROW_PX = 490  # the plot's width on a 1024 px laptop with the sidebar open (a ~560 px chart, less the margins)


LABEL_PX = 40  # the room a bar's value ("≤1,360", "1.88×") needs over the bar, at 11 px


MOST = 4  # runs per panel: at NARROW_PX each has ~120 px, room for its name wrapped at TICK_CHARS


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
