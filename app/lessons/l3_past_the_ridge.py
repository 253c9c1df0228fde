"""Lesson 3, past the room: speculation at batch 1 (its verify pass inside the room) and at a large batch (its verify
pass at 4× the room), with a drafter that costs something and with n-gram lookup; inside the room it pays, past it a
costly drafter loses and a cheap, often-accepted one can still pay.
"""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app.common.drafters import label as drafter_label
from app.common.measurement import CHOSEN, PAIR_RUN, WARMUP
from app.lessons.kit import knee, noise
from app.lessons.kit.against import round_rates
from app.lessons.kit.experiment import (
    CURVE_HELP,
    DEPTHS,
    Claim,
    Experiment,
    Knob,
    Prediction,
    by_batch,
    lane_jobs,
    lane_rounds,
    leviathan_models,
    leviathan_of,
    model_drafter,
    pair_numbers,
)
from app.lessons.kit.figures import COLORS, PLAIN_COLOR, RIDGE_COLOR, frame, grouped_bars
from app.lessons.kit.noise import serving_note, step_costs
from app.lessons.kit.runs import BATCH1_MORE, LARGE_BATCHES, inside_depth, lane_pair, machine_curve, more_rounds, timed_rounds
from app.lessons.kit.show import (
    consistent,
    context_note,
    room_of,
    show_chart,
    show_table,
    speedup_words,
    step_cost_words,
    verdict_words,
    warmup_note,
)
from app.views import metrics
from engine import verdict as rule
from engine.bench.prompts import batch_prompts
from engine.costs import ridge_tokens

# --- 3. inside the room and past it -------------------------------------------------------------------
RIDGE_ROUNDS = 3  # six contenders at two batch sizes, after a warm-up: three interleaved rounds keep a live run within


def ridge_settings(room: int, s: dict) -> dict:
    """Lesson 3's contenders from the room: the deepest draft whose batch-1 verify pass fits in it (at most MOST_DEPTH),
    and the smallest large batch whose verify pass carries knee.PAST× the room; a knob's non-zero value wins."""
    depth = int(s["depth"]) or inside_depth(room)
    return {"room": room, "depth": depth, "batch": int(s["batch"]) or knee.past_batch(room, depth, LARGE_BATCHES)}


def past_the_ridge(pair, probe, s: dict) -> dict:
    """A model drafter at batch 1 and at a large batch on held-out prompts, and the n-gram lookup at the large batch
    on extractive prompts (its best case) for contrast; each beside plain decoding of the same prompts, all six
    interleaved RIDGE_ROUNDS times after one warm-up run each, batch 1's pair BATCH1_MORE times more. Depth and
    large batch 0 are chosen from this machine's pass curve (ridge_settings), so batch 1's verify pass sits inside
    the room and the large batch's well past it."""
    drafter, tokens = model_drafter(pair), int(s["tokens"])
    curve, room = machine_curve(pair)
    chosen = ridge_settings(room, s)
    depth, batch = chosen["depth"], chosen["batch"]
    jobs = {}
    for b in (1, batch):
        for key, job in lane_jobs(batch_prompts("heldout", b), depth, drafter, 2 * tokens if b == 1 else tokens).items():
            jobs[(b, key)] = job
    for key, job in lane_jobs(batch_prompts("extractive", batch), depth, "ngram", tokens).items():
        jobs[("ngram", key)] = job
    runs, warm = timed_rounds(pair, jobs, RIDGE_ROUNDS)
    more_rounds(pair, {k: jobs[k] for k in ((1, "ar"), (1, "spec"))}, BATCH1_MORE, runs)
    return {
        "drafter": drafter,
        "runs": [{"batch": b, **lane_pair(runs[(b, "ar")], runs[(b, "spec")])} for b in (1, batch)],
        "ngram": lane_pair(runs[("ngram", "ar")], runs[("ngram", "spec")]),
        "ridge_tokens": ridge_tokens(pair.target_costs, probe.peak_flops, probe.peak_bandwidth),
        "curve": curve,
        "chosen": chosen,
        "warmup": warm,
    }


