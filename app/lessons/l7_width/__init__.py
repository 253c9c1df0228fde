"""Lesson 7, width: a chain against a draft tree (and goodput choosing per step), at batch 1 and at a large batch;
the claim is that inside the room a tree is no slower than a chain and that past the knee width costs.
"""

from __future__ import annotations

import streamlit as st

from app.common.drafters import label as drafter_label
from app.common.measurement import CHOSEN, SPREAD, WARMUP
from app.common.measurement import SHAPES as ROW_SHAPES
from app.lessons.kit import knee, noise
from app.lessons.kit.experiment import CURVE_HELP, Claim, Experiment, Knob, Prediction, cell_rounds, model_drafter
from app.lessons.kit.noise import runs_text
from app.lessons.kit.rows import (
    PLAIN,
    RATE_KEYS,
    SHAPE_KEYS,
    cell,
    cell_contest,
    load_rate,
    load_runs,
    ratio,
    smallest_plain,
)
from app.lessons.kit.runs import Job, cell_of_runs, machine_curve, median_run, timed_rounds
from app.lessons.kit.show import noise_note, settings_note, show_chart, show_table
from app.lessons.l0_one_step import show_tree_step
from app.lessons.l7_width.charts import CAPTION, shapes_figure, width_figure, width_table
from app.lessons.l7_width.goodput import FIXED, GOODPUT, goodput_conclusion, goodput_fields
from app.views import metrics
from engine import DecodeConfig
from engine.bench.prompts import batch_prompts
from engine.costs import ridge_tokens
from engine.options import tree_capacity

WIDTH_DEPTH, WIDTH_PROMPTS, WIDTH_TOKENS, WIDTH_ROUNDS = 4, 3, 16, 3  # most chain depth; prompts at batch 1; tokens; rounds


