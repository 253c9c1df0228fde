"""Lesson 1's chart and table: a pass's time against the tokens it carries, by the one rule."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from app.lessons.kit import knee, noise
from app.lessons.kit.figures import (
    COLORS,
    LABEL_FONT,
    LABEL_MARK,
    PLAIN_COLOR,
    RIDGE_COLOR,
    frame,
    whiskers,
)
from engine import verdict as rule


# --- lesson 1: the room, and past it ------------------------------------------------------------
def memory_bound_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    """A pass's cost in one-token passes against the tokens it carries (log-log), with the rounds' range, the
    room's line (knee.ROOM× a one-token pass) and the line of a cost in step with the tokens (n tokens, n×)."""
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    base = rows[0]["ms"]
    xs = [r["tokens_per_pass"] for r in rows]
    kept = [noise.with_far(r.get("ms_runs")) for r in rows]
    vals = [times_one(r, rows[0]) for r in rows]  # the one rule's ratio and its 95% range, as the words and the claim
    far = [(r["tokens_per_pass"], r["ms_runs"]["values"][i] / base) for r, (_, idx) in zip(rows, kept) for i in idx]
    fig = go.Figure()
    fig.add_scatter(x=xs, y=xs, mode="lines", name="in step with the tokens (n tokens cost n×)", line={"color": PLAIN_COLOR, "dash": "dot"})
    fig.add_scatter(
        x=xs,
        y=[v for v, _, _ in vals],
        mode="lines+markers",
        name="measured: time ÷ a one-token pass over the paired rounds, whisker = its 95% range",
        line={"color": COLORS[0], "width": 3},
        error_y=whiskers(vals),
        hovertemplate="%{x} tokens per pass: %{y:.2f}× a one-token pass<extra></extra>",
    )
    # Each label off its whisker's end (beside the point it sat on the whisker), and off the room's line: under the
    # whisker for a pass inside the room, above it past the room.
    inside = [v < knee.ROOM for v, _, _ in vals]
    fig.add_scatter(
        x=xs,
        y=[(lo if lo is not None else v) if low else (hi if hi is not None else v) for (v, lo, hi), low in zip(vals, inside)],
        text=[f"{v:.2f}×" for v, _, _ in vals],
        **LABEL_MARK,  # an unseen marker: the label a marker's height off the whisker's cap
        textposition=["bottom center" if low else "top center" for low in inside],
        textfont=LABEL_FONT,
        showlegend=False,
        hoverinfo="skip",
        cliponaxis=False,
    )
    ends = [e for v, lo, hi in vals for e in (lo or v, hi or v)] + [xs[-1]]
    fig.update_yaxes(range=[math.log10(min(ends) / 1.3), math.log10(max(ends) * 1.3)])  # room for the labels
    if far:
        fig.add_scatter(
            x=[x for x, _ in far],
            y=[y for _, y in far],
            mode="markers",
            marker={"symbol": "x-open", "size": 10, "color": RIDGE_COLOR},
            name="a round far outside the others (kept in the rule)",
        )
    room = knee.room_tokens(xs, [r["ms"] for r in rows])
    fig.add_scatter(  # the room's line, named in the legend: its label on the plot sat on the labels and whiskers
        x=[xs[0], xs[-1]],
        y=[knee.ROOM] * 2,
        mode="lines",
        line={"color": RIDGE_COLOR, "dash": "dash"},
        name=f"{knee.ROOM}× a one-token pass: the room reaches {room} token{'s' if room != 1 else ''} here",
        hoverinfo="skip",
    )
    fig.update_xaxes(type="log", title_text="tokens per pass (batch 1)", tickvals=xs)  # plotly's minor log ticks crowd
    fig.update_yaxes(type="log", title_text="time ÷ a one-token pass", tickvals=[0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000])
    return frame(fig, "Inside the room a pass costs about a one-token pass; past it, cost grows with the tokens", label, height=420)


def memory_bound_table(m: dict) -> list[dict]:
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    out = []
    for prev, r in zip([None, *rows], rows):
        sp, far = noise.with_far(r.get("ms_runs"))
        cheaper = prev is not None and r["ms"] < prev["ms"]
        out.append(
            {
                "tokens per pass": r["tokens_per_pass"],
                "ms (median)": round(r["ms"], 2),
                "rounds (ms)": (f"{sp['min']:.1f}–{sp['max']:.1f}" if sp else "one round")
                + (f", round {', '.join(str(i + 1) for i in far)} far from the others" if far else ""),
                "× one-token pass": round(times_one(r, rows[0])[0], 2),
                "note": "same within noise as the smaller pass" if cheaper else "",
                "GFLOP": round(r["flops"] / 1e9, 2),
                "FLOP/byte": round(r["flops"] / r["bytes"], 2) if r["bytes"] else None,
            }
        )
    return out


def times_one(row: dict, one: dict) -> tuple[float, float | None, float | None]:
    """A pass's time ÷ the one-token pass's, by the one rule over their paired rounds (engine/verdict.py: the
    typical ratio and its 95% range), the number the chart, the table, the words, the prediction and the claim all
    show; the ratio of the medians where a row has one round."""
    a, b = row.get("ms_runs"), one.get("ms_runs")
    if a and b and len(a["values"]) > 1 and len(b["values"]) > 1:
        v = rule.judge(a["values"], b["values"])
        return v.ratio, v.lo, v.hi
    return row["ms"] / one["ms"], None, None
