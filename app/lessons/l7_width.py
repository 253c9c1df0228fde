"""Lesson 7, width: a chain against a draft tree (and goodput choosing per step), at batch 1 and at a large batch;
the claim is that inside the room a tree is no slower than a chain and that far past the room width costs. Its run, the
shape goodput verified at each step, its charts, table, notes and record.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.common.measurement import CHOSEN, SPREAD, WARMUP
from app.common.measurement import SHAPES as ROW_SHAPES
from app.lessons.kit import numbers
from app.lessons.kit.experiment import CURVE_HELP, Claim, Experiment, Knob, Prediction, cell_rounds, model_drafter
from app.lessons.kit.numbers import (
    PLAIN,
    RATE_KEYS,
    SHAPE_KEYS,
    cell,
    cell_contest,
    decode_rate,
    rate_of,
    rate_rounds,
    ratio,
    smallest_plain,
)
from app.lessons.kit.runs import Job, cell_of_runs, machine_curve, median_run, timed_rounds
from app.lessons.l0_one_step import show_tree_step
from app.views import metrics
from app.views.bars import COLORS, PLAIN_COLOR, esc, frame, grouped_bars
from engine import DecodeConfig
from engine.bench.prompts import batch_prompts
from engine.costs import ridge_tokens
from engine.options import tree_capacity

WIDTH_DEPTH, WIDTH_PROMPTS, WIDTH_TOKENS, WIDTH_ROUNDS = 4, 3, 16, 3  # most chain depth; prompts at batch 1; tokens; rounds


# (three rounds: five took a live run to 27 s in a browser, 2026-12-04)
GOODPUT = "goodput"
FIXED = (PLAIN, "chain", "tree")  # the fixed shapes goodput is set against
SHAPES = ("plain", "chain", "tree")  # what one decode step verified
MAX_SHAPES = 512  # steps kept per row (the schema's list cap, engine/checks.py SPEC_MAX_LIST)


WIDTH_CONTENDERS = (PLAIN, "chain", "tree", GOODPUT)


WIDTH_BATCHES = (2, 4, 8, 16)  # the large batch's candidates


def has_room(result: dict) -> bool | None:
    """Does this machine's room fit a tree wider than the chain at batch 1 (None: an older recording, no curve)?"""
    c = result.get("chosen")
    return c["nodes"] + 1 <= c["room"] and c["nodes"] > c["depth"] if c and result.get("curve") else None


