"""The Predictor's KV check drawn: one machine's passes at several contexts against the roofline MODEL's time for them.

Rows are `engine.roofline.kv_check.KvRow`s (a measured pass, its spread over rounds, the model's time at the
machine's probed peaks with no overhead). The chart puts context on the x axis: per batch × new tokens per row, the
measured passes as markers with their rounds' spread and the model as a dashed line, so the slope of each is its KV
term. Pure functions (no streamlit): rows in, a plotly figure / table rows / text out.
"""

from __future__ import annotations

import statistics

import plotly.graph_objects as go

from app.views.bars import SYMBOLS
from engine.roofline.kv_check import KvGrowth, KvRecording, KvRow
from engine.roofline.predictor import model_error

from .palette import ink

SHAPE_COLORS = ["#1f4fd1", "#b8006b", "#0a7d32", "#8a5a00", "#5b2a86", "#00707a"]


def _shapes(rows: list[KvRow]) -> list[tuple[int, int]]:
    return sorted({(r.batch, r.new_tokens) for r in rows})


def kv_figure(rows: list[KvRow], title: str) -> go.Figure:
    """ms per pass against context (tokens of KV cache per row): per batch × new tokens, measured (markers, bars from
    the fastest to the slowest round) and the model (dashed, open markers)."""
    fig = go.Figure()
    for i, (batch, n) in enumerate(_shapes(rows)):
        here = sorted((r for r in rows if (r.batch, r.new_tokens) == (batch, n)), key=lambda r: r.context)
        color, name = SHAPE_COLORS[i % len(SHAPE_COLORS)], f"batch {batch} × {n} token{'s' if n > 1 else ''}"
        x = [r.context for r in here]
        fig.add_scatter(
            x=x,
            y=[r.measured_ms for r in here],
            mode="lines+markers",
            name=f"measured: {name}",
            line={"color": color, "width": 3},
            marker={"symbol": SYMBOLS[i % len(SYMBOLS)], "size": 9},  # each shape its own marker: not colour alone
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [r.high_ms - r.measured_ms for r in here],
                "arrayminus": [r.measured_ms - r.low_ms for r in here],
            },
            hovertemplate=f"{name}, context %{{x}}: %{{y:.2f}} ms measured<extra></extra>",
        )
        fig.add_scatter(
            x=x,
            y=[r.predicted_ms for r in here],
            mode="lines+markers",
            name=f"model: {name}",
            line={"color": color, "dash": "dash"},
            marker={"symbol": SYMBOLS[i % len(SYMBOLS)] + "-open", "size": 9},
            customdata=[r.ratio for r in here],
            hovertemplate=f"{name}, context %{{x}}: %{{y:.2f}} ms predicted (%{{customdata:.2f}}× the measured)<extra></extra>",
        )
    fig.update_xaxes(title_text="context (tokens of KV cache per row)", type="log", tickvals=sorted({r.context for r in rows}))
    fig.update_yaxes(title_text="ms per pass", rangemode="tozero")
    fig.update_layout(
        title={"text": title, "font": {"size": 14}},
        height=420,
        margin={"l": 50, "r": 20, "t": 60, "b": 40},
        legend={"orientation": "h", "yanchor": "top", "y": -0.18, "x": 0},
    )
    return ink(fig)


def kv_table(rows: list[KvRow]) -> list[dict]:
    """One table row per pass: measured (and its rounds' range), the model, their ratio, the KV cache's share of bytes."""
    return [
        {
            "context": r.context,
            "batch": r.batch,
            "tokens/row": r.new_tokens,
            "measured ms": round(r.measured_ms, 2),
            "rounds' range ms": f"{r.low_ms:.2f}–{r.high_ms:.2f}",
            "model ms": round(r.predicted_ms, 2),
            "model ÷ measured": round(r.ratio, 2),
            "KV share of bytes": f"{r.kv_share:.0%}",
            "model's bound": r.bound,
        }
        for r in sorted(rows, key=lambda r: (r.context, r.batch, r.new_tokens))
    ]


def ratio_line(rows: list[KvRow]) -> str:
    """'Model ÷ measured, the median over the passes at each context: 0.62 at 256 (error 38%), 0.55 at 1,024 (...)...',
    the error being the predictor's usual one, the median of |model / measured − 1|."""
    parts = []
    for c in sorted({r.context for r in rows}):
        here = [r for r in rows if r.context == c]
        error = model_error([r.predicted_ms for r in here], [r.measured_ms for r in here])
        parts.append(f"{statistics.median(r.ratio for r in here):.2f} at {c:,} (error {error:.0%})")
    return (
        "Model ÷ measured, the median over the passes at each context: "
        + ", ".join(parts)
        + " (1 = exact; below 1 the model is faster than the machine; error: the median of |model ÷ measured − 1|)."
    )


def growth_lines(growth: list[KvGrowth]) -> list[str]:
    """Per batch × new tokens: what the longer context added, measured and modelled (the KV term alone)."""
    lines = []
    for g in growth:
        ratio = f"the model's is {g.ratio:.2f}× the measured" if g.ratio is not None else "the measured time did not grow"
        lines.append(
            f"batch {g.batch} × {g.new_tokens} token{'s' if g.new_tokens > 1 else ''}: from {g.short:,} to {g.long:,} tokens of "
            f"context the pass grew by {g.measured_ms:.2f} ms measured and {g.predicted_ms:.2f} ms in the model: {ratio}."
        )
    return lines


def recording_label(rec: KvRecording, here: bool = False) -> str:
    """'this CPU, 2026-12-06' for a measurement made just now on this CPU (`here`); any recording by its machine's
    name ('Intel(R) Xeon(R) Processor (2 threads), 2026-12-05', 'NVIDIA H200, 2026-12-06'): a shipped CPU recording
    was made on whatever machine recorded it, rarely the one serving the page."""
    return f"this CPU, {rec.date}" if here and rec.device == "cpu" else f"{rec.machine}, {rec.date}"


def recording_caption(rec: KvRecording) -> str:
    """Where, when and how a KV check was measured, with the peaks its model used (one line)."""
    probe = "the quick probe" if rec.quick_probe else "the full probe (python -m engine probe)"
    return (
        f"📼 Recorded on {rec.machine}, {rec.dtype}, {rec.date} (UTC), the {rec.backend} backend: {rec.model_name}; "
        f"each pass the median of {rec.rounds} interleaved round(s) of {rec.repeats} passes ({rec.note}). Model: the "
        f"roofline at peaks from {probe}, {rec.roof.bandwidth / 1e9:.1f} GB/s and {rec.roof.flops / 1e9:.0f} GFLOP/s, no "
        f"overhead added; {rec.costs.kv_bytes_per_token / 1e3:.1f} kB of KV cache per token. Source: {rec.source}."
    )
