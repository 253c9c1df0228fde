"""Lesson 7's second picture: the shape the goodput policy verified at each decode step (no streamlit).

It reads the goodput rows' `shapes` (app/lessons/width.py `step_shapes`: from the run's own trace, `Step.tree_nodes`
for a tree step, `Step.depth` for a chain). One strip per batch size, a bar per decode step as tall as the tokens
per row its verify pass carried: 1 for a plain step, k + 1 for a chain of k, n + 1 for a tree cut to n nodes,
coloured by shape in the colours lesson 7's first figure gives the fixed chain and tree; dotted lines mark the fixed
chain's and the fixed tree's. Older measurements have no goodput row, and no strip (`shapes_figure` returns None).
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.lessons.figures import COLORS, PLAIN_COLOR, esc, frame
from app.lessons.width import SHAPES, nodes_per_row

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