def large_batch_speedup(m: dict, s: dict) -> float | None:
    """Lesson 3's measured answer: the large batch's speedup decoding alone, the statistic its chart, table and words
    show (noise.speedup: the median over rounds), the compare ratio where the runs carry no rounds."""
    run = sorted(m["runs"], key=lambda r: r["batch"])[-1]
    sp = noise.speedup(run)
    return sp["value"] if sp else run["m"].get("speedup")


def contest(m: dict, s: dict) -> tuple:
    """The pair the prediction is about: speculation and plain decoding at the large batch, with their rounds."""
    run = max(m["runs"], key=lambda r: r["batch"])
    return f"speculation at batch {run['batch']}", "plain decoding", round_rates(run["spec"]), round_rates(run["ar"])


# --- lesson 3: inside the room and past it ------------------------------------------------------------
def ridge_run_line(label: str, batch: int, run: dict, depth: int) -> str:
    m = consistent(run)
    steps = (
        f"; {m['spec_decode_steps']} decode steps against {m['ar_decode_steps']} plain"
        if m.get("spec_decode_steps") and m.get("ar_decode_steps")
        else ""
    )
    verify = step_cost_words(m["median_verify_ratio"])
    return (
        f"- {label}, batch {batch}: {batch * (depth + 1)} tokens per pass (batch × (k + 1)); {verify or 'verify cost not recorded'}, "
        f"a whole step {metrics.fmt(m['step_cost_ratio'])}× ({run['spec']['draft_share']:.0%} of it drafting; means over the "
        f"decode steps); α {metrics.fmt(m['alpha'])}, {metrics.fmt(m.get('kept_per_step'))} tokens kept per sequence per step"
        f"{steps}; speedup decoding alone {speedup_words(run)}"
        + (f"; {metrics.fmt(run['spec'].get('tpot_ms'), '.1f')} ms per output token of a request" if run["spec"].get("tpot_ms") else "")
    )


def curve_line(result: dict, batch: int, depth: int) -> str | None:
    """The room of this machine's pass curve in words (knee.room_words) and where the two verify passes sit on it
    (None without a curve)."""
    curve, room = result.get("curve"), room_of(result)
    if not curve or not room:
        return None
    tokens, ms_ = curve["tokens"], curve["ms"]
    n1, n = depth + 1, batch * (depth + 1)
    where = "inside the room" if n1 <= room else f"already {n1 / room:.1f}× the room: this machine has no room for depth {depth}"
    priced = knee.cost_at(tokens, ms_, n) / knee.cost_at(tokens, ms_, batch)
    return (
        f"{knee.room_words(room, tokens, ms_)} (this machine's pass curve, measured {curve['measured_at'][:10]}.) Batch 1 at "
        f"depth {depth} verifies {n1} tokens per pass, {where}; batch {batch}'s verify pass carries {n} tokens, "
        f"{n / room:.1f}× the room, and the curve prices it at {priced:.2f}× a plain pass of the same batch ({batch} tokens)."
    )


