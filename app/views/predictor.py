"""The Predictor page's figures and tables: the roofline MODEL of engine/roofline/predictor.py drawn, and measurements over it.

Pure functions (no streamlit): numbers in, plotly figures / table rows / text out. Every figure says in its
title that the lines are a model; measured points are drawn as markers and named with their machine.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import plotly.graph_objects as go

from engine.costs import ModelCosts, expected_tokens_per_step, ridge_tokens_with_kv
from engine.roofline.predictor import FLOOR_LABELS, Roof, SpeedupGrid, floor_ms, model_error, pass_ms, ridge_tokens_per_pass, speedup

from .bars import frame
from .palette import speedup_scale

MODEL_LABEL = "model, not a measurement"
LAYOUT_COLORS = {"rows": "#1f4fd1", "tokens": "#f2a93b"}
FLOOR_COLORS = {"graph": "#0a7d32", "eager": "#b8006b"}
POINT_COLORS = ["#111111", "#8a5a00", "#5b2a86", "#00707a"]


@dataclass(frozen=True)
class MeasuredSeries:
    """Measured passes and the model's time for each of them (same batch, tokens, context, head positions)."""

    label: str  # e.g. "measured on NVIDIA H200, CUDA graph (2026-11-30)"
    tokens: tuple[int, ...]  # tokens per pass
    ms: tuple[float, ...]
    predicted: tuple[float, ...]
    detail: tuple[str, ...] = ()  # per point, e.g. "batch 8 × 4 tokens, context 0"

    @property
    def error(self) -> float:
        """Median |predicted / measured - 1|."""
        return model_error(list(self.predicted), list(self.ms))

    @property
    def ratio(self) -> float:
        """Median predicted / measured (below 1: the model is faster than the machine)."""
        return statistics.median(p / m for p, m in zip(self.predicted, self.ms, strict=True))


def token_grid(top: int = 8192, per_octave: int = 4) -> list[int]:
    """Integer tokens-per-pass values from 1 to `top`, about evenly spaced on a log axis."""
    steps = int(math.log2(top) * per_octave)
    return sorted({round(2 ** (i / per_octave)) for i in range(steps + 1)})


def pass_time_figure(
    costs: ModelCosts,
    roof: Roof,
    context: int,
    floor: str,
    title: str,
    measured: list[MeasuredSeries] = (),
    floors: dict[str, float] | None = None,
    top: int = 8192,
) -> go.Figure:
    """Predicted time of one pass vs tokens per pass (log-log): one row of n tokens (a verify pass) and n rows
    of one token (a decode batch), each with the `floor` overhead added; the overheads alone as horizontal
    lines (no pass costs less: the floors); the ridge as a
    vertical line; measured passes as markers, with the model's time for the same passes as open markers."""
    xs = token_grid(top)
    fig = go.Figure()
    layouts = {
        "rows": ("1 row × n tokens (verify pass)", lambda n: (1, n)),
        "tokens": ("n rows × 1 token (decode batch)", lambda n: (n, 1)),
    }
    for key, (name, shape) in layouts.items():
        ys = [pass_ms(costs, roof, *shape(n), context, floor) for n in xs]
        fig.add_scatter(
            x=xs,
            y=ys,
            mode="lines",
            name=f"model: {name}",
            line={"color": LAYOUT_COLORS[key], "width": 3, "dash": "solid" if key == "rows" else "dash"},  # not colour alone
            hovertemplate="%{x} tokens/pass: %{y:.3g} ms (model)<extra></extra>",
        )
    bare = [pass_ms(costs, roof, 1, n, context, "none") for n in xs]
    fig.add_scatter(
        x=xs,
        y=bare,
        mode="lines",
        name="model: roofline alone (no overhead), 1 row",
        line={"color": LAYOUT_COLORS["rows"], "dash": "dot", "width": 1},
        hovertemplate="%{x} tokens/pass: %{y:.3g} ms (roofline)<extra></extra>",
    )
    for kind, ms in (floors or {}).items():  # lines, not add_hline: its annotations misplace on a log axis
        if ms > 0:
            fig.add_scatter(
                x=[xs[0], xs[-1]],
                y=[ms, ms],
                mode="lines",
                name=f"{FLOOR_LABELS.get(kind, kind)} {ms:.2f} ms",
                line={"color": FLOOR_COLORS.get(kind, "#8a8d99"), "dash": "dash", "width": 1.5},
                hovertemplate=f"{FLOOR_LABELS.get(kind, kind)}: {ms:.2f} ms<extra></extra>",
            )
    _add_ridge(fig, ridge_tokens_per_pass(costs, roof), top)
    _add_kv_ridge(fig, ridge_tokens_with_kv(costs, roof.flops, roof.bandwidth, context, 1), context, top)
    _add_measured(fig, measured)
    fig.update_xaxes(type="log", title_text="tokens per pass (batch × tokens per row)", tickvals=[4**i for i in range(8) if 4**i <= top])
    fig.update_yaxes(type="log", title_text="ms per pass", dtick=1)  # powers of ten only: no crowded minor labels
    return frame(fig, title, MODEL_LABEL, height=400)  # the title wrapped to the chart, the legend under the axis title