def width_choice(room: int, s: dict) -> dict:
    """Lesson 7's shapes from the room: the chain, the deepest one-row draft inside it (at most WIDTH_DEPTH); the
    tree (knob 0), the widest whose one-row verify pass still fits the room (room - 1 nodes) where that is wider
    than the chain, else twice the chain's nodes (this machine then has no room for width, and the page says so);
    its branching (knob 0) half its nodes, 2 to 4; the nodes at most what a tree as deep as the chain can draft with
    that branching (a small room gives a shallow chain); the large batch, the smallest whose tree verify pass carries
    PAST x the room."""
    depth = numbers.inside_depth(room, 1, most=WIDTH_DEPTH)
    nodes = int(s["nodes"]) or (room - 1 if room - 1 > depth else 2 * depth)
    topk = int(s["topk"]) or max(2, min(4, nodes // 2))
    nodes = min(nodes, tree_capacity(depth, topk))
    batch = int(s["batch"]) or numbers.past_batch(room, nodes, WIDTH_BATCHES)
    return {"room": int(room), "depth": depth, "nodes": nodes, "topk": topk, "batch": batch}


def width_configs(drafter: str, depth: int, nodes: int, topk: int) -> list[DecodeConfig]:
    """Plain decoding, a chain of `depth`, a tree of `nodes` nodes (top-`topk`) as deep, and the goodput policy
    choosing per step between plain, a chain of k ≤ `depth` and that tree cut to its best n ≤ `nodes`."""
    spec = {"drafter": drafter, "depth": depth, "max_new_tokens": WIDTH_TOKENS}
    tree = {"tree_nodes": nodes, "tree_topk": topk}
    return [
        DecodeConfig(mode="autoregressive", max_new_tokens=WIDTH_TOKENS),
        DecodeConfig(**spec),
        DecodeConfig(**tree, **spec),
        DecodeConfig(policy="goodput", **tree, **spec),
    ]


def width(pair, probe, s: dict) -> dict:
    """The four contenders at batch 1 (WIDTH_PROMPTS held-out prompts, one after another) and at the large batch,
    each run WIDTH_ROUNDS times, interleaved at each batch size; the shapes chosen from this machine's room where
    their knobs are 0. Goodput's row adds the shape its median run verified at each step (`goodput_fields`); it starts
    from what earlier goodput runs of this process learnt."""
    curve, room = machine_curve(pair)
    c = width_choice(room, s)
    drafter, depth, nodes, topk = model_drafter(pair), c["depth"], c["nodes"], c["topk"]
    rows, warm = [], []
    for b in (1, c["batch"]):
        prompts = batch_prompts("heldout", WIDTH_PROMPTS if b == 1 else b)
        configs = width_configs(drafter, depth, nodes, topk)
        jobs = {name: Job(prompts, cfg, sequential=b == 1) for name, cfg in zip(WIDTH_CONTENDERS, configs)}
        runs, w = timed_rounds(pair, jobs, WIDTH_ROUNDS)
        warm += [x | {"contender": f"{x['contender']}, batch {b}"} for x in w]
        for name, per_row in zip(WIDTH_CONTENDERS, (0, depth, nodes, None)):
            cl = cell_of_runs(runs[name])
            keys = ("verify_ms", "flops", "decode_flops", "tokens_per_step", "other_cores", *RATE_KEYS, *SHAPE_KEYS)
            own = goodput_fields(b, median_run(runs[name])) if per_row is None else {"tokens_per_pass": b * (per_row + 1)}
            rows.append({"batch": b, "contender": name} | own | {k: cl.get(k) for k in keys})
    ridge = ridge_tokens(pair.target_costs, probe.peak_flops, probe.peak_bandwidth)
    return {"drafter": drafter, "ridge_tokens": ridge, "depth": depth, "nodes": nodes, "topk": topk, "rows": rows} | {
        "chosen": c,
        "curve": curve,
        "warmup": warm,
    }


def width_ratio(m: dict, s: dict, key: str = "decode") -> float | None:
    """The tree's `key` ÷ the chain's at the large batch (the one the run chose, else the knob's); "decode": their
    decoding-alone tokens/s."""
    batch = max(r["batch"] for r in m["rows"])
    t, c = (cell(m["rows"], batch, name) for name in ("tree", "chain"))
    if not t or not c:
        return None
    if key == "decode":
        return ratio(t, c) if rate_of(c) else None
    return t[key] / c[key] if t.get(key) and c.get(key) else None


def width_models(m: dict, s: dict) -> list[tuple[str, float | None]]:
    return [
        ("if a wider pass cost nothing: the tree's tokens kept per step ÷ the chain's (measured)", width_ratio(m, s, "tokens_per_step"))
    ]


def gpu_passes(s: dict) -> list[tuple[str, int, int]]:
    """Plain, a chain of 4 and the tree, one row and at the large batch: the passes the GPU panel marks."""
    nodes, batch, out = int(s.get("nodes", 24) or 24), int(s.get("batch", 1) or 1), []
    for b in sorted({1, batch}):
        out += [(f"plain, batch {b}", b, 1), (f"chain k = 4, batch {b}", b, 5), (f"tree of {nodes}, batch {b}", b, nodes + 1)]
    return out


def step_shapes(traces: list) -> list[dict]:
    """The shape each decode step verified, in order (batch-1 prompts one after another): {"shape": plain, chain or
    tree, "nodes": draft nodes per row (0, k or n), "depth"}. From the trace alone: a tree step records its nodes
    (`Step.tree_nodes`, engine/decoding/decode.py), a chain drafted `Step.depth` tokens, a plain step none."""
    out = []
    for step in (s for t in traces for s in t.steps if s.kind == "decode"):
        if step.tree_nodes is not None:
            out.append({"shape": "tree", "nodes": step.tree_nodes, "depth": step.depth})
        else:
            out.append({"shape": "chain" if step.depth else "plain", "nodes": step.depth, "depth": step.depth})
    return out


def goodput_fields(batch: int, traces: list) -> dict:
    """A goodput row's own numbers, from its median run: the shape of each decode step, the mean draft nodes per
    row it verified, and its tokens per pass as batch × (mean nodes + 1), rounded (the fixed shapes' formula)."""
    shapes = step_shapes(traces)
    mean = sum(s["nodes"] for s in shapes) / len(shapes) if shapes else 0.0
    return {"tokens_per_pass": round(batch * (mean + 1)), "mean_nodes": mean, "shapes": shapes[:MAX_SHAPES]}


def shapes_text(shapes: list[dict]) -> str:
    """'plain decoding at 3, a chain at 5 (k = 2 to 4) and a tree at 4 (6 to 18 nodes, mean 9.5) of 12 decode steps'."""
    parts = []
    for kind, name in zip(SHAPES, ("plain decoding", "a chain", "a tree")):
        sizes = [s["nodes"] for s in shapes if s["shape"] == kind]
        if not sizes:
            continue
        lo, hi = min(sizes), max(sizes)
        what = "k = " if kind == "chain" else ""
        unit = (" node" if hi == 1 else " nodes") if kind == "tree" else ""
        size = "" if kind == "plain" else f" ({what}{lo}{unit})" if lo == hi else f" ({what}{lo} to {hi}{unit})"
        parts.append(f"{name} at {len(sizes)}{size}")
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{listed} of {len(shapes)} decode step{'s' if len(shapes) != 1 else ''}"


def nodes_per_row(r: dict) -> float:
    """Draft nodes per row a contender verified: goodput's measured mean, else its fixed shape's (0, k or n)."""
    return r["mean_nodes"] if r.get("mean_nodes") is not None else r["tokens_per_pass"] / r["batch"] - 1


# --- lesson 7: width ----------------------------------------------------------------------------
def pass_text(c: dict | None) -> str:
    """A bar's tokens per pass: a fixed shape's, or (≈) goodput's mean over its steps (its shape varies per step)."""
    if not c:
        return ""
    return f"≈{c['tokens_per_pass']} tok/pass" if c.get("mean_nodes") is not None else f"{c['tokens_per_pass']} tok/pass"


def width_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    """Decoding-alone tokens/s of plain, chain, tree and (newer measurements) goodput at both batches (the median on
    each bar, above its whisker; tokens per pass in its hover and the table), and tokens kept per step. What goodput
    chose per step is `shapes_figure`'s picture."""
    rows = m["rows"]
    xs = sorted({r["batch"] for r in rows})
    cats = [f"batch {b}" for b in xs]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("decoding tokens/s, all sequences", "tokens kept per step (per row)"))
    rates, emitted = [], []
    for i, name in enumerate(dict.fromkeys(r["contender"] for r in rows)):
        cells = [next((r for r in rows if r["batch"] == b and r["contender"] == name), None) for b in xs]
        vals = [decode_rate(c) if c else None for c in cells]
        color = PLAIN_COLOR if name == "plain decoding" else COLORS[i % len(COLORS)]
        common = {"name": name, "color": color, "legendgroup": str(i)}
        text = [f"{v[0]:.0f}" if v else "" for v in vals]
        rates.append({**common, "values": vals, "text": text, "hovertext": [pass_text(c) for c in cells]})
        kept = [(c.get("tokens_per_step") or (1.0 if name == "plain decoding" else None)) if c else None for c in cells]
        emitted.append(
            {**common, "values": [(k, None, None) for k in kept], "text": [f"{k:.2f}" if k else "" for k in kept], "showlegend": False}
        )
    grouped_bars(fig, cats, rates, row=1, col=1)
    grouped_bars(fig, cats, emitted, row=1, col=2)
    return frame(fig, "Tree against chain: tokens/s, and the tokens each step kept, inside the room and past it", label, height=400)


def width_table(result: dict) -> list[dict]:
    """Lesson 7's rows as a table: tokens per pass (what the verify pass carries; goodput's mean), draft nodes per
    row, tokens kept per step, tokens/s (median, and the runs' range), the verify pass's median time and FLOPs
    against plain decoding."""
    # the decode steps' FLOPs where the measurement kept them (the rounds read the prompt's pass warm); an older
    # recording ran every prompt pass and kept the whole run's, and says so
    flops_key = "decode_flops" if all(r.get("decode_flops") for r in result["rows"]) else "flops"
    flops_label = "decoding FLOPs × plain" if flops_key == "decode_flops" else "FLOPs × plain (whole run, prefill included)"
    out = []
    for r in result["rows"]:
        plain = cell(result["rows"], r["batch"], PLAIN)
        runs = rate_rounds(r)
        varies = r.get("mean_nodes") is not None
        out.append(
            {
                "batch": r["batch"],
                "contender": r["contender"],
                "tokens per pass": round(r["batch"] * (r["mean_nodes"] + 1), 1) if varies else r["tokens_per_pass"],
                "nodes per row (mean)": round(nodes_per_row(r), 2),
                "tokens kept per step": round(r["tokens_per_step"], 2)
                if r.get("tokens_per_step")
                else (1.0 if nodes_per_row(r) == 0 else None),  # plain decoding (or goodput choosing it throughout): one per pass
                "decoding tokens/s": round(rate_of(r), 1),
                "runs (decoding tokens/s)": ", ".join(f"{v:.1f}" for v in runs["values"]) if runs else "one run",
                "verify ms (median)": round(r["verify_ms"], 1) if r.get("verify_ms") is not None else None,
                flops_label: round(r[flops_key] / plain[flops_key], 2) if plain and plain.get(flops_key) else None,
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
        other = max((c for c in (cell(rows, r["batch"], n) for n in FIXED) if c), key=rate_of, default=None)
    else:
        return ""
    v = numbers.judge(rate_rounds(r), rate_rounds(other)) if other else None
    return f"× {other['contender']}: {v.interval}" if v else ""


SHAPE_COLORS = {"plain": PLAIN_COLOR, "chain": COLORS[1], "tree": COLORS[2]}  # as width_figure colours plain, chain, tree


SHAPE_PATTERNS = {"plain": "", "chain": "/", "tree": "x"}  # as width_figure hatches them (bars.PATTERNS)


SHAPE_NAMES = {"plain": "plain step", "chain": "chain of k", "tree": "tree of n nodes"}


HOVER = {
    "plain": "step %{x}: plain, 1 token per row<extra></extra>",
    "chain": "step %{x}: a chain of %{customdata[0]}, %{y} tokens per row<extra></extra>",
    "tree": "step %{x}: a tree of %{customdata[2]}, %{customdata[1]} deep, %{y} tokens per row<extra></extra>",
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
        f"batch {r['batch']}"
        + (" (prompts in turn)" if r["batch"] == 1 else "")
        + f": {len(r['shapes'])} steps, {nodes_per_row(r):.1f} draft nodes a row on average"
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
                width=0.8,  # one step wide: a shape's few steps would otherwise widen to the gaps between them
                name=SHAPE_NAMES[kind],
                marker={"color": SHAPE_COLORS[kind], "pattern": {"shape": SHAPE_PATTERNS[kind]}},
                customdata=[[s["nodes"], s["depth"], f"{s['nodes']} node{'s' if s['nodes'] != 1 else ''}"] for _, s in steps],
                hovertemplate=HOVER[kind],
                legendgroup=kind,
                showlegend=kind not in shown,
                row=i,
                col=1,
            )
            shown.add(kind)
        for tokens, what in ((m["depth"] + 1, "fixed chain"), (m["nodes"] + 1, "fixed tree")):
            line = {"dash": "dot", "color": "#555", "width": 1}
            fig.add_hline(
                y=tokens,
                line=line,
                annotation_text=f"{what}: {tokens}",
                annotation_position="top right",
                annotation={"bgcolor": "rgba(255,255,255,0.85)"},  # readable where a step's bar runs under it
                row=i,
                col=1,
            )
        top = max([m["nodes"]] + [s["nodes"] for s in r["shapes"]]) + 3
        fig.update_yaxes(title_text="tokens per row", range=[0, top], row=i, col=1)
        fig.update_xaxes(range=[0.5, len(r["shapes"]) + 0.5], row=i, col=1)  # steps from 1: no x tick at 0 beside the y axis's
    fig.update_xaxes(title_text="decode step", row=len(rows), col=1)
    fig = frame(fig, "What goodput chose at each step: plain, a chain of k, or a tree cut to n nodes", label, height=210 + 170 * len(rows))
    fig.update_layout(barmode="overlay", bargap=0.15)
    return fig


def notes(m: dict, s: dict) -> list[str]:
    """Per batch: what a tree pass emitted against a chain pass and what its verify pass cost (the table's columns),
    and the shapes goodput chose, step by step."""
    out = []
    for b in sorted({r["batch"] for r in m["rows"]}):
        tree, chain, good = (cell(m["rows"], b, n) for n in ("tree", "chain", GOODPUT))
        if tree and chain and tree.get("tokens_per_step") and chain.get("tokens_per_step") and tree.get("verify_ms"):
            out.append(
                f"Batch {b}: a tree pass emitted {tree['tokens_per_step']:.2f} tokens per row against the chain's "
                f"{chain['tokens_per_step']:.2f}, for a verify pass of {tree['verify_ms']:.1f} ms against {chain['verify_ms']:.1f}."
            )
        if good and good.get("shapes"):
            out.append(f"Batch {b}: goodput chose {shapes_text(good['shapes'])}.")
    return out


RECORD = Experiment(
    width,
    (
        Knob("l7_nodes", "Tree nodes", (0, 4, 6, 8, 16, 24), 0, CURVE_HELP + ": the widest tree whose one-row pass fits the room"),
        Knob("l7_topk", "Children per node (top-k)", (0, 2, 3, 4, 6), 0, "0: half the tree's nodes, 2 to 4"),
        Knob("l7_batch", "Large batch", (0, *WIDTH_BATCHES), 0, CURVE_HELP + ": the smallest batch whose tree pass carries 4× the room"),
    ),
    Prediction(
        "At the large batch, the tree's tokens/s ÷ the chain's (decoding alone; 1.0 = the same speed)?",
        "e.g. 1.2",
        width_ratio,
        width_models,
    ),
    needs=("eagle", "model"),
    notes=notes,
    table=lambda m, s: width_table(m),
    figures=lambda m, s, label: [width_figure(m, s, label), shapes_figure(m, label)],
    caption=CAPTION,
    numbers=lambda m, s: [
        (
            f"batch {r['batch']}, {r['contender']} "
            f"({'≈' * (r.get('mean_nodes') is not None)}{numbers.tokens(r['tokens_per_pass'])} per pass)",
            f"{rate_of(r):.1f} tokens/s decoding, {metrics.fmt(r.get('tokens_per_step'), '.2f')} emitted per pass",
        )
        for r in m["rows"]
    ],
    gpu_passes=gpu_passes,
    contest=lambda m, s: cell_contest(m, "tree", "chain"),
    plain=smallest_plain,
    more=("🔍 One draft-tree step, stage by stage (a recorded step, with the engine's code)", show_tree_step),
    name="width",
    schema={
        "drafter": "str",
        "ridge_tokens?": "num?",
        "depth": "int",
        "nodes": "int",
        "topk": "int",
        "rows": [
            {
                "batch": "int",
                "contender": "str",
                "tokens_per_s": "num",
                "tokens_per_step": "num?",
                "tokens_per_pass": "int",
                "verify_ms": "num?",
                "flops": "num",
                "decode_flops?": "num",  # the decode steps' FLOPs (newer measurements; "flops" is the whole run's)
                "tokens_per_s_runs?": SPREAD,
                "other_cores?": "num?",
                "decode_tokens_per_s?": "num?",
                "decode_tokens_per_s_runs?": SPREAD,
                # the goodput row (newer measurements): mean draft nodes per row, and each decode step's shape
                "mean_nodes?": "num+",
                "shapes?": [{"shape": ("plain", "chain", "tree"), "nodes": "nat", "depth": "nat"}],
                **ROW_SHAPES,
            }
        ],
        **CHOSEN,
        **WARMUP,
    },
    claims=(
        Claim(
            "Inside the room a tree is no slower than a chain",
            "the tree",
            "the chain",
            "batch 1",
            cell_rounds("tree", "chain", lambda m: 1),
            0,
            lead=True,
            applies=lambda m: None if has_room(m) else "this machine's room fits no tree wider than the chain",
        ),
        Claim(
            "Far past the room width costs",
            "the tree",
            "the chain",
            "the large batch",
            cell_rounds("tree", "chain", lambda m: m["chosen"]["batch"]),
            -1,
            lead=True,
        ),
    ),
)
