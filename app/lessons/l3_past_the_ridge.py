"""Lesson 3, past the room: speculation at batch 1 (its verify pass inside the room) and at a large batch (its verify
pass at 4× the room), with a drafter that costs something and with n-gram lookup; inside the room it pays, past it a
costly drafter loses and a cheap, often-accepted one can still pay.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.common.drafters import label as drafter_label
from app.common.measurement import CHOSEN, PAIR_RUN, WARMUP
from app.lessons.kit import numbers
from app.lessons.kit.experiment import (
    CURVE_HELP,
    DECODING_ALONE,
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
    room_of,
)
from app.lessons.kit.numbers import rate_rounds
from app.lessons.kit.runs import LARGE_BATCHES, chosen, inside_depth, lane_pair, machine_curve, more_rounds, timed_rounds
from app.lessons.kit.show import consistent
from app.views.bars import COLORS, PLAIN_COLOR, RIDGE_COLOR, frame, grouped_bars
from engine import verdict
from engine.bench.prompts import batch_prompts
from engine.costs import ridge_tokens

# --- 3. inside the room and past it -------------------------------------------------------------------
RIDGE_ROUNDS = 3  # six contenders at two batch sizes, after a warm-up: three interleaved rounds keep a live run within


# Batch 1's pair is cheap (a fraction of a second a round) and its short runs scatter, so lesson 3 gives it this many
# more rounds than the dear large batch (a live run stays within 20 s on 2 cores).
BATCH1_MORE = 2


LOOKUP_MORE = 2


def ridge_settings(room: int, s: dict) -> dict:
    """Lesson 3's contenders from the room: the deepest draft whose batch-1 verify pass fits in it (at most MOST_DEPTH),
    and the smallest large batch whose verify pass carries numbers.PAST× the room; a knob's non-zero value wins."""
    depth = int(s["depth"]) or inside_depth(room)
    return {"room": room, "depth": depth, "batch": int(s["batch"]) or numbers.past_batch(room, depth, chosen(LARGE_BATCHES))}


def past_the_ridge(pair, probe, s: dict) -> dict:
    """A model drafter at batch 1 and at a large batch on held-out prompts, and the n-gram lookup at the large batch
    on extractive prompts (its best case) for contrast; each beside plain decoding of the same prompts, all six
    interleaved RIDGE_ROUNDS times after one warm-up run each, batch 1's pair BATCH1_MORE times more and the lookup's
    LOOKUP_MORE times more (its accepted drafts end a run in a few decode steps, which one hiccup can halve). Depth and
    large batch 0 are chosen from this machine's pass curve (ridge_settings), so batch 1's verify pass sits inside
    the room and the large batch's well past it."""
    drafter, tokens = model_drafter(pair), int(s["tokens"])
    curve, room = machine_curve(pair)
    chosen = ridge_settings(room, s)
    depth, batch = chosen["depth"], chosen["batch"]
    jobs = {}
    for b in (1, batch):
        for key, job in lane_jobs(batch_prompts("heldout", b), depth, drafter, tokens).items():
            jobs[(b, key)] = job
    for key, job in lane_jobs(batch_prompts("extractive", batch), depth, "ngram", tokens).items():
        jobs[("ngram", key)] = job
    runs, warm = timed_rounds(pair, jobs, RIDGE_ROUNDS)
    more_rounds(pair, {k: jobs[k] for k in ((1, "ar"), (1, "spec"))}, BATCH1_MORE, runs)
    more_rounds(pair, {k: jobs[k] for k in (("ngram", "ar"), ("ngram", "spec"))}, LOOKUP_MORE, runs)
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
    show (numbers.speedup: the rule's ratio over the paired rounds), the compare ratio where the runs carry no rounds."""
    run = sorted(m["runs"], key=lambda r: r["batch"])[-1]
    sp = numbers.speedup(run)
    return sp["value"] if sp else run["m"].get("speedup")


def contest(m: dict, s: dict) -> tuple:
    """The pair the prediction is about: speculation and plain decoding at the large batch, with their rounds."""
    run = max(m["runs"], key=lambda r: r["batch"])
    return f"speculation at batch {run['batch']}", "plain decoding", rate_rounds(run["spec"]), rate_rounds(run["ar"])


# --- lesson 3: inside the room and past it ----------------------------------------------------------
def ridge_points(m: dict, s: dict) -> list[dict]:
    """One point per (drafter, batch): the speedup decoding alone as numbers.speedup has it (the rule's ratio over the
    rounds, its 95% range, rounds far from the others), tokens per pass plain and speculative, α. Decoding alone only:
    the rounds read each batch's prompt pass warm (app/lessons/kit/runs.py, prompt_store); lesson 2 shows that pass."""
    model = drafter_label(m["drafter"])
    runs = sorted(m["runs"], key=lambda r: r["batch"])
    pairs = [(model, r["batch"], r) for r in runs] + [("n-gram lookup, copy-this-text prompts", runs[-1]["batch"], m["ngram"])]
    out = []
    for name, batch, run in pairs:
        depth = int(run["spec"].get("depth") or s.get("depth") or 0)
        sp = numbers.speedup(run)
        cm = consistent(run)
        out.append(
            {
                "drafter": name,
                "batch": batch,
                "speedup": sp["value"] if sp else run["m"]["speedup"],
                "lo": sp["lo"] if sp else None,
                "hi": sp["hi"] if sp else None,
                "far": sp["far"] if sp else [],
                "decode": sp is not None,  # else an older recording's whole-run speedup (no decoding-alone rounds)
                "verdict": sp["verdict"] if sp else None,
                "plain_tokens": batch,
                "spec_tokens": batch * (depth + 1),
                "alpha": run["spec"]["summary"].get("alpha"),
                "kept": cm.get("kept_per_step"),
                "fewer": cm["ar_decode_steps"] / cm["spec_decode_steps"]
                if cm.get("ar_decode_steps") and cm.get("spec_decode_steps")
                else None,
                "step": cm.get("step_cost_ratio"),
                "drafting": run["spec"].get("draft_share"),
            }
        )
    return out


def past_the_ridge_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    points = ridge_points(m, s)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("speedup, decoding alone", "tokens per pass, and the room"))
    batches = sorted({p["batch"] for p in points})
    xs = [f"batch {b}" for b in batches]
    names = list(dict.fromkeys(p["drafter"] for p in points))
    at = {(p["drafter"], p["batch"]): p for p in points}
    series = []
    for i, name in enumerate(names):
        mine = [at.get((name, b)) for b in batches]
        vals = [(p["speedup"], p["lo"], p["hi"]) if p else None for p in mine]
        series.append({"name": name, "values": vals, "color": COLORS[i % len(COLORS)], "text": [f"{v[0]:.2f}×" if v else "" for v in vals]})
    grouped_bars(fig, xs, series, rule=1.0, row=1, col=1)
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
    return frame(fig, "Speculation against plain decoding, inside this machine's room and past it", label, height=420)