def _add_ridge(fig: go.Figure, n_star: float, top: int) -> None:
    """The ridge as a labelled vertical line, where it falls on the plot."""
    if 1 <= n_star <= 10 * top:
        fig.add_vline(x=n_star, line_dash="dash", line_color="#b00020")
        fig.add_annotation(
            x=math.log10(n_star),
            y=0.02,
            yref="paper",
            text=f"ridge ≈ {n_star:.0f} tokens/pass (weights only)",
            showarrow=False,
            font={"color": "#b00020"},
            xanchor="left",
            yanchor="bottom",
        )


def _add_kv_ridge(fig: go.Figure, n_star: float, context: int, top: int) -> None:
    """The ridge of a decode batch (rows of one token) counting each row's KV cache at `context`: a second line where
    it falls on the plot, a note where no batch reaches it."""
    if not context:
        return
    if math.isinf(n_star) or n_star > 10 * top:
        fig.add_annotation(
            x=1.0,
            y=0.12,
            xref="paper",
            yref="paper",
            text=f"with each row's KV at context {context:,}, a batch of one-token rows never reaches the ridge",
            showarrow=False,
            font={"color": "#b00020"},
            bgcolor="rgba(255,255,255,0.85)",
            xanchor="right",
        )
        return
    fig.add_vline(x=n_star, line_dash="dot", line_color="#b00020")
    fig.add_annotation(
        x=math.log10(n_star),
        y=0.12,
        yref="paper",
        text=f"ridge with KV at context {context:,}, one-token rows ≈ {n_star:,.0f}",
        showarrow=False,
        font={"color": "#b00020"},
        bgcolor="rgba(255,255,255,0.85)",
        xanchor="left",
        yanchor="bottom",
    )


def _add_measured(fig: go.Figure, measured: list[MeasuredSeries]) -> None:
    """Measured passes as markers, with the model's time for the same passes as open markers."""
    for i, series in enumerate(measured):
        color = POINT_COLORS[i % len(POINT_COLORS)]
        detail = list(series.detail) or [""] * len(series.ms)
        fig.add_scatter(
            x=list(series.tokens),
            y=list(series.ms),
            mode="markers",
            name=series.label,
            marker={"color": color, "size": 9},
            customdata=list(zip(series.predicted, detail, strict=True)),
            hovertemplate="%{x} tokens/pass, %{customdata[1]}: measured %{y:.3g} ms, model %{customdata[0]:.3g} ms<extra></extra>",
        )
        fig.add_scatter(
            x=list(series.tokens),
            y=list(series.predicted),
            mode="markers",
            name=f"model at the passes {series.label.removeprefix('measured ')}",
            marker={"color": color, "size": 9, "symbol": "circle-open"},
            hoverinfo="skip",
        )


