"""Lesson 2, more FLOPs yet faster: plain and speculative decoding of the same prompt at batch 1, interleaved, with
FLOPs, bytes and time per decoded token; the claim is that speculation does more arithmetic and still wins.
"""

from __future__ import annotations

import statistics

import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app.common.measurement import CHOSEN, DECODE_COSTS, PAIR_RUN, SEED_PASS, WARMUP
from app.lessons.kit import numbers
from app.lessons.kit.experiment import (
    CURVE_HELP,
    DEPTHS,
    Claim,
    Experiment,
    Knob,
    Prediction,
    lane_jobs,
    lane_rounds,
    leviathan_of,
    pair_numbers,
)
from app.lessons.kit.numbers import SAME_TIME, rate_rounds
from app.lessons.kit.runs import inside_depth, lane_pair, machine_curve, median_run, timed_rounds
from app.views import metrics
from app.views.bars import COLORS, WASTE_COLOR, frame
from engine import verdict as rule
from engine.bench.prompts import batch_prompts
from engine.decoding.passcurve import pass_costs

# --- 2. speculation does more work, and the seed's k + 1 tokens per pass ------------------------------
MORE_ROUNDS = 5  # two short batch-1 lanes: five interleaved rounds (after a warm-up) stay well inside 20 s


SEED_CONTEXT, SEED_ROUNDS = 150, 3


def seed_passes(pair, depth: int) -> dict:
    """Barrow's example: k+1 tokens per pass made two ways, batch k+1 at depth 0 and batch 1 at depth k, timed
    back to back (SEED_ROUNDS rounds alternating the two, 5 timed passes each), with the engine's counted FLOPs
    and bytes split into weights and KV cache (engine/costs.py forward_flops / forward_bytes)."""
    n = depth + 1
    shapes = {f"batch {n} at depth 0 (one new token per row)": (n, 1), f"batch 1 at depth {depth} (last token + {depth} drafts)": (1, n)}
    times = {label: [] for label in shapes}
    rows = {}
    for _ in range(SEED_ROUNDS):
        for label, (batch, new) in shapes.items():
            row = pass_costs(pair, [batch], [new], context=SEED_CONTEXT, repeats=5)[0]
            times[label].append(row["ms"])
            rows[label] = row
    weights = float(pair.target_costs.weight_bytes)
    passes = [
        {
            "label": label,
            "batch": batch,
            "new_tokens": new,
            "tokens_per_pass": batch * new,
            "ms": statistics.median(times[label]),
            "flops": rows[label]["flops"],
            "weight_bytes": weights,
            "kv_bytes": rows[label]["bytes"] - weights,
            "times_ms": times[label],
        }
        for label, (batch, new) in shapes.items()
    ]
    return {"context": SEED_CONTEXT, "rounds": SEED_ROUNDS, "passes": passes}


def more_flops(pair, probe, s: dict) -> dict:
    """The n-gram lookup against plain decoding on an extractive prompt (batch 1) at a depth inside this machine's
    room (depth 0: inside_depth), MORE_ROUNDS interleaved rounds after a warm-up; the decode steps' FLOPs and
    bytes of each median run; and Barrow's seed passes at depth + 1 tokens."""
    curve, room = machine_curve(pair)
    depth = int(s["depth"]) or inside_depth(room)
    jobs = lane_jobs(batch_prompts("extractive", 1), depth, "ngram", int(s["tokens"]), warm=False)  # its table shows the whole run
    runs, warm = timed_rounds(pair, jobs, MORE_ROUNDS)
    costs = {name: metrics.decode_totals(median_run(runs[name])) for name in ("ar", "spec")}
    return lane_pair(runs["ar"], runs["spec"]) | {
        "seed": seed_passes(pair, depth),
        "decode_costs": costs,
        "chosen": {"room": room, "depth": depth},
        "curve": curve,
        "warmup": warm,
    }


