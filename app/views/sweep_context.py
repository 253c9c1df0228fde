"""The Sweep's context axis: each fixed batch × depth cell's decode-only speedup against the context it was measured at.

Rows are the Sweep grid's (`engine.bench.harness.bench` rows, each with its "context": tokens of the shared document
before every row, 0 = none). A cell's word at each context (faster, slower, level, can't tell) comes only from the one
rule over its interleaved rounds (app/views/sweep.py `cell_verdict`). Pure functions (no streamlit).
"""

from __future__ import annotations

import plotly.graph_objects as go

from .palette import ink
from .sweep import cell_verdict, fixed_chain

CELL_COLORS = ["#1f4fd1", "#b8006b", "#0a7d32", "#8a5a00", "#5b2a86", "#00707a", "#b35806", "#111111"]


def context_cells(rows: list[dict]) -> dict[tuple[int, int], list[dict]]:
    """(batch, depth) -> the fixed chain cell's rows at two contexts or more, in increasing context."""
    by_cell: dict[tuple[int, int], list[dict]] = {}
    for r in rows:
        if fixed_chain(r):
            by_cell.setdefault((r["batch"], r["depth"]), []).append(r)
    return {cell: sorted(here, key=lambda r: r.get("context", 0)) for cell, here in sorted(by_cell.items()) if len(here) > 1}


def _word(row: dict) -> str:
    v = cell_verdict(row)
    return v.kind if v is not None and v.rounds >= 2 else "one run: can't tell"


def context_lines(rows: list[dict]) -> list[str]:
    """One line per fixed cell measured at several contexts: its decode-only speedup at each, with the one rule's
    word ('batch 8, depth 3: 0.82× at 0 (slower), 1.21× at 4,096 (faster)')."""
    return [
        f"batch {batch}, depth {depth}: " + ", ".join(f"{r['speedup']:.2f}× at {r.get('context', 0):,} ({_word(r)})" for r in cells)
        for (batch, depth), cells in context_cells(rows).items()
    ]


def context_figure(rows: list[dict]) -> go.Figure:
    """Decode-only speedup against context (tokens per row, one category each), one line per fixed batch × depth cell
    measured at several contexts, the one rule's word in each point's hover; a dotted line at 1× (plain decoding)."""
    fig = go.Figure()
    contexts = sorted({r.get("context", 0) for r in rows})
    labels = {c: f"{c:,}" if c else "0 (none)" for c in contexts}
    for i, ((batch, depth), cells) in enumerate(context_cells(rows).items()):
        fig.add_scatter(
            x=[labels[r.get("context", 0)] for r in cells],
            y=[r["speedup"] for r in cells],
            mode="lines+markers+text",
            text=[f"{r['speedup']:.2f}×" for r in cells],
            textposition="top center",
            name=f"batch {batch}, k = {depth}",
            line={"color": CELL_COLORS[i % len(CELL_COLORS)], "width": 3},
            customdata=[_word(r) for r in cells],
            hovertemplate=f"batch {batch}, k = {depth}, context %{{x}}: %{{y:.2f}}× (%{{customdata}})<extra></extra>",
        )
    fig.add_hline(y=1.0, line={"dash": "dot", "color": "#8a8d99"}, annotation_text="plain decoding (1×)")
    fig.update_xaxes(
        title_text="context (tokens of the shared document per row)", type="category", categoryarray=[labels[c] for c in contexts]
    )
    fig.update_yaxes(title_text="speedup, decoding alone", rangemode="tozero")
    fig.update_layout(
        height=340,
        margin={"l": 50, "r": 20, "t": 30, "b": 40},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
    )
    return ink(fig)