def speedup_heatmap(grid: SpeedupGrid, title: str) -> go.Figure:
    """Predicted speedup over batch (columns) × depth (rows); blue wins, orange loses (colour-blind safe, and each
    cell prints its number); a black outline marks each depth's crossover, the first batch where speculation
    falls below plain decoding; empty cells do not fit the GPU's memory."""
    x = [str(b) for b in grid.batches]
    y = [str(d) for d in grid.depths]
    z = [list(row) for row in grid.values]
    text = [["" if v is None else f"{v:.2f}×" for v in row] for row in z]
    finite = [v for row in z for v in row if v is not None]
    top = max([2.0, *finite])
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=x,
            y=y,
            text=text,
            texttemplate="%{text}",
            zmin=0.0,
            zmax=top,
            zmid=1.0,
            colorscale=speedup_scale(1 / top),
            colorbar={"title": "speedup"},
            hovertemplate="batch %{x}, depth %{y}: %{text} (model)<extra></extra>",
        )
    )
    for i, depth in enumerate(grid.depths):  # category axes: cell centres sit at integer positions
        batch = grid.crossover[depth]
        if batch is not None:
            j = grid.batches.index(batch)
            fig.add_shape(
                type="rect",
                x0=j - 0.5,
                x1=j + 0.5,
                y0=i - 0.5,
                y1=i + 0.5,
                xref="x",
                yref="y",
                line={"color": "#111", "width": 3},
                name=f"crossover, depth {depth}",
            )
    fig.update_xaxes(title_text="batch size", type="category")
    fig.update_yaxes(title_text="speculation depth k", type="category")
    fig.update_layout(showlegend=False)
    return frame(fig, title, MODEL_LABEL, height=340)  # the title wrapped to the chart's width (it ran off a laptop's)


def crossover_lines(grid: SpeedupGrid) -> list[str]:
    """One sentence per depth, computed from the grid: where it falls below plain decoding, or that it does not."""
    lines = []
    for depth, row in zip(grid.depths, grid.values, strict=True):
        batch = grid.crossover[depth]
        fitting = [(b, v) for b, v in zip(grid.batches, row, strict=True) if v is not None]
        if not fitting:
            lines.append(f"depth {depth}: no batch in the grid fits the GPU's memory")
        elif batch is None:
            best = max(fitting, key=lambda bv: bv[1])
            lines.append(f"depth {depth}: stays above plain decoding up to batch {fitting[-1][0]} (best {best[1]:.2f}× at batch {best[0]})")
        else:
            value = row[grid.batches.index(batch)]
            lines.append(f"depth {depth}: falls below plain decoding at batch {batch} ({value:.2f}×)")
    return lines


def series_summary(series: MeasuredSeries) -> str:
    """'<label>: N passes, model error (median |model/measured − 1|) 24%; the model is 0.76× the measured time'."""
    side = "faster than the machine" if series.ratio < 1 else "slower than the machine"
    return (
        f"{series.label}: {len(series.ms)} passes; model error (median |model / measured − 1|) "
        f"**{series.error:.0%}**; median model / measured = {series.ratio:.2f} (the model is {side})"
    )


def error_table(rows) -> list[dict]:
    """The recorded-run check (engine.roofline.recordings.check rows) as table rows for the page."""

    def pct(v):
        return None if v is None else f"{v:.0%}"

    return [
        {
            "device": r.device,
            "model shape": r.shape,
            "mode": r.mode,
            "passes": r.points,
            "error, data-sheet peaks": pct(r.error_sheet),
            "error, the run's probed peaks": pct(r.error_probed),
            "model / measured (median)": None if r.ratio_sheet is None else round(r.ratio_sheet, 2),
            "recorded": r.date,
            "file": r.source,
        }
        for r in rows
    ]