def _ngram_line(result: dict, many: dict, name: str, bn: int) -> str | None:
    ng, mn = consistent(result["ngram"]), consistent(many)
    if ng["alpha"] is None or mn["alpha"] is None:
        return None
    s_mn = noise.speedup(many)
    better = round_speedups(result["ngram"], many)
    text = (
        f"The n-gram lookup at batch {bn}, the same {bn} × (k + 1) tokens per pass on extractive prompts, ran "
        f"{speedup_words(result['ngram'])} plain decoding, {verdict_words(result['ngram'])} "
        f"(the {name}: {s_mn['value'] if s_mn else mn['speedup']:.2f}×)"
    )
    kept_n, kept_m, step_n, step_m = ng.get("kept_per_step"), mn.get("kept_per_step"), ng.get("step_cost_ratio"), mn.get("step_cost_ratio")
    if None not in (kept_n, kept_m, step_n, step_m):
        text += (
            f". What decides it is tokens kept per step against what a step costs: the lookup kept {kept_n:.2f} tokens per "
            f"sequence per step for a step of {step_n:.2f} plain steps (drafting {result['ngram']['spec']['draft_share']:.0%} of it, "
            f"α {ng['alpha']:.2f}); the {name} kept {kept_m:.2f} for {step_m:.2f} (drafting {many['spec']['draft_share']:.0%}, "
            f"α {mn['alpha']:.2f})"
        )
    if better > 0 and noise.verdict(result["ngram"]) > 0:
        text += ". At the same pass size the drafter decided: cheap drafts accepted often still paid past the room, by the rule"
    elif better > 0:
        text += f". It beat the {name} by the rule, but not plain decoding"
    elif better < 0:
        text += f". It lost to the {name} by the rule: on this run the cheaper drafter did not help"
    else:
        text += ". Between the two drafters the rule names no winner (level, or can't tell with these rounds)"
    return text + "."


def _round_ratios(run: dict) -> list[float] | None:
    (a, _), (b, _) = noise.rate_runs(run.get("ar") or {}), noise.rate_runs(run.get("spec") or {})
    if not a or not b or len(a["values"]) != len(b["values"]):
        return None
    return [s / p for s, p in zip(b["values"], a["values"])]


def round_speedups(x: dict, y: dict) -> int:
    """+1 where pair x's speedup beat pair y's by the one rule (each round's speedup against the same round's), -1
    the other way, 0 neither or too few rounds."""
    rx, ry = _round_ratios(x), _round_ratios(y)
    return rule.judge(rx, ry).sign if rx and ry else 0


def past_the_ridge_conclusion(result: dict, depth: int | None = None) -> list[str]:
    """Lesson 3's conclusion: the room and where both passes sit on it, what a verify pass cost at each batch, the
    speedup decoding alone at each (beyond the spread or not, the whole run beside it), per-request latency, and
    what decides the n-gram run. depth: the settings' (a chosen depth in the measurement wins)."""
    depth = int((result.get("chosen") or {}).get("depth") or depth or 0)
    name = drafter_label(result["drafter"])
    one, many = sorted(result["runs"], key=lambda r: r["batch"])
    bn = many["batch"]
    lines = [
        f"With the {name}, decoding alone: {speedup_words(one)} at batch 1, {verdict_words(one)}; "
        f"{speedup_words(many)} at batch {bn}, {verdict_words(many)}"
        + metrics.speedup_reason(consistent(many), f"at batch {bn}", (noise.speedup(many) or {}).get("verdict"))
    ]
    ngram = _ngram_line(result, many, name, bn)
    if ngram:
        lines.append(ngram)
    (v1, s1), (vn, sn) = step_costs(one), step_costs(many)
    if v1 is not None and vn is not None:
        text = f"At batch 1 {step_cost_words(v1)}; at batch {bn} {step_cost_words(vn)}"
        if s1 is not None and sn is not None:
            text += f"; with drafting, a whole step cost {s1:.2f}× and {sn:.2f}× (means over the decode steps)"
        lines.append(text + ".")
    lines += [line for line in (curve_line(result, bn, depth),) if line]
    ridge = result.get("ridge_tokens")
    if ridge:
        lines.append(
            f"The probed peaks put the ridge at ≈ {ridge:.0f} tokens per pass for this model (an estimate from quick "
            "kernels; the curve above is measured)."
        )
    lines.append(serving_note(many["ar"], many["spec"], bn))
    return lines