def per_token(m: dict) -> dict | None:
    """Lesson 2's decode steps per decoded token, speculative ÷ plain: FLOPs, bytes moved, and time (decode rates)."""
    costs = m.get("decode_costs")
    if not costs or not costs["ar"]["tokens"] or not costs["spec"]["tokens"]:
        return None
    a, b = costs["ar"], costs["spec"]
    sp = numbers.speedup(m)
    return {
        "flops": (b["flops"] / b["tokens"]) / (a["flops"] / a["tokens"]),
        "bytes": (b["bytes"] / b["tokens"]) / (a["bytes"] / a["tokens"]),
        "time": 1 / sp["value"] if sp else None,
        "wasted": b["flops_wasted"] / b["flops"] if b["flops"] else 0.0,
    }


def operations_models(m: dict, s: dict) -> list[tuple[str, float | None]]:
    return [("Leviathan's operations factor, Theorem 3.11 (decode steps only)", m["m"].get("operations_factor"))]


def seed_conclusion(seed: dict) -> str:
    """Barrow's example measured: k+1 tokens per pass as a batch of k+1 at depth 0 and as one row at depth k."""
    wide, deep = seed["passes"]
    ratio = wide["ms"] / deep["ms"] if deep["ms"] > 0 else None
    n = wide["tokens_per_pass"]
    told = rule.cheaper(wide["times_ms"], deep["times_ms"]) if ratio is not None else None
    if told is not None:  # the rule judges rates (1 / ms); the page states times: the wide pass's ms ÷ the deep one's
        ratio, lo, hi = 1 / told.ratio, (1 / told.hi if told.hi else None), (1 / told.lo if told.lo else None)
    if ratio is None:
        timing = "One of the passes took no measurable time."
    elif told.kind == "level":
        timing = (
            f"They took the same time within noise ({wide['ms']:.1f} against {deep['ms']:.1f} ms, medians; round by round "
            f"{ratio:.2f}×: level by the rule), as Barrow's example says: the pass costs what its {n} tokens cost, however "
            "they were gathered."
        )
    elif told.sign == 0 and 1 / SAME_TIME <= ratio <= SAME_TIME:
        span = f", 95% range {rule.span(lo, hi)}" if lo else ""
        timing = (
            f"The rule cannot tell them apart ({wide['ms']:.1f} against {deep['ms']:.1f} ms, medians; round by round {ratio:.2f}×{span}): "
            f"within this run's noise the pass costs what its {n} tokens cost, however they were gathered, as Barrow's "
            "example says."
        )
    elif told.sign == 0:  # far apart, yet the rounds scatter too widely for the rule: the run cannot test the example
        timing = (
            f"This run cannot tell: {wide['ms']:.1f} against {deep['ms']:.1f} ms (medians; round by round {ratio:.2f}×), but the "
            f"rounds scatter too widely for the rule to name either, so Barrow's example is not tested here; re-measure on a "
            "quieter machine."
        )
    else:
        more = "longer" if ratio > 1 else "less time"
        size = (
            f"a gap the rule names, yet within the {SAME_TIME:.2f}× this page calls about the same: the pass costs about "
            f"what its {n} tokens cost, however they were gathered, plus what its rows read"
            if 1 / SAME_TIME <= ratio <= SAME_TIME
            else f"a difference the rule names and more than the {SAME_TIME:.2f}× this page calls about the same"
        )
        timing = (
            f"The batch-{wide['batch']} pass took {more}: {wide['ms']:.1f} against {deep['ms']:.1f} ms "
            f"(medians; round by round {ratio:.2f}×" + (f", 95% range {rule.span(lo, hi)}" if lo else "") + f"), {size}."
        )
    kv = wide["kv_bytes"] / deep["kv_bytes"] if deep["kv_bytes"] else None
    return (
        f"Both passes carry {n} tokens and read the weights once. {timing} What differs is the KV cache: "
        f"{wide['batch']} rows of context read {wide['kv_bytes'] / 1e6:.2f} MB against {deep['kv_bytes'] / 1e6:.2f} MB for "
        f"one row" + (f" ({kv:.1f}×)" if kv else "") + f"; and the batch moves {wide['batch']} sequences one token each, "
        f"the row one sequence by 1 plus the drafts the target accepts."
    )


