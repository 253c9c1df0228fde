"""Charts under the lanes: per-step latency, tokens per target pass, utilisation, acceptance per position.

Each function takes Traces (and the hardware probe's peaks) and returns a plotly Figure. Step 0 of a
trace is the prefill; the per-step charts show decode steps only (the prefill is one long pass that
would flatten everything else) and say so in their titles.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.views.palette import under_toolbar
from engine.trace.achieved import pass_achieved, timer_name

AR_COLOR = "#8a8d99"
DRAFT_COLOR = "#f2a93b"
VERIFY_COLOR = "#1f4fd1"
OVERHEAD_COLOR = "#c9cbd3"
ACCEPT_COLOR = "#0a7d32"


MAX_CHART_STEPS = 1500  # per trace: a longer run is drawn every n-th step (each point still one measured step)


def thin(steps: list, limit: int = MAX_CHART_STEPS) -> list:
    """At most `limit` of `steps`, evenly spaced (every n-th, the last one kept): a 100,000-step upload
    stays a figure a browser can draw. The points are measured steps, never averages."""
    if len(steps) <= limit:
        return steps
    stride = -(-len(steps) // limit)  # ceil
    picked = steps[::stride]
    return picked if picked[-1] is steps[-1] else picked + [steps[-1]]


def thinned_note(n_steps: int, limit: int = MAX_CHART_STEPS) -> str:
    """' (1 step in 67 drawn, of 100,000)' when `thin` drops steps, else ''."""
    if n_steps <= limit:
        return ""
    return f" (1 step in {-(-n_steps // limit)} drawn, of {n_steps:,})"


def _all_decode_steps(trace) -> list:
    return [s for s in trace.steps if s.kind == "decode"]


def _decode_steps(trace):
    return thin(_all_decode_steps(trace))


def _note(*traces) -> str:
    return thinned_note(max(len(_all_decode_steps(t)) for t in traces))


def _layout(fig: go.Figure, title: str, height: int = 360, subtitle: str = "") -> go.Figure:
    """A short title on top with its details in a subtitle line (an SVG title does not wrap: a long one was cut
    off at the chart's edge in a half-width column), the legend under the x axis."""
    head = {"text": title, "font": {"size": 15}}
    if subtitle.strip(" ()"):
        head["subtitle"] = {"text": subtitle.strip(" ()"), "font": {"size": 12}}
    fig.update_layout(
        title=head,
        height=height,
        margin={"l": 50, "r": 20, "t": 70 if "subtitle" in head else 50, "b": 100},
        legend={"orientation": "h", "yanchor": "top", "y": -0.25, "xanchor": "left", "x": 0.0},
        hovermode="x unified",
    )
    return under_toolbar(fig)


def latency_figure(ar, spec) -> go.Figure:
    """Per decode step: AR step time beside the speculative step's draft + verify (+ overhead) stacked."""
    ar_steps, sp_steps = _decode_steps(ar), _decode_steps(spec)
    fig = go.Figure()
    fig.add_bar(
        x=[s.index for s in ar_steps],
        y=[s.step_ms for s in ar_steps],
        name="AR step",
        marker_color=AR_COLOR,
        offsetgroup="ar",
        hovertemplate="AR step %{x}: %{y:.1f} ms<extra></extra>",
    )
    draft = [s.draft_ms for s in sp_steps]
    verify = [s.verify_ms for s in sp_steps]
    overhead = [max(0.0, s.step_ms - s.draft_ms - s.verify_ms) for s in sp_steps]
    x = [s.index for s in sp_steps]
    fig.add_bar(x=x, y=draft, name="draft", marker_color=DRAFT_COLOR, offsetgroup="spec", hovertemplate="draft %{y:.1f} ms<extra></extra>")
    fig.add_bar(
        x=x,
        y=verify,
        base=draft,
        name="verify (target pass)",
        marker_color=VERIFY_COLOR,
        offsetgroup="spec",
        hovertemplate="verify %{y:.1f} ms<extra></extra>",
    )
    fig.add_bar(
        x=x,
        y=overhead,
        base=[d + v for d, v in zip(draft, verify)],
        name="engine overhead",
        marker_color=OVERHEAD_COLOR,
        offsetgroup="spec",
        hovertemplate="overhead %{y:.1f} ms<extra></extra>",
    )
    fig.update_layout(barmode="group", bargap=0.15)
    fig.update_xaxes(title_text="decode step")
    fig.update_yaxes(title_text="ms")
    pre_ar = ar.steps[0].step_ms if ar.steps else 0.0
    pre_sp = spec.steps[0].step_ms if spec.steps else 0.0
    note = _note(ar, spec).strip(" ()")
    prefill = f"prefill not shown: AR {pre_ar:.0f} ms, speculative {pre_sp:.0f} ms"
    return _layout(fig, "Per-step latency", subtitle=prefill + (f"; {note}" if note else ""))


def tokens_per_pass_figure(ar, spec) -> go.Figure:
    """Tokens each target forward added to the output (bars) and tokens it processed (markers)."""
    fig = go.Figure()
    for trace, name, color in ((ar, "AR", AR_COLOR), (spec, "speculative", VERIFY_COLOR)):
        steps = _decode_steps(trace)
        fig.add_bar(
            x=[s.index for s in steps],
            y=[sum(len(q.emitted) for q in s.seqs) for s in steps],
            name=f"{name}: tokens emitted",
            marker_color=color,
            offsetgroup=name,
            hovertemplate=f"{name} step %{{x}}: %{{y}} tokens emitted<extra></extra>",
        )
    steps = _decode_steps(spec)
    fig.add_scatter(
        x=[s.index for s in steps],
        y=[s.tokens_per_pass for s in steps],
        mode="markers",
        name="speculative: tokens processed",
        marker={"symbol": "line-ew-open", "size": 14, "color": "#c62828"},
        hovertemplate="processed %{y} tokens<extra></extra>",
    )
    fig.update_layout(barmode="group", bargap=0.15)
    fig.update_xaxes(title_text="target forward (decode step)")
    fig.update_yaxes(title_text="tokens", rangemode="tozero")
    return _layout(fig, "Tokens each pass emitted (bars) and carried (markers)", subtitle=_note(ar, spec))


def achieved(step, peak_bandwidth: float, peak_flops: float) -> tuple[float, float]:
    """(% of peak bandwidth, % of peak FLOP/s) a step's model passes achieved: their modelled bytes/FLOPs over
    their measured time (draft_ms + verify_ms: CUDA events on a GPU), engine/trace/achieved.py."""
    row = pass_achieved(step, peak_bandwidth, peak_flops)
    return row["passes_bw_pct"] or 0.0, row["passes_flops_pct"] or 0.0


BANDWIDTH_LABEL = "bandwidth % of peak (modelled bytes ÷ measured pass time)"
FLOPS_LABEL = "FLOP/s % of peak (modelled FLOPs ÷ measured pass time)"


def _sampled_hover(step) -> str:
    """The NVML SM clock and power of a step, where they were sampled (shown as what they are)."""
    parts = [
        f"SM clock {step.sm_clock_mhz:.0f} MHz" if step.sm_clock_mhz is not None else "",
        f"power {step.power_w:.0f} W" if step.power_w is not None else "",
    ]
    text = ", ".join(p for p in parts if p)
    return f"<br>{text} (time-sampled)" if text else ""


def utilization_figure(ar, spec, peak_bandwidth: float, peak_flops: float, gauge_name: str = "psutil CPU % (system-wide)") -> go.Figure:
    """Per step, achieved bandwidth and FLOP/s as % of the probed peaks, beside the coarse busy gauge.

    The first two are modelled ÷ measured: SpecLab's own byte and FLOP counts (engine/costs.py) divided by
    the step's measured pass time (CUDA events on a GPU, perf_counter on a CPU), not hardware counters. The
    gauge is whatever the engine sampled (psutil or NVML), with NVML's SM clock and power in its hover."""
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, subplot_titles=("Autoregressive", "Speculative"), horizontal_spacing=0.04)
    for col, trace in ((1, ar), (2, spec)):
        steps = _decode_steps(trace)
        x = [s.index for s in steps]
        pairs = [achieved(s, peak_bandwidth, peak_flops) for s in steps]
        timer = timer_name(str(trace.meta.get("device", "")))
        first = col == 1
        fig.add_scatter(
            x=x,
            y=[p[0] for p in pairs],
            name=BANDWIDTH_LABEL,
            mode="lines",
            line={"color": "#1f4fd1", "width": 2},
            legendgroup="bw",
            showlegend=first,
            row=1,
            col=col,
            hovertemplate=f"bandwidth %{{y:.0f}}% (modelled ÷ {timer})<extra></extra>",
        )
        fig.add_scatter(
            x=x,
            y=[p[1] for p in pairs],
            name=FLOPS_LABEL,
            mode="lines",
            line={"color": "#f2a93b", "width": 2},
            legendgroup="fl",
            showlegend=first,
            row=1,
            col=col,
            hovertemplate=f"FLOP/s %{{y:.1f}}% (modelled ÷ {timer})<extra></extra>",
        )
        fig.add_scatter(
            x=x,
            y=[s.util_pct for s in steps],
            name=f"{gauge_name} (coarse gauge)",
            mode="lines",
            line={"color": "#8a8d99", "dash": "dot"},
            legendgroup="ut",
            showlegend=first,
            row=1,
            col=col,
            connectgaps=True,
            customdata=[_sampled_hover(s) for s in steps],
            hovertemplate=f"{gauge_name} %{{y:.0f}}%%{{customdata}}<extra></extra>",
        )
        fig.update_xaxes(title_text="decode step", row=1, col=col)
    fig.update_yaxes(title_text="% of this machine's peak", rangemode="tozero", row=1, col=1)
    _layout(fig, "Hardware utilisation per step", height=410, subtitle=_note(ar, spec))
    fig.update_layout(legend={"orientation": "v", "yanchor": "top", "y": -0.3, "xanchor": "left", "x": 0.0}, margin={"b": 140})
    return fig


def acceptance_figure(spec) -> go.Figure:
    """Fraction of steps whose i-th draft token was accepted, beside α^i (Leviathan's i.i.d. model)."""
    per_pos = spec.summary.get("per_position_acceptance") or []
    alpha = spec.summary.get("alpha")
    positions = list(range(1, len(per_pos) + 1))
    fig = go.Figure()
    fig.add_bar(
        x=positions, y=per_pos, name="measured", marker_color=ACCEPT_COLOR, hovertemplate="position %{x}: %{y:.0%} accepted<extra></extra>"
    )
    if alpha is not None and positions:
        fig.add_scatter(
            x=positions,
            y=[alpha**i for i in positions],
            mode="lines+markers",
            name="α^i (i.i.d. model)",
            line={"color": "#8a8d99", "dash": "dash"},
            hovertemplate="α^%{x} = %{y:.2f}<extra></extra>",
        )
    fig.update_xaxes(title_text="draft position", dtick=1)
    fig.update_yaxes(title_text="accepted", range=[0, 1.05], tickformat=".0%")
    return _layout(fig, "Acceptance per draft position")
