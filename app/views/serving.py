"""The Serving engines page's figures and tables, from a serving recording (engine/serving/record.py) or a live
`engine.serving.sweep` result: speedup against concurrency per draft length with the rounds' range, and acceptance
per draft position beside SpecLab's own for the same draft. Pure: dicts in, plotly figures and table rows out."""

from __future__ import annotations

import plotly.graph_objects as go

COLORS = ("#0072b2", "#e69f00", "#009e73", "#cc79a7")


def speedup_figure(sweeps: list[dict], label: str) -> go.Figure:
    """Speculative ÷ plain output tokens/s against concurrency, one line per draft length K, whiskers = the rounds'
    range (each round's ratio: plain and speculative took turns), a dotted line at 1× (no gain)."""
    fig = go.Figure()
    for i, s in enumerate(sweeps):
        rows = [r for r in s["rows"] if r.get("speedup")]
        fig.add_scatter(
            x=[r["concurrency"] for r in rows],
            y=[r["speedup"]["median"] for r in rows],
            mode="lines+markers+text",
            name=name(s),
            line={"color": COLORS[i % len(COLORS)], "width": 3},
            text=[f"{r['speedup']['median']:.2f}×" for r in rows],
            textposition="top center",
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [r["speedup"]["hi"] - r["speedup"]["median"] for r in rows],
                "arrayminus": [r["speedup"]["median"] - r["speedup"]["lo"] for r in rows],
            },
            hovertemplate="concurrency %{x}: %{y:.2f}× plain<extra></extra>",
        )
    fig.add_hline(y=1.0, line_dash="dot", line_color="#333")
    fig.update_xaxes(type="log", title_text="requests in flight (concurrency)", tickvals=_concurrencies(sweeps))
    fig.update_yaxes(title_text="speculative ÷ plain output tokens/s (dotted: 1× = no gain)")
    fig.update_layout(
        title={"text": f"Speculation on a continuous-batching server, against load<br><sup>{label}</sup>"},
        height=420,
        legend={"orientation": "h", "y": -0.25},
        margin={"t": 80},
    )
    return fig


def acceptance_figure(sweeps: list[dict], speclab: dict, label: str) -> go.Figure:
    """Acceptance at each draft position: the server's own counters (all concurrencies of a sweep together) for
    each K, and SpecLab's engine's for the same draft on held-out prompts."""
    fig = go.Figure()
    for i, s in enumerate(sweeps):
        per_pos = pooled_acceptance(s)
        fig.add_bar(
            x=[f"position {p + 1}" for p in range(len(per_pos))],
            y=per_pos,
            name=f"llama-server, {name(s)}",
            marker_color=COLORS[i % len(COLORS)],
            text=[f"{v:.2f}" for v in per_pos],
            textposition="outside",
        )
    ours = speclab.get("per_pos_rate") or []
    fig.add_bar(
        x=[f"position {p + 1}" for p in range(len(ours))],
        y=ours,
        name="SpecLab's engine (the same draft, held-out prompts, depth 4)",
        marker={"color": "#888", "pattern": {"shape": "/"}},
        text=[f"{v:.2f}" for v in ours],
        textposition="outside",
    )
    fig.update_yaxes(title_text="drafts whose token at this position was accepted", range=[0, 1])
    fig.update_layout(
        title={"text": f"Acceptance per draft position<br><sup>{label}</sup>"},
        barmode="group",
        height=400,
        legend={"orientation": "h", "y": -0.2},
        margin={"t": 80},
    )
    return fig


def pooled_acceptance(sweep: dict) -> list[float]:
    """Accepted at each position ÷ drafts, pooled over a sweep's concurrencies (each row's rates weighted by its drafts)."""
    rows = [r["acceptance"] for r in sweep["rows"] if r.get("acceptance") and r["acceptance"].get("drafts")]
    drafts = sum(a["drafts"] for a in rows)
    width = max((len(a["per_pos_rate"]) for a in rows), default=0)
    if not drafts:
        return []
    return [sum(a["per_pos_rate"][p] * a["drafts"] for a in rows if p < len(a["per_pos_rate"])) / drafts for p in range(width)]


def table(sweeps: list[dict]) -> list[dict]:
    """One row per K and concurrency: both servers' tokens/s, the speedup and its range, TTFT and TPOT, α."""
    out = []
    for s in sweeps:
        for r in s["rows"]:
            sp, acc = r.get("speedup") or {}, r.get("acceptance") or {}
            out.append(
                {
                    "server": name(s),
                    "concurrency": r["concurrency"],
                    "plain tok/s": _r(r["plain"]["tokens_per_s"], 1),
                    "speculative tok/s": _r(r["spec"]["tokens_per_s"], 1),
                    "speedup": _r(sp.get("median"), 2),
                    "rounds' range": f"{sp['lo']:.2f}–{sp['hi']:.2f}" if sp else "",
                    "TTFT ms plain / spec": f"{r['plain']['ttft_ms']:.0f} / {r['spec']['ttft_ms']:.0f}",
                    "TPOT ms plain / spec": f"{_r(r['plain']['tpot_ms'], 1)} / {_r(r['spec']['tpot_ms'], 1)}",
                    "α": _r(acc.get("alpha"), 3),
                }
            )
    return out


def verdict_words(sweeps: list[dict]) -> list[str]:
    """Per K, where speculation was faster or slower than plain in every round, computed from the rows."""
    lines = []
    for s in sweeps:
        faster = [r["concurrency"] for r in s["rows"] if r.get("speedup") and r["speedup"]["lo"] > 1]
        slower = [r["concurrency"] for r in s["rows"] if r.get("speedup") and r["speedup"]["hi"] < 1]
        level = [r["concurrency"] for r in s["rows"] if r.get("speedup") and r["concurrency"] not in faster + slower]
        parts = []
        if faster:
            parts.append(f"faster than plain in every round at concurrency {_list(faster)}")
        if slower:
            parts.append(f"slower in every round at {_list(slower)}")
        if level:
            parts.append(f"level within the rounds' range at {_list(level)}")
        per_pos = pooled_acceptance(s)
        pos = ", ".join(f"{v:.2f}" for v in per_pos)
        lines.append(f"{name(s)}: " + "; ".join(parts) + (f". Acceptance by position: {pos}." if per_pos else "."))
    return lines


def name(sweep: dict) -> str:
    """A sweep's legend name: its own, else the draft length it recorded."""
    return sweep.get("name") or f"draft model, K = {sweep['k']}"


def _concurrencies(sweeps: list[dict]) -> list[int]:
    return sorted({r["concurrency"] for s in sweeps for r in s["rows"]})


def _list(xs: list[int]) -> str:
    return ", ".join(str(x) for x in xs)


def _r(x, n: int):
    return None if x is None else round(x, n)
