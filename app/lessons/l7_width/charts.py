"""Lesson 7's charts and table: chain against tree per batch, and the shape goodput chose at every step."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.lessons.kit import noise
from app.lessons.kit.figures import (
    COLORS,
    PLAIN_COLOR,
    decode_rate,
    esc,
    frame,
    grouped_bars,
)
from app.lessons.kit.rows import PLAIN, cell, load_rate, load_runs
from app.lessons.l7_width.goodput import FIXED, GOODPUT, SHAPES, nodes_per_row


# --- lesson 7: width ----------------------------------------------------------------------------
def pass_text(c: dict | None) -> str:
    """A bar's tokens per pass: a fixed shape's, or (≈) goodput's mean over its steps (its shape varies per step)."""
    if not c:
        return ""
    return f"≈{c['tokens_per_pass']} tok/pass" if c.get("mean_nodes") is not None else f"{c['tokens_per_pass']} tok/pass"


def width_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    """Decoding-alone tokens/s of plain, chain, tree and (newer measurements) goodput at both batches (the median on
    each bar, above its whisker; tokens per pass in its hover and the table), and tokens emitted per pass. What goodput
    chose per step is app/lessons/width_steps.py's picture."""
    rows = m["rows"]
    xs = sorted({r["batch"] for r in rows})
    cats = [f"batch {b}" for b in xs]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("decoding tokens/s, all sequences", "tokens emitted per pass (per row)"))
    rates, emitted = [], []
    for i, name in enumerate(dict.fromkeys(r["contender"] for r in rows)):
        cells = [next((r for r in rows if r["batch"] == b and r["contender"] == name), None) for b in xs]
        vals = [decode_rate(c) if c else None for c in cells]
        color = PLAIN_COLOR if name == "plain decoding" else COLORS[i % len(COLORS)]
        common = {"name": name, "color": color, "legendgroup": str(i)}
        text = [f"{v[0]:.0f}" if v else "" for v in vals]
        rates.append({**common, "values": vals, "text": text, "hovertext": [pass_text(c) for c in cells]})
        kept = [(c.get("tokens_per_step") or (1.0 if name == "plain decoding" else None)) if c else None for c in cells]
        emitted.append({**common, "values": [(k, None, None) for k in kept], "showlegend": False})
    grouped_bars(fig, cats, rates, row=1, col=1)
    grouped_bars(fig, cats, emitted, row=1, col=2)
    return frame(fig, "Tree against chain: more tokens per pass buys more accepted tokens, until the pass gets dear", label, height=400)


def width_table(result: dict) -> list[dict]:
    """Lesson 7's rows as a table: tokens per pass (what the verify pass carries; goodput's mean), draft nodes per
    row, tokens emitted per pass, tokens/s (median, and the runs' range), the verify pass's median time and FLOPs
    against plain decoding."""
    out = []
    for r in result["rows"]:
        plain = cell(result["rows"], r["batch"], PLAIN)
        runs = load_runs(r)
        varies = r.get("mean_nodes") is not None
        out.append(
            {
                "batch": r["batch"],
                "contender": r["contender"],
                "tokens per pass": round(r["batch"] * (r["mean_nodes"] + 1), 1) if varies else r["tokens_per_pass"],
                "nodes per row (mean)": round(nodes_per_row(r), 2),
                "tokens emitted per pass": round(r["tokens_per_step"], 2)
                if r.get("tokens_per_step")
                else (1.0 if nodes_per_row(r) == 0 else None),  # plain decoding (or goodput choosing it throughout): one per pass
                "decoding tokens/s": round(load_rate(r), 1),
                "runs (decoding tokens/s)": ", ".join(f"{v:.1f}" for v in runs["values"]) if runs else "one run",
                "whole run tokens/s (prefill included)": round(r["tokens_per_s"], 1),
                "verify ms (median)": round(r["verify_ms"], 1) if r.get("verify_ms") is not None else None,
                "FLOPs × plain": round(r["flops"] / plain["flops"], 2) if plain and plain["flops"] else None,
                "against (the rule's ratio, 95% range)": _against(result, r),
            }
        )
    return out


