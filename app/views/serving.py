"""The Serving engines page's figures and tables, from a serving recording (engine/serving/record.py) or a live
`engine.serving.sweep` result: speedup against concurrency per draft length with the rounds' range, and acceptance
per draft position beside SpecLab's own for the same draft. Pure: dicts in, plotly figures and table rows out."""

from __future__ import annotations

import plotly.graph_objects as go

from app.views.bars import DASHES, LABEL_FONT, LABEL_MARK, PATTERNS, SYMBOLS, frame
from engine import verdict as rule

COLORS = ("#0072b2", "#e69f00", "#009e73", "#cc79a7")


def judged(row: dict) -> dict | None:
    """A row's speedup by the one rule (engine/verdict.py) over its paired rounds (plain and speculative took turns):
    {"value", "lo", "hi", "kind"}; a row recorded without both lanes' rounds keeps its stored median, untold."""
    a, b = (row.get(lane, {}).get("tokens_per_s_runs") for lane in ("spec", "plain"))
    if a and b and len(a) == len(b) >= 2:
        v = rule.judge(a, b)
        return {"value": v.ratio, "lo": v.lo, "hi": v.hi, "kind": v.kind}
    sp = row.get("speedup")
    return {"value": sp["median"], "lo": None, "hi": None, "kind": "can't tell"} if sp else None


def speedup_figure(sweeps: list[dict], label: str) -> go.Figure:
    """Speculative ÷ plain output tokens/s against concurrency, one line per draft length K (its own dash and marker,
    not its colour alone): the rule's ratio over the paired rounds, whiskers its 95% range, each point's value in dark
    text just above its whisker, a dotted line at 1× (no gain)."""
    fig = go.Figure()
    for i, s in enumerate(sweeps):
        rows = [(r, j) for r in s["rows"] if (j := judged(r))]
        xs, ys = [r["concurrency"] for r, _ in rows], [j["value"] for _, j in rows]
        fig.add_scatter(
            x=xs,
            y=ys,
            mode="lines+markers",
            name=name(s),
            line={"color": COLORS[i % len(COLORS)], "width": 3, "dash": DASHES[i % len(DASHES)]},
            marker={"symbol": SYMBOLS[i % len(SYMBOLS)], "size": 9},
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [(j["hi"] or j["value"]) - j["value"] for _, j in rows],
                "arrayminus": [j["value"] - (j["lo"] or j["value"]) for _, j in rows],
            },
            hovertemplate="concurrency %{x}: %{y:.2f}× plain<extra></extra>",
        )
        tops = [j["hi"] or j["value"] for _, j in rows]
        fig.add_scatter(x=xs, y=tops, text=[f"{y:.2f}×" for y in ys], textposition="top center", textfont=LABEL_FONT, **LABEL_MARK)
        fig.data[-1].update(showlegend=False, hoverinfo="skip", cliponaxis=False)
    fig.add_hline(y=1.0, line_dash="dot", line_color="#333")
    fig.update_xaxes(type="log", title_text="requests in flight (concurrency)", tickvals=_concurrencies(sweeps))
    fig.update_yaxes(title_text="× plain output tokens/s (dotted: 1×)")
    return frame(fig, "Speculation on a continuous-batching server, against load", label, height=380)


def acceptance_figure(sweeps: list[dict], speclab: dict, label: str) -> go.Figure:
    """Acceptance at each draft position: the server's own counters (all concurrencies of a sweep together) for
    each K, and SpecLab's engine's for the same draft on held-out prompts; each series hatched its own way."""
    fig = go.Figure()
    series = [(f"llama-server, {name(s)}", pooled_acceptance(s), COLORS[i % len(COLORS)]) for i, s in enumerate(sweeps)]
    series.append(("SpecLab's engine (the same draft, held-out prompts, depth 4)", speclab.get("per_pos_rate") or [], "#888"))
    for i, (title, per_pos, color) in enumerate(series):
        fig.add_bar(
            x=[f"position {p + 1}" for p in range(len(per_pos))],
            y=per_pos,
            name=title,
            marker={"color": color, "pattern": {"shape": PATTERNS[i % len(PATTERNS)]}},
            text=[f"{v:.2f}" for v in per_pos],
            textposition="outside",
            textfont=LABEL_FONT,
            cliponaxis=False,
        )
    fig.update_yaxes(title_text="share accepted at this position", range=[0, 1.12])
    return frame(fig, "Acceptance per draft position", label, height=360)


def pooled_acceptance(sweep: dict) -> list[float]:
    """Accepted at each position ÷ drafts, pooled over a sweep's concurrencies (each row's rates weighted by its drafts)."""
    rows = [r["acceptance"] for r in sweep["rows"] if r.get("acceptance") and r["acceptance"].get("drafts")]
    drafts = sum(a["drafts"] for a in rows)
    width = max((len(a["per_pos_rate"]) for a in rows), default=0)
    if not drafts:
        return []
    return [sum(a["per_pos_rate"][p] * a["drafts"] for a in rows if p < len(a["per_pos_rate"])) / drafts for p in range(width)]


def table(sweeps: list[dict]) -> list[dict]:
    """One row per K and concurrency: both servers' tokens/s (median rounds), the speedup (the rule's ratio over the
    paired rounds, which can differ from the medians' quotient) and its range, TTFT and TPOT, and the acceptance rate
    (accepted ÷ drafted: the glossary's acceptance rate, lower than α)."""
    out = []
    for s in sweeps:
        for r in s["rows"]:
            sp, acc = judged(r) or {}, r.get("acceptance") or {}
            out.append(
                {
                    "server": name(s),
                    "concurrency": r["concurrency"],
                    "plain tok/s (median round)": _r(r["plain"]["tokens_per_s"], 1),
                    "speculative tok/s (median round)": _r(r["spec"]["tokens_per_s"], 1),
                    "speedup (the rule's)": _r(sp.get("value"), 2),
                    "95% range": rule.span(sp["lo"], sp["hi"]) if sp.get("lo") else "",
                    "verdict": sp.get("kind", ""),
                    "TTFT ms plain / spec": f"{r['plain']['ttft_ms']:.0f} / {r['spec']['ttft_ms']:.0f}",
                    "TPOT ms plain / spec": f"{_r(r['plain']['tpot_ms'], 1)} / {_r(r['spec']['tpot_ms'], 1)}",
                    "acceptance rate (accepted ÷ drafted)": _r(acc.get("alpha"), 3),  # the counters' ratio, not α
                }
            )
    return out


def verdict_words(sweeps: list[dict]) -> list[str]:
    """Per K, where speculation was faster, slower or level against plain by the one rule, and where the rounds cannot
    tell, computed from the rows."""
    lines = []
    for s in sweeps:
        kinds = {r["concurrency"]: j["kind"] for r in s["rows"] if (j := judged(r))}
        parts = [
            f"{words} at concurrency {_list([c for c, k in kinds.items() if k == kind])}"
            for kind, words in (("faster", "faster than plain"), ("slower", "slower"), ("level", "level"), ("can't tell", "can't tell"))
            if kind in kinds.values()
        ]
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
