"""The pass-cost curve: measured time of ONE target forward vs tokens per pass, with the ridge point,
and what share of this machine's probed peaks each pass reached.

Input rows come from `engine.decoding.passcurve.pass_costs` (each a measured median). The roofline says a pass
whose arithmetic intensity is below the ridge point (peak FLOP/s / peak bandwidth, converted to tokens
per pass for this model) is limited by memory traffic, and above it by arithmetic. A small pass can be
limited by neither: on a CPU, or on a GPU stack that launches one kernel per operation, per-operation
latency and overhead (dispatch, kernel launches, thread synchronisation) can take most of its time,
so it streams well under the peak bandwidth. `regime` names which of the three a measured pass shows,
from its achieved bandwidth and FLOP/s: SpecLab's counted bytes and FLOPs (engine/costs.py) over the
measured time, not hardware counters.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.views.bars import DASHES, SYMBOLS, frame
from app.views.palette import ink

COLORS = ["#1f4fd1", "#f2a93b", "#0a7d32", "#b8006b", "#8a8d99"]


def pass_cost_figure(rows: list[dict], ridge_tokens: float | None = None) -> go.Figure:
    """Left: ms per pass; right: ms per token. One line per batch size; x = tokens per pass (log)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("time of one target pass", "time per token in the pass"))
    batches = sorted({r["batch"] for r in rows})
    for i, batch in enumerate(batches):
        pts = sorted((r for r in rows if r["batch"] == batch), key=lambda r: r["tokens_per_pass"])
        x = [r["tokens_per_pass"] for r in pts]
        color = COLORS[i % len(COLORS)]
        style = {"line": {"color": color, "dash": DASHES[i % len(DASHES)]}, "marker": {"symbol": SYMBOLS[i % len(SYMBOLS)]}}
        name = f"batch {batch:g} × new tokens"
        fig.add_scatter(
            x=x,
            y=[r["ms"] for r in pts],
            mode="lines+markers",
            name=name,
            **style,
            legendgroup=name,
            row=1,
            col=1,
            hovertemplate="%{x} tokens/pass: %{y:.1f} ms<extra></extra>",
        )
        fig.add_scatter(
            x=x,
            y=[r["ms_per_token"] for r in pts],
            mode="lines+markers",
            name=name,
            **style,
            legendgroup=name,
            showlegend=False,
            row=1,
            col=2,
            hovertemplate="%{x} tokens/pass: %{y:.2f} ms/token<extra></extra>",
        )
    if ridge_tokens:
        for col in (1, 2):
            fig.add_vline(x=ridge_tokens, line_dash="dash", line_color="#b00020", row=1, col=col)
        # Annotations on a log axis take log10 of the data value (shapes such as add_vline do not).
        fig.add_annotation(
            x=math.log10(ridge_tokens),
            y=0.97,
            yref="paper",
            xref="x",
            text=f"ridge ≈ {ridge_tokens:.0f} tokens/pass",
            showarrow=False,
            font={"color": "#b00020"},
            xanchor="left",
            yanchor="top",
        )
    sizes = sorted({r["tokens_per_pass"] for r in rows})
    ticks = [t for i, t in enumerate(sizes) if i == 0 or t >= 1.5 * sizes[i - 1]]  # the sizes measured, never crowded
    fig.update_xaxes(type="log", title_text="tokens per pass (batch × tokens per row)", tickvals=ticks)
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="ms / token", type="log", row=1, col=2)
    fig.update_layout(
        height=380, margin={"l": 50, "r": 20, "t": 60, "b": 40}, legend={"orientation": "h", "yanchor": "bottom", "y": 1.08, "x": 0}
    )
    return ink(fig)  # dark text under Streamlit's grey theme (AA contrast)


BUSY = 0.5  # a unit sets the pace once a pass reaches this share of its probed peak
REGIME_RULE = (
    f"compute-bound when the pass reaches {BUSY:.0%} of the probed peak FLOP/s, memory-bound when it reaches "
    f"{BUSY:.0%} of the probed peak bandwidth (whichever share is higher, if both), and overhead/latency-bound when "
    "it reaches neither: then per-operation latency and overhead, not bytes or arithmetic, take most of the time"
)


def regime(bandwidth_share: float, flops_share: float, busy: float = BUSY) -> str:
    """Name the regime a pass shows from its achieved shares (0..1+) of peak bandwidth and peak FLOP/s."""
    if max(bandwidth_share, flops_share) < busy:
        return "overhead/latency-bound"
    return "compute-bound" if flops_share >= bandwidth_share else "memory-bound"