def _against(result: dict, r: dict) -> str:
    """The comparison the verdict sentences make for this row, with the rule's numbers: the tree against the chain;
    goodput against the fastest fixed shape at its batch."""
    rows = result["rows"]
    if r["contender"] == "tree":
        other = cell(rows, r["batch"], "chain")
    elif r["contender"] == GOODPUT:
        other = max((c for c in (cell(rows, r["batch"], n) for n in FIXED) if c), key=load_rate, default=None)
    else:
        return ""
    v = noise.judge(load_runs(r), load_runs(other)) if other else None
    return f"× {other['contender']}: {v.interval}" if v else ""


SHAPE_COLORS = {"plain": PLAIN_COLOR, "chain": COLORS[1], "tree": COLORS[2]}  # as width_figure colours plain, chain, tree


SHAPE_PATTERNS = {"plain": "", "chain": "/", "tree": "x"}  # as width_figure hatches them (figures.PATTERNS)


SHAPE_NAMES = {"plain": "plain step", "chain": "chain of k", "tree": "tree of n nodes"}


HOVER = {
    "plain": "step %{x}: plain, 1 token per row<extra></extra>",
    "chain": "step %{x}: a chain of %{customdata[0]}, %{y} tokens per row<extra></extra>",
    "tree": "step %{x}: a tree of %{customdata[0]} nodes, %{customdata[1]} deep, %{y} tokens per row<extra></extra>",
}


CAPTION = (
    "Before each step, goodput prices every shape it may verify (plain, a chain of k, the drafted tree cut to its n "
    "most likely nodes) with this machine's measured pass curve, what a verify pass of that many tokens costs, and "
    "with the acceptance it has measured so far; it takes the shape with the most expected tokens per second. Now "
    "and then it tries a shape it would not choose (a chain after a long plain stretch, a wider cut), to keep "
    "measuring what it leaves out."
)


def shapes_figure(m: dict, label: str = "") -> go.Figure | None:
    """One strip per goodput row (batch size): tokens per row of each decode step's verify pass, by shape. None when
    the measurement has no goodput steps (an older recording)."""
    rows = [r for r in m["rows"] if r.get("shapes")]
    if not rows:
        return None
    titles = [
        f"batch {r['batch']}: {len(r['shapes'])} decode steps, {nodes_per_row(r):.1f} draft nodes per row on average"
        + (" (prompts one after another)" if r["batch"] == 1 else "")
        for r in rows
    ]
    fig = make_subplots(rows=len(rows), cols=1, subplot_titles=[esc(t) for t in titles], vertical_spacing=0.22)
    shown = set()
    for i, r in enumerate(rows, start=1):
        for kind in SHAPES:
            steps = [(x, s) for x, s in enumerate(r["shapes"], start=1) if s["shape"] == kind]
            if not steps:
                continue
            fig.add_bar(
                x=[x for x, _ in steps],
                y=[s["nodes"] + 1 for _, s in steps],
                name=SHAPE_NAMES[kind],
                marker={"color": SHAPE_COLORS[kind], "pattern": {"shape": SHAPE_PATTERNS[kind]}},
                customdata=[[s["nodes"], s["depth"]] for _, s in steps],
                hovertemplate=HOVER[kind],
                legendgroup=kind,
                showlegend=kind not in shown,
                row=i,
                col=1,
            )
            shown.add(kind)
        for tokens, what in ((m["depth"] + 1, "fixed chain"), (m["nodes"] + 1, "fixed tree")):
            line = {"dash": "dot", "color": "#555", "width": 1}
            fig.add_hline(y=tokens, line=line, annotation_text=f"{what}: {tokens}", annotation_position="top right", row=i, col=1)
        top = max([m["nodes"]] + [s["nodes"] for s in r["shapes"]]) + 3
        fig.update_yaxes(title_text="tokens per row", range=[0, top], row=i, col=1)
    fig.update_xaxes(title_text="decode step", row=len(rows), col=1)
    fig = frame(fig, "What goodput chose at each step: plain, a chain of k, or a tree cut to n nodes", label, height=210 + 170 * len(rows))
    fig.update_layout(barmode="overlay", bargap=0.15)
    return fig
