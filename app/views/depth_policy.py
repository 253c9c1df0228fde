"""Which depth k a speculative run used at each step, against the batch in flight, and a one-line account of it.

Everything comes from the trace: `Step.depth` is the k a decode step drafted (the policy's choice, capped
by the engine at one less than the tokens the longest row still needs; a drafter may also propose fewer,
e.g. n-gram lookup finding no match), `Step.batch` the sequences in that pass, and `SeqStep.drafted` each
row's own draft (a confidence threshold can stop a row early). In tree-drafting runs `Step.tree_nodes` is the
tree size each row verified (goodput cuts the tree per step, and may draft a chain or nothing instead;
traces from before that field say it through their tokens per pass). The policy and its settings come from
`trace.config`. Nothing here calls streamlit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import charts
from .palette import under_toolbar

DEPTH_COLOR = "#1f4fd1"
BATCH_COLOR = "#8a8d99"
TREE_COLOR = "#1b8a5a"
SHOWN_CHANGES = 4  # the summary names this many changes of k, then counts the rest


@dataclass(frozen=True)
class DepthPoint:
    step: int  # the step's index in the trace (0 is the prefill, so decode steps start at 1)
    depth: int  # k this step drafted
    batch: int  # sequences in the pass
    mean_drafted: float  # draft tokens per row (below depth when rows stopped early)
    tokens_left: int | None  # the most new tokens any row in the pass still needed (None: max_new_tokens unknown)
    tree_nodes: int | None = None  # a tree step: the nodes each row verified (None: a chain or a plain step)

    @property
    def capped(self) -> bool:
        """The engine never drafts more than the longest row can still use (tokens left - 1): was k at that cap?"""
        return self.tokens_left is not None and self.depth == self.tokens_left - 1


@dataclass(frozen=True)
class DepthChange:
    at: DepthPoint  # the first step with the new k
    before: DepthPoint  # the step before it


def depth_points(trace) -> list[DepthPoint]:
    """One point per decode step, in order."""
    max_new = trace.config.get("max_new_tokens")
    emitted: dict[int, int] = {}
    points = []
    for step in trace.steps:
        if step.kind == "decode":
            left = None
            if isinstance(max_new, int) and step.seqs:
                left = max(max_new - emitted.get(row.seq, 0) for row in step.seqs)
            drafted = [len(row.drafted) for row in step.seqs]
            mean = sum(drafted) / len(drafted) if drafted else 0.0
            points.append(DepthPoint(step.index, step.depth, step.batch, mean, left, _tree_nodes(step)))
        for row in step.seqs:
            emitted[row.seq] = emitted.get(row.seq, 0) + len(row.emitted)
    return points


def _tree_nodes(step) -> int | None:
    """A step's tree size: its own field, or (older traces) its tokens per pass where its rows hold trees."""
    if step.tree_nodes is not None:
        return step.tree_nodes
    if any(row.tree is not None for row in step.seqs) and step.batch:
        return step.tokens_per_pass // step.batch - 1
    return None


def tree_text(points: list[DepthPoint]) -> str | None:
    """'Trees at 12 of 20 decode steps: 4 to 32 nodes per row (mean 18.5).' (None: no tree step)."""
    sizes = [p.tree_nodes for p in points if p.tree_nodes is not None]
    if not sizes:
        return None
    where = f"all {len(points)} decode steps" if len(sizes) == len(points) else f"{len(sizes)} of {len(points)} decode steps"
    if min(sizes) == max(sizes):
        return f"Trees at {where}: {sizes[0]} node{'s' if sizes[0] != 1 else ''} per row."
    return f"Trees at {where}: {min(sizes)} to {max(sizes)} nodes per row (mean {sum(sizes) / len(sizes):.1f})."


def depth_changes(points: list[DepthPoint]) -> list[DepthChange]:
    """Every step whose k differs from the step before it."""
    return [DepthChange(at=b, before=a) for a, b in zip(points, points[1:]) if a.depth != b.depth]


def _int(value) -> int | str:
    """An integer setting from a trace's config (which may come from an uploaded file), else '?'."""
    return value if isinstance(value, int) and not isinstance(value, bool) else "?"


def _table_text(table) -> str | None:
    """[[1, 4, 4], [5, 16, 2]] -> '1-4:4, 5-16:2'; None unless every row is three integers."""
    if not isinstance(table, (list, tuple)) or not table:
        return None
    rows = []
    for row in table:
        if not isinstance(row, (list, tuple)) or len(row) != 3 or any(_int(v) == "?" for v in row):
            return None
        low, high, k = row
        rows.append(f"{low}:{k}" if low == high else f"{low}-{high}:{k}")
    return ", ".join(rows)