# (three rounds: five took a live run to 27 s in a browser, 2026-12-04)
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
    depth = knee.inside_depth(room, 1, most=WIDTH_DEPTH)
    nodes = int(s["nodes"]) or (room - 1 if room - 1 > depth else 2 * depth)
    topk = int(s["topk"]) or max(2, min(4, nodes // 2))
    nodes = min(nodes, tree_capacity(depth, topk))
    batch = int(s["batch"]) or knee.past_batch(room, nodes, WIDTH_BATCHES)
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
    their knobs are 0. Goodput's row adds the shape its median run verified at each step (app/lessons/width.py
    `goodput_fields`); it starts from what earlier goodput runs of this process learnt."""
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
            keys = ("verify_ms", "flops", "tokens_per_step", "other_cores", *RATE_KEYS, *SHAPE_KEYS)
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
        return ratio(t, c) if load_rate(c) else None
    return t[key] / c[key] if t.get(key) and c.get(key) else None


def width_models(m: dict, s: dict) -> list[tuple[str, float | None]]:
    return [("if a wider pass cost nothing: the tree's tokens per pass ÷ the chain's (measured)", width_ratio(m, s, "tokens_per_step"))]


def gpu_passes(s: dict) -> list[tuple[str, int, int]]:
    """Plain, a chain of 4 and the tree, one row and at the large batch: the passes the GPU panel marks."""
    nodes, batch, out = int(s.get("nodes", 24) or 24), int(s.get("batch", 1) or 1), []
    for b in sorted({1, batch}):
        out += [(f"plain, batch {b}", b, 1), (f"chain k = 4, batch {b}", b, 5), (f"tree of {nodes}, batch {b}", b, nodes + 1)]
    return out


def tree_verdict(tree: dict, chain: dict) -> tuple[int, str]:
    """The tree against the chain by the one rule over their interleaved rounds; and its interval in words."""
    v = noise.judge(load_runs(tree), load_runs(chain))
    if v is None:
        return 0, "one run each: can't tell"
    return v.sign, v.words("the tree", "the chain")


def _batch_line(batch: int, tree: dict, chain: dict, shape: str) -> tuple[str, int]:
    vs = ratio(tree, chain)
    verdict, why = tree_verdict(tree, chain)
    spread = load_runs(tree) and load_runs(chain)
    text = (
        f"Batch {batch}: the tree ({shape}) decoded {load_rate(tree):.1f} tokens/s, {vs:.2f}× the chain's {load_rate(chain):.1f} ({why})."
    )
    if spread:
        text += f" Tree {runs_text(load_runs(tree))}; chain {runs_text(load_runs(chain))}."
    if tree.get("tokens_per_step") and chain.get("tokens_per_step"):
        emitted = tree["tokens_per_step"] / chain["tokens_per_step"]
        text += (
            f" Each pass emitted {tree['tokens_per_step']:.2f} tokens per sequence against {chain['tokens_per_step']:.2f} ({emitted:.2f}×)"
        )
        if tree.get("verify_ms") and chain.get("verify_ms"):
            longer = tree["verify_ms"] / chain["verify_ms"]
            text += (
                f", and its verify pass of {tree['tokens_per_pass']} tokens took {tree['verify_ms']:.1f} ms "
                f"against {chain['verify_ms']:.1f} ms for the chain's {chain['tokens_per_pass']} ({longer:.2f}×)"
            )
            if verdict and (emitted > longer) == (verdict > 0):
                text += ": the extra tokens outweighed the longer pass" if verdict > 0 else ": the longer pass outweighed the extra tokens"
            elif verdict:
                text += ": the verify pass alone does not account for it (drafting the tree takes time too)"
            elif emitted > longer:
                text += (
                    ": per verify pass the extra tokens outweighed the longer pass, and with the tree's drafting added "
                    "the runs came out level"
                )
        text += "."
    return text, verdict


def width_conclusion(result: dict) -> list[str]:
    """Lesson 7's conclusion, from the measurement: the tree against the chain of the same depth at each batch
    size (a winner only by the one rule), then what the large batch's passes carried."""
    shape = f"{result['nodes']} nodes, top-{result['topk']}, depth {result['depth']}"
    lines, verdicts = [line for line in (room_line(result),) if line], {}
    for batch in sorted({r["batch"] for r in result["rows"]}):
        tree, chain = cell(result["rows"], batch, "tree"), cell(result["rows"], batch, "chain")
        if not tree or not chain or not load_rate(chain):
            continue
        line, verdicts[batch] = _batch_line(batch, tree, chain, shape)
        lines.append(line)
    if len(verdicts) == 2:
        (small, v_small), (large, v_large) = sorted(verdicts.items())
        word = {1: "faster than", -1: "slower than", 0: "not named faster or slower than"}
        text = f"The tree was {word[v_small]} the chain at batch {small} and {word[v_large]} it at batch {large}" + (
            "; a verdict only by the rule (the 95% range excludes 1 and the gap is at least 3%)."
            if v_small or v_large
            else ": the rule named no winner at either."
        )
        plain, chain, tree = (cell(result["rows"], large, n) for n in FIXED)
        if plain and chain and tree:
            text += (
                f" At batch {large} a plain pass carried {plain['tokens_per_pass']} tokens, the chain's verify pass "
                f"{chain['tokens_per_pass']} and the tree's {tree['tokens_per_pass']}: what grew the pass was the "
                f"tree's own width ({result['nodes'] + 1} positions per row against {result['depth'] + 1})."
            )
            ridge = result.get("ridge_tokens")
            if ridge:
                side = {n: "below" if n < ridge else "at or above" for n in (plain["tokens_per_pass"], tree["tokens_per_pass"])}
                text += (
                    f" Against the ridge from the probed peaks (≈ {ridge:.0f} tokens per pass), the plain pass is "
                    f"{side[plain['tokens_per_pass']]} it and the tree's {side[tree['tokens_per_pass']]} it."
                )
            kept = (tree["tokens_per_step"] - 1) / result["nodes"] if tree.get("tokens_per_step") else None
            if kept is not None and 0 <= kept <= 1:
                text += f" {1 - kept:.0%} of the tree's nodes were rejected at batch {large}."
        lines.append(text)
    return lines + goodput_conclusion(result)


def room_line(result: dict) -> str | None:
    """What this machine's curve leaves for width, in words computed from it (newer measurements)."""
    c, curve = result.get("chosen"), result.get("curve")
    if not c or not curve:
        return None
    t, ms = curve["tokens"], curve["ms"]
    k, n, b = c["depth"], c["nodes"], c["batch"]
    text = knee.room_words(c["room"], t, ms) + (
        f" At batch 1 the chain of {k} puts {k + 1} tokens in a verify pass ({knee.cost_at(t, ms, k + 1):.2f}× a "
        f"one-token pass) and the tree of {n} nodes {n + 1} ({knee.cost_at(t, ms, n + 1):.2f}×); "
    )
    if has_room(result):
        text += "both fit the room, so here the tree's extra nodes ride on idle compute. "
    else:
        text += (
            f"this machine has no room for width: a tree wider than the chain does not fit within {knee.ROOM:.2f}× a "
            "one-token pass even at batch 1, so every extra node costs time here. The re-timed H200 view below prices "
            "these same passes on a GPU, whose room is far larger. "
        )
    return text + (
        f"At batch {b} the tree's pass carries {b * (n + 1)} tokens ({knee.cost_at(t, ms, b * (n + 1)):.2f}×), the "
        f"chain's {b * (k + 1)} ({knee.cost_at(t, ms, b * (k + 1)):.2f}×), plain decoding's {b} ({knee.cost_at(t, ms, b):.2f}×)."
    )


def show_width(m: dict, s: dict, label: str = "") -> None:
    st.markdown(f"Drafter: {drafter_label(m['drafter'])}; the contenders interleaved at each batch size.")
    settings_note(m, s)
    show_chart(width_figure(m, s, label), "lesson7_fig")
    steps = shapes_figure(m, label)  # what goodput chose per step (None: an older recording without it)
    if steps is not None:
        show_chart(steps, "lesson7_steps")
        st.caption(CAPTION)
    noise_note(m["rows"])
    show_table(width_table(m))
    st.success("\n\n".join(width_conclusion(m)))


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
    verdict=lambda m, s: width_conclusion(m),
    table=lambda m, s: width_table(m),
    show=show_width,
    numbers=lambda m, s: [
        (
            f"batch {r['batch']}, {r['contender']} ({'≈' * (r.get('mean_nodes') is not None)}{r['tokens_per_pass']} tokens per pass)",
            f"{load_rate(r):.1f} tokens/s decoding, {metrics.fmt(r.get('tokens_per_step'), '.2f')} emitted per pass",
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
            "Past the knee width costs",
            "the tree",
            "the chain",
            "the large batch",
            cell_rounds("tree", "chain", lambda m: m["chosen"]["batch"]),
            -1,
            lead=True,
        ),
    ),
)