def kv_ridge_text(costs: ModelCosts, roof: Roof, context: int, alpha: float, c: float, floor: str, batch: int = 64, depth: int = 4) -> str:
    """Why a cell past the weights-only ridge can still win (e.g. 2.31× at batch 64, k = 4, 320 tokens per pass, on an
    H100 SXM for the 8B shape at a 1,024-token context): the ridge counting each row's KV cache, and the two passes'
    predicted times, in words computed from the model."""
    tokens = batch * (depth + 1)
    weights_only = ridge_tokens_per_pass(costs, roof)
    verify_ridge = ridge_tokens_with_kv(costs, roof.flops, roof.bandwidth, context, depth + 1)
    plain_ridge = ridge_tokens_with_kv(costs, roof.flops, roof.bandwidth, context, 1)
    kv_gb = batch * costs.kv_bytes_per_token * (context + depth + 1) / 1e9
    attention = costs.forward_flops(1, 1, context) - costs.forward_flops(1, 1, 0)
    per_kv_byte = attention / (costs.kv_bytes_per_token * context) if context else 0.0
    t_plain, t_verify = pass_ms(costs, roof, batch, 1, context, floor), pass_ms(costs, roof, batch, depth + 1, context, floor)
    e_tokens = expected_tokens_per_step(alpha, depth)
    value = speedup(costs, roof, alpha, depth, c, batch, context, floor)

    def at(x: float) -> str:
        return "never, at any batch" if math.isinf(x) else f"at {x:,.0f} tokens per pass"

    side = "past" if tokens > weights_only else "below"
    flops_ms = 1000.0 * costs.forward_flops(batch, depth + 1, context) / roof.flops
    bytes_ms = 1000.0 * costs.forward_bytes(batch, depth + 1, context) / roof.bandwidth
    bound = (
        f"arithmetic takes {flops_ms:.2f} ms at peak against {bytes_ms:.2f} ms to stream its bytes: "
        + (f"only {flops_ms / bytes_ms:.2f}× past where the two balance, " if flops_ms > bytes_ms else "still memory-bound, ")
        + f"and both passes also pay the same {floor_ms(costs, floor):.2f} ms overhead. "
    )
    kv = (
        f"At a {context:,}-token context the {batch} rows' KV caches add {kv_gb:,.1f} GB to the {costs.weight_bytes / 1e9:.1f} GB "
        f"of weights every pass, and attention does only about {per_kv_byte:.0f} FLOPs per KV byte, far below the GPU's "
        f"ridge point of {roof.ridge_point:.0f} FLOPs per byte. Counting weights and KV, a pass of {depth + 1}-token rows "
        f"turns compute-bound {at(verify_ridge)}, and plain one-token rows {at(plain_ridge)}. "
        if context
        else "At context 0 no KV cache is read, so the weights-only ridge is the whole story. "
    )
    return (
        f"**Why batch {batch} at depth {depth} reads {value:.2f}×** ({tokens} tokens per verify pass, {side} the weights-only "
        f"ridge of {weights_only:.0f} tokens per pass): the ridge counts the bytes a pass moves, and a pass moves more than weights. "
        + kv
        + f"The {tokens}-token verify pass's "
        + bound
        + f"So the plain batch-{batch} step is predicted at {t_plain:.2f} ms and the {tokens}-token verify pass at "
        f"{t_verify:.2f} ms ({t_verify / t_plain:.2f}× a plain step), and the {e_tokens:.2f} tokens a step keeps at α {alpha:.2f} "
        f"carry the speedup: {e_tokens:.2f} × {t_plain:.2f} / ({depth} × {c:.2f} × {t_plain:.2f} + {t_verify:.2f}) = "
        f"{value:.2f}×" + (". Long contexts keep large passes memory-bound" if context else "") + " (model, not a measurement)."
    )


def ridge_sentence(costs: ModelCosts, roof: Roof, context: int, depth: int = 4) -> str:
    """The ridge in tokens per pass counting the weights alone and counting each row's KV cache at `context`."""
    alone = ridge_tokens_per_pass(costs, roof)
    if not context:
        return f"Ridge: {alone:.0f} tokens per pass (context 0: weights only, no KV cache read)."
    parts = []
    for n, what in ((depth + 1, f"rows of {depth + 1} tokens (a verify pass at k = {depth})"), (1, "rows of one token (plain decoding)")):
        ridge = ridge_tokens_with_kv(costs, roof.flops, roof.bandwidth, context, n)
        parts.append(f"{'never' if math.isinf(ridge) else f'{ridge:,.0f} tokens per pass'} for {what}")
    return (
        f"Ridge: {alone:.0f} tokens per pass counting the weights alone; counting each row's KV cache at context "
        f"{context:,} ({costs.kv_bytes_per_token * context / 1e6:,.1f} MB per row): " + " and ".join(parts) + " (model)."
    )