def policy_name(config: dict) -> str:
    """The policy as the summary names it, with the setting that shaped it (from the trace's own config)."""
    policy = config.get("policy") or "fixed"
    depth, n = _int(config.get("depth")), _int(config.get("disable_by_batch_size"))
    if policy == "fixed":
        return f"fixed k = {depth}"
    if policy == "off_above_batch":
        return f"off above batch {n} (k = {depth})"
    if policy == "heuristic":
        return f"heuristic (start k = {depth}, off above batch {n})"
    if policy == "batch_table":
        table = _table_text(config.get("batch_table"))
        if table:
            return f"batch table [{table}] (k ≤ {depth})"
        return f"batch table derived from this machine's pass cost (k ≤ {depth})"
    if policy == "goodput":
        nodes = _int(config.get("tree_nodes"))
        return f"goodput (k ≤ {depth}, trees ≤ {nodes} nodes)" if nodes not in (0, "?") else f"goodput (k ≤ {depth})"
    return "an unknown policy"


def _change_text(change: DepthChange) -> str:
    at = change.at
    text = f"→ {at.depth} at batch {at.batch} (step {at.step}"
    if at.capped:  # a fact beside the change, not a claimed cause: the engine caps k at (tokens left - 1)
        left = at.tokens_left
        text += f": the longest row had {left} token{'s' if left != 1 else ''} left to write"
    return text + ")"


def batch_runs(points: list[DepthPoint]) -> list[list[DepthPoint]]:
    """The decode steps cut into runs of one batch size, in order (the batch only changes as rows finish)."""
    runs: list[list[DepthPoint]] = []
    for point in points:
        if runs and runs[-1][-1].batch == point.batch:
            runs[-1].append(point)
        else:
            runs.append([point])
    return runs


def shortening_note(config: dict) -> str | None:
    """Why a step may draft fewer tokens than the policy chose (None: the drafter always drafts what it is asked)."""
    if config.get("drafter") == "ngram":
        return "the n-gram drafter drafts less, or nothing, where it finds a short or no match"
    threshold = config.get("confidence_threshold")
    if isinstance(threshold, (int, float)) and not isinstance(threshold, bool) and threshold > 0:
        return f"drafts stop once the drafter's joint confidence falls below {threshold:.2f}"
    return None


def _per_batch_text(points: list[DepthPoint]) -> str:
    """'up to k = 4 at batch 8 (mean 2.9 over 12 steps) → up to k = 2 at batch 3 (…)' for drafters that may
    draft less than the policy's k: per batch size, the most any step drafted is the policy's choice at best."""
    runs = batch_runs(points)
    shown = runs if len(runs) <= SHOWN_CHANGES + 1 else runs[:SHOWN_CHANGES] + [runs[-1]]
    parts = []
    for run in shown:
        depths = [p.depth for p in run]
        steps = f"{len(run)} step{'s' if len(run) != 1 else ''}"
        parts.append(f"up to k = {max(depths)} at batch {run[0].batch} (mean {sum(depths) / len(depths):.1f} over {steps})")
    if len(shown) < len(runs):
        parts.insert(-1, f"… {len(runs) - len(shown)} more batch sizes …")
    return " → ".join(parts)


def depth_summary(trace) -> str:
    """One line saying which k the policy used at which batch size, derived from the steps.

    Where the drafter drafts exactly what the policy asks, the line gives k and the batch at the start and
    then every change of k with the batch in flight and its step. Where it may draft less (n-gram lookup, a
    confidence threshold), a step's k is only a lower bound of the policy's choice, so the line gives the
    most drafted per batch size instead, and says why. A tree-drafting run adds how often it drafted a tree
    and of how many nodes (`tree_text`); for a tree step, k is the tree's depth."""
    name = policy_name(trace.config)
    points = depth_points(trace)
    if not points:
        return f"{name}: no decode steps (every sequence finished at the prefill)."
    line = _k_line(name, points, trace.config)
    trees = tree_text(points)
    return f"{line} {trees}" if trees else line