# --- lesson 2: more FLOPs, fewer bytes, less time -------------------------------------------------
def more_flops_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    """Left: speculative ÷ plain per decoded token (decoding alone): FLOPs, bytes moved and time, against the line
    of 1×. Right: FLOPs per decoded token, on kept tokens and on rejected drafts, plain against speculative."""
    titles = ("speculative ÷ plain, per decoded token", "FLOPs per decoded token (MFLOP)")
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, column_widths=[0.55, 0.45])
    ratios = per_token(m)
    if ratios:
        names = ["FLOPs done", "bytes moved", "time"]
        ys = [ratios["flops"], ratios["bytes"], ratios["time"]]
        fig.add_bar(
            x=names,
            y=ys,
            marker={"color": [COLORS[0], COLORS[1], COLORS[2]], "pattern": {"shape": ["", "/", "."]}},
            text=[f"{y:.2f}×" if y is not None else "" for y in ys],
            textposition="outside",
            name="speculative ÷ plain",
            showlegend=False,
            row=1,
            col=1,
        )
        fig.add_hline(y=1.0, line_dash="dot", line_color="#333", annotation_text="1× = the same as plain", row=1, col=1)
        costs = m["decode_costs"]
        lanes = [("plain", costs["ar"]), ("speculative", costs["spec"])]
        useful = [(c["flops"] - c["flops_wasted"]) / c["tokens"] / 1e6 for _, c in lanes]
        wasted = [c["flops_wasted"] / c["tokens"] / 1e6 for _, c in lanes]
        fig.add_bar(x=[n for n, _ in lanes], y=useful, name="FLOPs on kept tokens", marker_color=COLORS[0], row=1, col=2)
        fig.add_bar(
            x=[n for n, _ in lanes],
            y=wasted,
            name="FLOPs on rejected drafts (wasted)",
            marker={"color": WASTE_COLOR, "pattern": {"shape": "/"}},
            row=1,
            col=2,
        )
    frame(fig, "FLOPs, bytes moved and time per decoded token: speculative decoding against plain", label)
    fig.update_layout(barmode="stack")
    return fig


def more_flops_table(m: dict, s: dict) -> list[dict]:
    costs = m.get("decode_costs") or {}
    sp, ratios = numbers.speedup(m), per_token(m)
    out = []
    for name, key in (("plain", "ar"), ("speculative", "spec")):
        ln, c = m[key], costs.get(key)
        runs = rate_rounds(ln)
        whole = ln.get("tokens_per_s_runs")
        out.append(
            {
                "decoding": name,
                "tokens/s, decoding alone": round(runs["median"], 1) if runs else None,
                "rounds": f"{runs['min']:.0f}–{runs['max']:.0f}" if runs else "one run",
                "× plain (the rule's ratio, 95% range)": "1 (the yardstick)"
                if key == "ar"
                else (
                    f"{sp['value']:.2f}× ({rule.span(sp['lo'], sp['hi'])})" if sp and sp["lo"] else f"{sp['value']:.2f}×" if sp else None
                ),
                "tokens/s, whole run (prefill included)": round(whole["median"], 1) if whole else None,
                "decode passes": int(ln["decode_steps"]),
                "MFLOP per decoded token": round(c["flops"] / c["tokens"] / 1e6) if c else None,
                "MB moved per decoded token": round(c["bytes"] / c["tokens"] / 1e6, 1) if c else None,
                "FLOPs per token × plain": round(ratios["flops"], 2) if ratios and key == "spec" else None,
                "bytes per token × plain": round(ratios["bytes"], 2) if ratios and key == "spec" else None,
            }
        )
    return out


