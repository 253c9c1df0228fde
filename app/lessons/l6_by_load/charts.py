"""Lesson 6's charts: tokens/s against batch per policy, and the depth each policy chose at every step."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.lessons.kit.figures import (
    PLAIN_COLOR,
    SYMBOLS,
    decode_rate,
    esc,
    frame,
    tpot_ms,
    whiskers,
)
from app.lessons.kit.rows import batches, cell, policies

COLORS = ["#8a8d99", "#1f4fd1", "#f2a93b", "#b8006b", "#0a7d32"]


DASHES = ("dot", "solid", "dash", "dashdot", "longdash")  # plain decoding dotted, as before


def by_load_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    """Decoding-alone tokens/s of each policy against batch size (runs' range as whiskers), and time per output token
    against batch size."""
    rows = m["rows"]
    xs = sorted({r["batch"] for r in rows})
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("decoding tokens/s, all sequences (higher is better)", "time per output token, ms (lower is better)"),
    )
    for i, name in enumerate(dict.fromkeys(r["contender"] for r in rows)):
        cells = [next((r for r in rows if r["batch"] == b and r["contender"] == name), None) for b in xs]
        vals = [decode_rate(c) if c else (None, None, None) for c in cells]
        color = PLAIN_COLOR if i == 0 else COLORS[(i - 1) % len(COLORS)]
        style = {"color": color, "dash": DASHES[i % len(DASHES)], "width": 2.5}
        marker = {"symbol": SYMBOLS[i % len(SYMBOLS)], "size": 8}
        ok = [v for v in vals if v[0] is not None]
        fig.add_scatter(
            x=[str(b) for b in xs],
            y=[v for v, _, _ in vals],
            mode="lines+markers",
            name=esc(name),
            line=style,
            marker=marker,
            error_y=whiskers(ok) if len(ok) == len(vals) else None,
            legendgroup=str(i),
            row=1,
            col=1,
        )
        fig.add_scatter(
            x=[str(b) for b in xs],
            y=[tpot_ms(c) if c else None for c in cells],
            mode="lines+markers",
            name=esc(name),
            line=style,
            marker=marker,
            legendgroup=str(i),
            showlegend=False,
            row=1,
            col=2,
        )
    fig.update_xaxes(title_text="batch size", type="category")
    fig.update_yaxes(rangemode="tozero")
    return frame(fig, "Each policy against load: decoding speed and per-request latency", label, height=420)


def depth_figure(m: dict, label: str = "", plain: str = "plain decoding") -> go.Figure | None:
    """The depth chosen at each decode step: a panel per (batch size, speculating policy), batch sizes in rows and
    policies in columns, so no batch's line hides another's. None for an older recording without steps."""
    from app.lessons.kit.figures import COLORS as PALETTE
    from app.lessons.kit.figures import esc, frame

    rows = m["rows"]
    names = [n for n in policies(rows, plain) if any(r.get("steps") for r in rows if r["contender"] == n)]
    if not names:
        return None
    sizes = [b for b in batches(rows) if any((cell(rows, b, n) or {}).get("steps") for n in names)]
    titles = [esc(n) if i == 0 else "" for i in range(len(sizes)) for n in names]
    fig = make_subplots(rows=len(sizes), cols=len(names), subplot_titles=titles, shared_yaxes=True, vertical_spacing=0.08)
    for row, b in enumerate(sizes, start=1):
        style = row - 1
        line = {"color": PALETTE[style % len(PALETTE)], "width": 2.5, "shape": "hv", "dash": DASHES[style % len(DASHES)]}
        marker = {"symbol": SYMBOLS[style % len(SYMBOLS)], "size": 7}
        for col, name in enumerate(names, start=1):
            r = cell(rows, b, name)
            if r and r.get("steps"):
                depth = [d for _, d in r["steps"]]
                shown = {"legendgroup": str(b), "showlegend": col == 1, "row": row, "col": col}
                xs = list(range(1, len(depth) + 1))
                fig.add_scatter(x=xs, y=depth, mode="lines+markers", name=f"batch {b}", line=line, marker=marker, **shown)
        fig.update_yaxes(title_text=f"batch {b}: k", rangemode="tozero", row=row, col=1)
    fig.update_xaxes(title_text="decode step", row=len(sizes))
    return frame(fig, "The depth each policy chose at every decode step, at each batch size", label, height=120 + 150 * len(sizes))