def _k_line(name: str, points: list[DepthPoint], config: dict) -> str:
    """depth_summary's account of k: its changes with the batch, or the most drafted per batch size."""
    note = shortening_note(config)
    if note:
        return f"{name}: {_per_batch_text(points)}; {note}."
    first, last = points[0], points[-1]
    changes = depth_changes(points)
    if not changes:
        batches = (
            f"batch {first.batch} throughout" if first.batch == last.batch else f"while the batch went from {first.batch} to {last.batch}"
        )
        steps = "the one decode step" if len(points) == 1 else f"all {len(points)} decode steps"
        return f"{name}: k = {first.depth} at {steps}, {batches}."
    parts = [f"{name}: k = {first.depth} at batch {first.batch}"] + [_change_text(c) for c in changes[:SHOWN_CHANGES]]
    text = " ".join(parts)
    rest = len(changes) - SHOWN_CHANGES
    if rest > 0:
        depths = [p.depth for p in points]
        text += (
            f" … and {rest} more change{'s' if rest > 1 else ''} (k between {min(depths)} and {max(depths)}, "
            f"mean {sum(depths) / len(depths):.2f} per decode step)"
        )
    return text + "."


def depth_figure(trace) -> go.Figure:
    """k per decode step (steps, left axis), a tree step's nodes per row (diamonds, left axis) and the batch in
    flight (dashed, right axis); hover shows them."""
    all_points = depth_points(trace)
    points = charts.thin(all_points)
    x = [p.step for p in points]
    custom = [[p.batch, p.mean_drafted, p.tokens_left if p.tokens_left is not None else "?"] for p in points]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_scatter(
        x=x,
        y=[p.depth for p in points],
        name="k (depth used)",
        mode="lines+markers",
        line_shape="hv",
        line={"color": DEPTH_COLOR, "width": 2},
        marker={"size": 5},
        customdata=custom,
        hovertemplate="step %{x}: k = %{y}, batch %{customdata[0]}, rows drafted %{customdata[1]:.2f} on average, "
        "longest row %{customdata[2]} tokens from done<extra></extra>",
        secondary_y=False,
    )
    trees = [p for p in points if p.tree_nodes is not None]
    if trees:  # a tree step's size beside its depth, on the same axis (tokens per row)
        fig.add_scatter(
            x=[p.step for p in trees],
            y=[p.tree_nodes for p in trees],
            name="tree nodes per row",
            mode="markers",
            marker={"color": TREE_COLOR, "size": 7, "symbol": "diamond"},
            customdata=[[p.depth, p.batch] for p in trees],
            hovertemplate="step %{x}: a tree of %{y} nodes per row, %{customdata[0]} deep, batch %{customdata[1]}<extra></extra>",
            secondary_y=False,
        )
    fig.add_scatter(
        x=x,
        y=[p.batch for p in points],
        name="batch in flight",
        mode="lines",
        line_shape="hv",
        line={"color": BATCH_COLOR, "dash": "dash"},
        hovertemplate="batch %{y}<extra></extra>",
        secondary_y=True,
    )
    top_k = max([p.depth for p in points] + [p.tree_nodes for p in trees] + [1])
    top_b = max([p.batch for p in points] + [1])
    fig.update_xaxes(title_text="decode step")
    axis = "k (draft tokens) · tree nodes" if trees else "k (draft tokens)"
    fig.update_yaxes(title_text=axis, range=[-0.3, top_k + 0.5], dtick=1 if top_k <= 8 else None, secondary_y=False)
    fig.update_yaxes(
        title_text="batch in flight", range=[0, top_b * 1.1 + 0.5], dtick=max(1, math.ceil(top_b / 5)), showgrid=False, secondary_y=True
    )
    fig.update_layout(
        title={"text": f"Depth per step: {policy_name(trace.config)}" + charts.thinned_note(len(all_points)), "font": {"size": 15}},
        height=330,
        margin={"l": 50, "r": 50, "t": 50, "b": 40},
        hovermode="x unified",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "right", "x": 1.0},
    )
    return under_toolbar(fig)


def curve_figure(tokens, ms, measured_at: str = "") -> go.Figure:
    """The pass-cost curve a load-aware policy priced its choices with: ms of one target pass vs tokens in it."""
    fig = go.Figure()
    fig.add_scatter(
        x=list(tokens),
        y=list(ms),
        mode="lines+markers",
        name="one target pass",
        line={"color": DEPTH_COLOR},
        hovertemplate="%{x} tokens per pass: %{y:.1f} ms<extra></extra>",
    )
    fig.update_xaxes(type="log", title_text="tokens per pass (batch × (k + 1))")
    fig.update_yaxes(title_text="ms", rangemode="tozero")
    title = "Measured cost of one target pass" + (f" ({measured_at})" if measured_at else "")
    fig.update_layout(title={"text": title, "font": {"size": 15}}, height=300, margin={"l": 50, "r": 20, "t": 50, "b": 40})
    return under_toolbar(fig)