def show_seed(m: dict, s: dict, label: str = "") -> None:
    """Barrow's example, measured: k + 1 tokens per pass as a batch at depth 0 and as one row at depth k."""
    seed = m["seed"]
    st.markdown(
        f"**Barrow's example: {seed['passes'][0]['tokens_per_pass']} tokens per pass, made two ways** (one "
        f"target pass each over a {seed['context']}-token context; {seed['rounds']} rounds alternating the two, "
        "median of 5 timed passes per round; FLOPs and bytes are the engine's counts, engine/costs.py)"
    )
    rows = [
        {
            "pass": p["label"],
            "ms (median)": round(p["ms"], 2),
            "rounds (ms)": ", ".join(f"{t:.1f}" for t in p["times_ms"]),
            "GFLOP": round(p["flops"] / 1e9, 3),
            "weight MB": round(p["weight_bytes"] / 1e6, 1),
            "KV MB": round(p["kv_bytes"] / 1e6, 2),
        }
        for p in seed["passes"]
    ]
    st.dataframe(rows, hide_index=True)
    st.info(seed_conclusion(seed))


def notes(m: dict, s: dict) -> list[str]:
    """FLOPs and bytes per decoded token against plain decoding, and the decode passes each took (the table's columns)."""
    r = per_token(m)
    if r is None:
        return []
    more = "more arithmetic, fewer bytes" if r["flops"] >= 1 and r["bytes"] < 1 else "read the bars above"
    return [
        f"Per decoded token, speculation did {r['flops']:.2f}× plain decoding's FLOPs and moved {r['bytes']:.2f}× its "
        f"bytes: {more}. It took {int(m['spec']['decode_steps'])} decode passes against {int(m['ar']['decode_steps'])}."
    ]


CAPTION = (
    "Decoding alone: the decode steps' tokens over their time, the prompt's pass (prefill) left out; the whole-run column"
    " keeps it in (every run here runs its prompt's pass). FLOPs and bytes are the engine's counts (engine/costs.py)"
    " over the decode passes of both models."
)


RECORD = Experiment(
    more_flops,
    (
        Knob("l2_depth", "Speculation depth k", (0, *DEPTHS), 0, CURVE_HELP + ": the deepest draft whose verify pass fits in the room"),
        Knob("l2_tokens", "New tokens", (16, 32, 64), 32),
    ),
    Prediction(
        "Per decoded token (decoding alone: the prompt's pass left out), speculative decoding does how many times "
        "the FLOPs of plain decoding?",
        "e.g. 0.8",
        lambda m, s: (per_token(m) or {}).get("flops"),
        operations_models,
    ),
    leviathan=lambda m, s: leviathan_of(m["m"], m),
    notes=notes,
    table=more_flops_table,
    figures=lambda m, s, label: [more_flops_figure(m, s, label)],
    caption=CAPTION,
    extra=show_seed,
    numbers=lambda m, s: pair_numbers([("speculative", m["m"], m)], whole=True)
    + [("FLOPs per decoded token, speculative ÷ plain", metrics.fmt((per_token(m) or {}).get("flops"), ".2f", "×"))]
    + [(p["label"], f"{p['ms']:.2f} ms, {p['flops'] / 1e9:.2f} GFLOP, KV {p['kv_bytes'] / 1e6:.1f} MB") for p in m["seed"]["passes"]],
    contest=lambda m, s: ("the n-gram lookup", "plain decoding", rate_rounds(m["spec"]), rate_rounds(m["ar"])),
    plain=lambda m: (int((m.get("chosen") or {}).get("batch", 1)), m["ar"]),
    name="more_flops",
    schema={
        **PAIR_RUN,
        "seed": {"context": "int", "rounds": "int", "passes": [SEED_PASS]},
        "decode_costs?": {"ar": DECODE_COSTS, "spec": DECODE_COSTS},
        **CHOSEN,
        **WARMUP,
    },
    claims=(Claim("More FLOPs, yet faster", "speculation", "plain decoding", "batch 1", lane_rounds("spec", "ar"), 1, lead=True),),
)