# --- lesson 3: inside the room and past it ----------------------------------------------------------
def ridge_points(m: dict, s: dict) -> list[dict]:
    """One point per (drafter, batch): the speedup decoding alone as noise.speedup has it (the rule's ratio over the
    rounds, its 95% range, rounds far from the others), the whole run's, tokens per pass plain and speculative, α."""
    model = drafter_label(m["drafter"])
    runs = sorted(m["runs"], key=lambda r: r["batch"])
    pairs = [(model, r["batch"], r) for r in runs] + [("n-gram lookup, extractive prompts", runs[-1]["batch"], m["ngram"])]
    out = []
    for name, batch, run in pairs:
        depth = int(run["spec"].get("depth") or s.get("depth") or 0)
        sp, whole = noise.speedup(run), noise.speedup(run, whole=True)
        out.append(
            {
                "drafter": name,
                "batch": batch,
                "speedup": sp["value"] if sp else run["m"]["speedup"],
                "lo": sp["lo"] if sp else None,
                "hi": sp["hi"] if sp else None,
                "far": sp["far"] if sp else [],
                "decode": bool(sp and sp["decode"]),
                "whole": whole["value"] if whole else run["m"].get("whole_run_speedup"),
                "verdict": sp["verdict"] if sp else None,
                "plain_tokens": batch,
                "spec_tokens": batch * (depth + 1),
                "alpha": run["spec"]["summary"].get("alpha"),
            }
        )
    return out


def past_the_ridge_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    points = ridge_points(m, s)
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("speedup over plain decoding, decoding alone", "tokens per pass against this machine's room")
    )
    batches = sorted({p["batch"] for p in points})
    xs = [f"batch {b}" for b in batches]
    names = list(dict.fromkeys(p["drafter"] for p in points))
    at = {(p["drafter"], p["batch"]): p for p in points}
    series = []
    for i, name in enumerate(names):
        mine = [at.get((name, b)) for b in batches]
        vals = [(p["speedup"], p["lo"], p["hi"]) if p else None for p in mine]
        series.append({"name": name, "values": vals, "color": COLORS[i % len(COLORS)], "text": [f"{v[0]:.2f}×" if v else "" for v in vals]})
    centres = grouped_bars(fig, xs, series, row=1, col=1)
    whole = [(x, p["whole"]) for name, cs in zip(names, centres) for x, b in zip(cs, batches) if (p := at.get((name, b)))]
    fig.add_scatter(
        x=[x for x, _ in whole],
        y=[w for _, w in whole],
        mode="markers",
        marker={"symbol": "diamond-open", "size": 11, "color": "#333"},
        name="whole run, prefill included",
        row=1,
        col=1,
    )
    fig.add_hline(y=1.0, line_dash="dot", line_color="#333", row=1, col=1)  # named in the axis title: no label over a bar
    first = points[0]["drafter"]
    depth_tokens = {p["batch"]: p["spec_tokens"] for p in points if p["drafter"] == first}
    fig.add_bar(x=xs, y=batches, name="plain: tokens per pass", marker={"color": PLAIN_COLOR, "pattern": {"shape": "."}}, row=1, col=2)
    fig.add_bar(
        x=xs,
        y=[depth_tokens.get(b) for b in batches],
        name="speculative verify: tokens per pass",
        marker={"color": COLORS[0], "pattern": {"shape": "x"}},
        row=1,
        col=2,
    )
    room = room_of(m)
    if room:  # a legend entry, not a label on the line: it never lands on a bar
        fig.add_scatter(
            x=xs,
            y=[room] * len(xs),
            mode="lines",
            line={"color": RIDGE_COLOR, "dash": "dash"},
            name=f"this machine's room ≈ {room} tokens",
            row=1,
            col=2,
        )
    fig.update_yaxes(title_text="× plain decoding (dotted: 1× = no gain)", row=1, col=1)
    fig.update_yaxes(title_text="tokens per pass", row=1, col=2)
    return frame(fig, "Inside the room speculation pays; past it, each draft token costs time and the drafter decides", label, height=420)


