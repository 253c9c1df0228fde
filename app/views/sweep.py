"""The Sweep page's grid view and tables: measured rows (plain dicts) -> a plotly heatmap / table rows.

Rows come from `engine.bench.bench` (AR vs speculative per batch x depth cell) and
`engine.bench.pass_costs` (one target pass per tokens-per-pass); the curve of the latter is
roofline.pass_cost_figure. Nothing here calls streamlit.
"""

from __future__ import annotations

import plotly.graph_objects as go


def speedup_figure(rows: list[dict]) -> go.Figure:
    """Heatmap of measured speedup (speculative / AR tokens/s) over batch x depth; missing cells stay empty."""
    batches = sorted({r["batch"] for r in rows})
    depths = sorted({r["depth"] for r in rows})
    cell = {(r["batch"], r["depth"]): r for r in rows}
    z = [[cell[(b, d)]["speedup"] if (b, d) in cell else None for d in depths] for b in batches]
    text = [[f"{v:.2f}×" if v is not None else "" for v in row] for row in z]
    fig = go.Figure(go.Heatmap(
        z=z, x=[str(d) for d in depths], y=[str(b) for b in batches], text=text, texttemplate="%{text}",
        colorscale=[[0, "#b00020"], [0.5, "#f4f4f4"], [1, "#0a7d32"]], zmid=1.0,
        colorbar={"title": "speedup"}, hovertemplate="batch %{y}, depth %{x}: %{text}<extra></extra>",
    ))  # fmt: skip
    fig.update_xaxes(title_text="speculation depth k", type="category")
    fig.update_yaxes(title_text="batch size", type="category")
    fig.update_layout(height=320, margin={"l": 50, "r": 20, "t": 30, "b": 40})
    return fig


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def pass_table(rows: list[dict], peak_bandwidth: float, peak_flops: float) -> list[dict]:
    """One table row per measured pass, with achieved bandwidth and FLOP/s as % of the measured peaks."""
    return [
        {"batch": r["batch"], "tokens/row": r["new_tokens"], "tokens/pass": r["tokens_per_pass"],
         "ms": round(r["ms"], 2), "ms/token": round(r["ms_per_token"], 3),
         "GB/s": round(r["achieved_bandwidth"] / 1e9, 1), "GFLOP/s": round(r["achieved_flops"] / 1e9, 1),
         "% peak BW": round(100 * r["achieved_bandwidth"] / peak_bandwidth),
         "% peak FLOP/s": round(100 * r["achieved_flops"] / peak_flops)}
        for r in rows
    ]  # fmt: skip


def grid_table(rows: list[dict]) -> list[dict]:
    """One table row per grid cell: both lanes' tokens/s, the speedup, α, drafts per step, FLOPs vs AR."""
    return [
        {"batch": r["batch"], "depth": r["depth"], "tokens/pass": r["tokens_per_pass"],
         "AR tok/s": round(r["ar_tokens_per_s"], 1), "spec tok/s": round(r["spec_tokens_per_s"], 1),
         "speedup": round(r["speedup"], 2), "α": _round(r["alpha"], 2),
         "drafted/step": _round(r.get("drafted_per_step"), 2), "FLOPs × AR": _round(r["flops_ratio"], 2)}
        for r in rows
    ]  # fmt: skip