def peak_shares(rows: list[dict], peak_bandwidth: float, peak_flops: float) -> list[dict]:
    """Per measured pass: tokens per pass, achieved bandwidth and FLOP/s as fractions of the peaks, the regime."""
    out = []
    for r in sorted(rows, key=lambda r: (r["batch"], r["tokens_per_pass"])):
        bw, fl = r["achieved_bandwidth"] / peak_bandwidth, r["achieved_flops"] / peak_flops
        out.append(
            {
                "batch": r["batch"],
                "tokens_per_pass": r["tokens_per_pass"],
                "ms": r["ms"],
                "bandwidth_share": bw,
                "flops_share": fl,
                "intensity": r["flops"] / r["bytes"],
                "regime": regime(bw, fl),
            }
        )
    return out


def peak_share_figure(rows: list[dict], peak_bandwidth: float, peak_flops: float, ridge_tokens: float | None = None) -> go.Figure:
    """Achieved bandwidth and FLOP/s in % of the probed peaks against tokens per pass (smallest batch), with the
    BUSY threshold the regime rule uses and the ridge."""
    shares = peak_shares(rows, peak_bandwidth, peak_flops)
    batch = min((s["batch"] for s in shares), default=1)
    pts = [s for s in shares if s["batch"] == batch]
    x = [s["tokens_per_pass"] for s in pts]
    fig = go.Figure()
    fig.add_scatter(
        x=x,
        y=[100 * s["bandwidth_share"] for s in pts],
        mode="lines+markers",
        name="bandwidth: counted bytes / measured time",
        line={"color": "#1f4fd1"},
        customdata=[s["regime"] for s in pts],
        hovertemplate="%{x} tokens/pass: %{y:.0f}% of peak bandwidth (%{customdata})<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=[100 * s["flops_share"] for s in pts],
        mode="lines+markers",
        name="FLOP/s: counted FLOPs / measured time",
        line={"color": "#f2a93b", "dash": "dash"},  # dashed, square marks: told apart from bandwidth by more than colour
        marker={"symbol": "square"},
        hovertemplate="%{x} tokens/pass: %{y:.1f}% of peak FLOP/s<extra></extra>",
    )
    fig.add_hline(
        y=100 * BUSY,
        line_dash="dot",
        line_color="#8a8d99",
        annotation_text=f"{BUSY:.0%}: the regime threshold",
        annotation_position="top left",
    )
    if ridge_tokens:
        fig.add_vline(x=ridge_tokens, line_dash="dash", line_color="#b00020")
        fig.add_annotation(
            x=math.log10(ridge_tokens),
            y=0.97,
            yref="paper",
            text=f"ridge ≈ {ridge_tokens:.0f}",
            showarrow=False,
            font={"color": "#b00020"},
            xanchor="left",
            yanchor="top",
        )
    fig.update_xaxes(type="log", title_text=f"tokens per pass (batch {batch})", tickvals=x)  # plotly's minor log ticks crowd
    fig.update_yaxes(title_text="% of this machine's probed peak", rangemode="tozero")
    return frame(fig, "Share of the probed peaks", "", height=320)  # the title under plotly's toolbar, the legend at the foot


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


def _pass_line(share: dict) -> str:
    return (
        f"{share['tokens_per_pass']} token{'s' if share['tokens_per_pass'] != 1 else ''} per pass: "
        f"{share['bandwidth_share']:.0%} of peak bandwidth, {share['flops_share']:.0%} of peak FLOP/s, "
        f"**{share['regime']}**"
    )


def regime_summary(rows: list[dict], peak_bandwidth: float, peak_flops: float, ridge_tokens: float | None) -> str:
    """The smallest and largest measured pass (smallest batch): their shares of the peaks, the regime each shows by
    REGIME_RULE, and where the largest sits against the ridge estimate. Every claim is decided by the rows."""
    shares = peak_shares(rows, peak_bandwidth, peak_flops)
    if not shares:
        return ""
    batch = shares[0]["batch"]
    pts = [s for s in shares if s["batch"] == batch]
    first, last = pts[0], pts[-1]
    text = f"Batch {batch}, measured against this machine's probed peaks: {_pass_line(first)}"
    if last is not first:
        text += f"; {_pass_line(last)}"
    text += f". (The rule: {REGIME_RULE}.)"
    if ridge_tokens:
        side = "below" if last["tokens_per_pass"] < ridge_tokens else "at or above"
        n = last["tokens_per_pass"]
        text += (
            f" The largest pass measured, {n} token{'s' if n != 1 else ''}, is {side} the ridge estimated from "
            f"the peaks (≈ {ridge_tokens:.0f} tokens per pass)."
        )
    return text