def past_the_ridge_table(m: dict, s: dict) -> list[dict]:
    return [
        {
            "drafter": p["drafter"],
            "batch": p["batch"],
            "tokens per pass (plain → verify)": f"{p['plain_tokens']} → {p['spec_tokens']}",
            "speedup, decoding alone" if p["decode"] else "speedup (whole run only)": round(p["speedup"], 2),
            "95% range": verdict.span(p["lo"], p["hi"]) if p["lo"] is not None else "one run",
            "verdict": (p["verdict"].kind if p["verdict"] else "one run: can't tell")
            + (f" (round {', '.join(str(i + 1) for i in p['far'])} far from the others, kept)" if p["far"] else ""),
            "α": round(p["alpha"], 2) if p["alpha"] is not None else None,
            "tokens kept per row per step": round(p["kept"], 2) if p["kept"] is not None else None,
            "decode steps, plain ÷ speculative": round(p["fewer"], 2) if p["fewer"] is not None else None,
            "a step's cost (plain steps)": round(p["step"], 2) if p["step"] is not None else None,
            "drafting share of a step": f"{p['drafting']:.0%}" if p["drafting"] is not None else None,
        }
        for p in ridge_points(m, s)
    ]


def notes(m: dict, s: dict) -> list[str]:
    """Why each run paid or lost: how many times fewer decode steps it took than plain decoding against what a step
    cost in plain steps (a speedup is about their ratio), read off the table's columns. In a batch the run lasts as
    long as its slowest row, so it takes fewer steps by less than the tokens a row kept per step."""
    out = []
    for p in ridge_points(m, s):
        if None not in (p["fewer"], p["step"], p["drafting"]):
            kept = ""
            if p["kept"] is not None and p["batch"] > 1:  # fewer steps by less than a row kept: the run waited for its slowest row
                kept = f"a row kept {p['kept']:.2f} tokens per step, {'but' if p['fewer'] < 0.95 * p['kept'] else 'and'} "
            out.append(
                f"{p['drafter']}, batch {p['batch']}: {kept}the run took {p['fewer']:.2f}× fewer steps than plain, "
                f"each costing {p['step']:.2f} plain steps ({p['drafting']:.0%} drafting)."
            )
    rule = (
        "A speedup is about the times fewer steps ÷ a step's cost in plain steps (one run's means; the speedup column:"
        " the rule's ratio). At batch 1 the first is the tokens a row kept per step; a batch"
        " waits for its slowest row."
    )
    return (out + [rule]) if out else []


CAPTION = DECODING_ALONE + (
    " A step's cost is the mean speculative step (drafting and verifying) over the mean plain step of the same batch."
)


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
        Knob("l3_tokens", "New tokens per sequence", (8, 12, 16, 24, 32), 16),
    ),
    Prediction(
        "The speedup of speculation over plain decoding, decoding alone, at the large batch (its verify pass past this machine's room)?",
        "e.g. 1.5",
        large_batch_speedup,
        lambda m, s: leviathan_models(m["runs"][-1]["m"]),
    ),
    needs=("eagle", "model"),
    leviathan=lambda m, s: leviathan_of(m["runs"][-1]["m"], m["runs"][-1]),
    notes=notes,
    table=past_the_ridge_table,
    figures=lambda m, s, label: [past_the_ridge_figure(m, s, label)],
    caption=CAPTION,
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
            "Inside the room, this drafter's speculation pays",
            "speculation",
            "plain decoding",
            "batch 1",
            lane_rounds("spec", "ar", by_batch(0)),
            1,
            lead=True,
        ),
        Claim(
            "Past the room, this drafter's speculation is slower than plain",
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
            "the large batch, copy-this-text prompts",
            lane_rounds("spec", "ar", lambda m: m["ngram"]),
            1,
            lead=True,
        ),
    ),
)