def past_the_ridge_table(m: dict, s: dict) -> list[dict]:
    return [
        {
            "drafter": p["drafter"],
            "batch": p["batch"],
            "tokens per pass (plain → verify)": f"{p['plain_tokens']} → {p['spec_tokens']}",
            "speedup, decoding alone" if p["decode"] else "speedup (whole run only)": round(p["speedup"], 2),
            "95% range": f"{p['lo']:.2f}–{p['hi']:.2f}" if p["lo"] is not None else "one run",
            "verdict": (p["verdict"].kind if p["verdict"] else "one run: can't tell")
            + (f" (round {', '.join(str(i + 1) for i in p['far'])} far from the others, kept)" if p["far"] else ""),
            "whole run, prefill included": round(p["whole"], 2) if p["whole"] is not None else None,
            "α": round(p["alpha"], 2) if p["alpha"] is not None else None,
        }
        for p in ridge_points(m, s)
    ]


def show_past_the_ridge(m: dict, s: dict, label: str = "") -> None:
    context_note("past_the_ridge", m, label)
    show_chart(past_the_ridge_figure(m, s, label), "lesson3_fig")
    show_table(past_the_ridge_table(m, s))
    warmup_note(m)
    depth = int((m.get("chosen") or {}).get("depth") or s["depth"])
    with st.expander("Each run in words (verify cost, draft share)"):
        name = drafter_label(m["drafter"])
        runs = sorted(m["runs"], key=lambda r: r["batch"])
        lines = [ridge_run_line(name, r["batch"], r, depth) for r in runs]
        lines.append(ridge_run_line("n-gram lookup, extractive prompts", runs[-1]["batch"], m["ngram"], depth))
        st.markdown("\n".join(lines))
    st.success("\n\n".join(past_the_ridge_conclusion(m, depth)))


RECORD = Experiment(
    past_the_ridge,
    (
        Knob(
            "l3_depth",
            "Speculation depth k",
            (0, *DEPTHS),
            0,
            CURVE_HELP + ": the deepest draft whose batch-1 verify fits the room",
        ),
        Knob(
            "l3_batch",
            "Large batch",
            (0, *LARGE_BATCHES),
            0,
            CURVE_HELP + ": the smallest batch whose verify pass carries at least four times the room",
        ),
        Knob("l3_tokens", "New tokens per sequence (twice this at batch 1)", (8, 12, 16, 24, 32), 12),
    ),
    Prediction(
        "The speedup of speculation over plain decoding, decoding alone, at the large batch (its verify pass past this machine's room)?",
        "e.g. 1.5",
        large_batch_speedup,
        lambda m, s: leviathan_models(m["runs"][-1]["m"]),
    ),
    needs=("eagle", "model"),
    leviathan=lambda m, s: leviathan_of(m["runs"][-1]["m"], m["runs"][-1]),
    verdict=lambda m, s: past_the_ridge_conclusion(m, int(s.get("depth") or 0)),
    table=past_the_ridge_table,
    show=show_past_the_ridge,
    numbers=lambda m, s: pair_numbers([(f"batch {r['batch']}", r["m"], r) for r in m["runs"]] + [("n-gram", m["ngram"]["m"], m["ngram"])]),
    contest=contest,
    plain=lambda m: (lambda run: (run["batch"], run["ar"]))(min(m["runs"], key=lambda r: r["batch"])),
    name="past_the_ridge",
    schema={
        "drafter": "str",
        "runs": [{"batch": "int", **PAIR_RUN}],
        "ngram": PAIR_RUN,
        "ridge_tokens": "num?",
        **CHOSEN,  # this machine's pass curve, which chose the depth and the large batch (settings 0)
        **WARMUP,
    },
    claims=(
        Claim(
            "Inside the room speculation pays",
            "speculation",
            "plain decoding",
            "batch 1",
            lane_rounds("spec", "ar", by_batch(0)),
            1,
            lead=True,
        ),
        Claim(
            "Past the room the verify pass costs real time",
            "speculation (model drafter)",
            "plain decoding",
            "the large batch",
            lane_rounds("spec", "ar", by_batch(-1)),
            -1,
            lead=True,
        ),
        Claim(
            "Cheap drafts accepted often still pay past the room",
            "n-gram lookup",
            "plain decoding",
            "the large batch, extractive prompts",
            lane_rounds("spec", "ar", lambda m: m["ngram"]),
            1,
            lead=True,
        ),
    ),
)
