"""The pass-cost curve: measured time of ONE target forward vs tokens per pass, with the ridge point.

Input rows come from `engine.bench.pass_costs` (each a measured median). While a pass is memory-bound
its time hardly grows with tokens per pass: every token rides along with the same weight traffic.
Past the ridge point (peak FLOP/s / peak bandwidth, converted to tokens per pass for this model) it
grows linearly: the pass is compute-bound and extra draft tokens cost real time.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

COLORS = ["#1f4fd1", "#f2a93b", "#0a7d32", "#b8006b", "#8a8d99"]


def pass_cost_figure(rows: list[dict], ridge_tokens: float | None = None) -> go.Figure:
    """Left: ms per pass; right: ms per token. One line per batch size; x = tokens per pass (log)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("time of one target pass", "time per token in the pass"))
    batches = sorted({r["batch"] for r in rows})
    for i, batch in enumerate(batches):
        pts = sorted((r for r in rows if r["batch"] == batch), key=lambda r: r["tokens_per_pass"])
        x = [r["tokens_per_pass"] for r in pts]
        color = COLORS[i % len(COLORS)]
        name = f"batch {batch} × new tokens"
        fig.add_scatter(x=x, y=[r["ms"] for r in pts], mode="lines+markers", name=name, line={"color": color},
                        legendgroup=name, row=1, col=1,
                        hovertemplate="%{x} tokens/pass: %{y:.1f} ms<extra></extra>")  # fmt: skip
        fig.add_scatter(x=x, y=[r["ms_per_token"] for r in pts], mode="lines+markers", name=name,
                        line={"color": color}, legendgroup=name, showlegend=False, row=1, col=2,
                        hovertemplate="%{x} tokens/pass: %{y:.2f} ms/token<extra></extra>")  # fmt: skip
    if ridge_tokens:
        for col in (1, 2):
            fig.add_vline(x=ridge_tokens, line_dash="dash", line_color="#b00020", row=1, col=col)
        # Annotations on a log axis take log10 of the data value (shapes such as add_vline do not).
        fig.add_annotation(x=math.log10(ridge_tokens), y=0.97, yref="paper", xref="x",
                           text=f"ridge ≈ {ridge_tokens:.0f} tokens/pass", showarrow=False, font={"color": "#b00020"},
                           xanchor="left", yanchor="top")  # fmt: skip
    fig.update_xaxes(type="log", title_text="tokens per pass (batch × tokens per row)")
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="ms / token", type="log", row=1, col=2)
    fig.update_layout(height=380, margin={"l": 50, "r": 20, "t": 60, "b": 40},
                      legend={"orientation": "h", "yanchor": "bottom", "y": 1.08, "x": 0})  # fmt: skip
    return fig


def memory_bound_span(rows: list[dict], tolerance: float = 1.25) -> int | None:
    """The largest tokens-per-pass (at batch 1 if measured, else the smallest batch) whose pass costs at
    most `tolerance` x the single-token pass: how many tokens verification gets almost for free."""
    if not rows:
        return None
    batch = min(r["batch"] for r in rows)
    pts = sorted((r for r in rows if r["batch"] == batch), key=lambda r: r["tokens_per_pass"])
    base = pts[0]["ms"]
    free = [r["tokens_per_pass"] for r in pts if r["ms"] <= tolerance * base]
    return max(free) if free else None
