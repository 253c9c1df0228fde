"""Lesson 5, adaptive per-sequence depth: drafting all k against stopping where the drafter is unsure (a joint
confidence gate), at batch 1 and at a larger batch; the claim is that the gate pays, most where guesses cost.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.common.drafters import label as drafter_label
from app.common.measurement import CHOSEN, LANE, NUMBERS, WARMUP
from app.lessons.kit import numbers
from app.lessons.kit.experiment import (
    CURVE_HELP,
    DECODING_ALONE,
    Claim,
    Experiment,
    Knob,
    Prediction,
    lane_rounds,
    leviathan_of,
    model_drafter,
    pair_numbers,
)
from app.lessons.kit.gpu import verify_passes
from app.lessons.kit.numbers import decode_rate, decode_ratio, rate_rounds
from app.lessons.kit.runs import Job, lane_pair, machine_curve, timed_rounds
from app.views.bars import COLORS, frame, grouped_bars
from app.views.h200 import CEILING, MEASURED, Priced, h200_lane
from engine import DecodeConfig
from engine import verdict as rule
from engine.bench.prompts import batch_prompts

# --- 5. adaptive per sequence -----------------------------------------------------------------------
GATE_TOKENS = (32, 16)  # new tokens per sequence at batch 1 and at the large batch


GATE_BATCHES = (2, 4, 8)  # the large batch's candidates


GATE_ROUNDS = 4


def gate_choice(room: int, s: dict) -> dict:
    """Lesson 5's depth (knob 0: the deepest draft a one-row verify pass fits inside the room) and its two batches:
    1, and the smallest batch whose verify pass carries PAST x the room's tokens."""
    depth = int(s["depth"]) or numbers.inside_depth(room, 1, most=8)
    return {"room": int(room), "depth": depth, "batch": numbers.past_batch(room, depth, GATE_BATCHES)}


def adaptive(pair, probe, s: dict) -> dict:
    """Depth k drafting every token vs stopping below a joint confidence, at batch 1 and far past the room, with plain
    decoding; the three interleaved GATE_ROUNDS times at each batch after a warm-up run each."""
    curve, room = machine_curve(pair)
    c = gate_choice(room, s)
    drafter, depth, threshold = model_drafter(pair), c["depth"], float(s["conf"])
    out, warm = [], []
    for batch, tokens in zip((1, c["batch"]), GATE_TOKENS):
        prompts = batch_prompts("heldout", batch)
        jobs = {"ar": Job(prompts, DecodeConfig(mode="autoregressive", max_new_tokens=tokens))}
        for name, t in (("fixed", 0.0), ("gated", threshold)):
            jobs[name] = Job(prompts, DecodeConfig(depth=depth, drafter=drafter, max_new_tokens=tokens, confidence_threshold=t))
        runs, w = timed_rounds(pair, jobs, GATE_ROUNDS)
        warm += [x | {"contender": f"{x['contender']}, batch {batch}"} for x in w]
        fixed, gated = lane_pair(runs["ar"], runs["fixed"]), lane_pair(runs["ar"], runs["gated"])
        out.append(
            {
                "batch": batch,
                "ar": fixed["ar"],
                "fixed": fixed["spec"],
                "gated": gated["spec"],
                "m_fixed": fixed["m"],
                "m_gated": gated["m"],
            }
        )
    return {"drafter": drafter, "batches": out, "chosen": c, "curve": curve, "warmup": warm}


def verified_slots(lane: dict) -> tuple[int, int]:
    """(draft positions the target verified, real draft tokens among them): the rest is padding, the slots of rows
    that had stopped drafting while another row in the batch went on (app/common/measurement.py `verified_slots`)."""
    slots, real = lane["verified_slots"]
    return slots, real


def _per_token(p: Priced) -> tuple[float, float]:
    return p.target_ms / p.tokens, p.draft_ms / p.tokens


def _change(saved: float) -> str:
    return f"{abs(saved):.2f} ms {'less' if saved >= 0 else 'more'}"


def _how_priced(kind: str, drafter: str) -> str:
    if kind == MEASURED:
        return f"the {drafter_label(drafter)}'s drafting measured on the H200 machine"
    return f"the {drafter_label(drafter)}'s drafting from the roofline predictor for its own shape, a model"


def gate_lines(m: dict) -> list[str]:
    """Lesson 5 on the H200: at each batch, the median gated and all-drafts runs re-timed, their time per decode token
    split into the target's passes and drafting, and which of the two the gate changed most; where drafting is not
    priced, that these numbers cannot say what the gate saves in drafting."""
    out = []
    for b in m.get("batches") or []:
        drafter = str(b["fixed"].get("drafter") or m.get("drafter") or "")
        fixed, gated = (h200_lane(b[key], drafter) for key in ("fixed", "gated"))
        if fixed.rate is None or gated.rate is None:
            out.append(f"At batch {b['batch']} the runs cannot be re-timed on the H200: {(fixed if fixed.rate is None else gated).note}.")
            continue
        (ft, fd), (gt, gd) = _per_token(fixed), _per_token(gated)
        if CEILING in (fixed.drafting, gated.drafting):
            out.append(
                f"At batch {b['batch']}, re-timed on the H200 with {CEILING} (the {drafter_label(drafter)} has no "
                f"H200 price), the gated run's target passes cost {gt:.2f} ms per token against {ft:.2f} drafting all k: "
                "what the gate saves in drafting is not in these numbers."
            )
            continue
        saved_t, saved_d = ft - gt, fd - gd
        mostly = "drafting" if abs(saved_d) >= abs(saved_t) else "the target's passes"
        out.append(
            f"At batch {b['batch']}, re-timed on the H200 ({_how_priced(fixed.drafting, drafter)}): drafting all k cost "
            f"{ft + fd:.2f} ms per token ({fd:.2f} of it drafting), the gate {gt + gd:.2f} ({gd:.2f} drafting). The gate "
            f"spent {_change(saved_d)} per token on drafting and {_change(saved_t)} on the target's passes, so what it "
            f"changed most there was {mostly}. (The median run of each, priced once: what the gate trades, not a verdict.)"
        )
    return out


def gate_ratio(m: dict, s: dict) -> float | None:
    """At batch 1, the gated run's decoding-alone speed over drafting all k's: the one rule's ratio over the
    interleaved rounds, the number the verdict sentence states."""
    b = m["batches"][0]
    v = numbers.judge(rate_rounds(b["gated"]), rate_rounds(b["fixed"]))
    return v.ratio if v else None


def gate_models(m: dict, s: dict) -> list[tuple[str, float | None]]:
    b = m["batches"][0]
    out = []
    for name, key in (
        ("Leviathan, Theorem 3.8", "predicted_speedup"),
        ("Leviathan with the measured verify cost", "predicted_measured_verify"),
    ):
        g, f = b["m_gated"].get(key), b["m_fixed"].get(key)
        out.append((f"{name}: gated ÷ fixed", g / f if g is not None and f else None))
    return out


# --- lesson 5: adaptive depth -------------------------------------------------------------------
def adaptive_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    """Per batch: drafts per step and tokens kept per step, all drafts against the confidence gate."""
    conf, depth_k = float(s.get("conf", 0)), int((m.get("chosen") or s).get("depth", 0))
    fig = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=("drafted per step (depth)", "kept per step", "× plain, decoding alone"),
    )
    xs = [f"batch {b['batch']}" for b in m["batches"]]
    panels = {1: [], 2: [], 3: []}
    for i, (key, name) in enumerate((("fixed", f"up to {depth_k} drafts"), ("gated", f"stop below {conf:.2f}"))):
        depth = [b[f"m_{key}"].get("drafted_depth") for b in m["batches"]]
        kept = [b[key]["summary"].get("tokens_per_step") for b in m["batches"]]
        speed = [decode_ratio(b[key], b["ar"]) for b in m["batches"]]
        common = {"name": name, "color": COLORS[i], "legendgroup": key}
        panels[1].append(
            {**common, "values": [(d, None, None) for d in depth], "text": [f"{d:.1f}" if d is not None else "" for d in depth]}
        )
        panels[2].append({**common, "values": [(k, None, None) for k in kept], "text": [f"{k:.2f}" if k is not None else "" for k in kept]})
        panels[3].append({**common, "values": speed, "text": [f"{v:.2f}×" for v, _, _ in speed]})
    for col, series in panels.items():
        grouped_bars(fig, xs, [{**sr, "showlegend": col == 1} for sr in series], rule=1.0 if col == 3 else None, row=1, col=col)
    fig.add_hline(y=1.0, line_dash="dot", line_color="#333", row=1, col=3)
    return frame(fig, "The gate drafts less where the drafter is unsure; does it keep as many tokens?", label, height=400)


def adaptive_table(m: dict, s: dict) -> list[dict]:
    out, depth_k = [], int((m.get("chosen") or s).get("depth", 0))
    for b in m["batches"]:
        for key in ("fixed", "gated"):
            sm, c = b[key]["summary"], b[f"m_{key}"]
            speed, lo, hi = decode_ratio(b[key], b["ar"])
            out.append(
                {
                    "batch": b["batch"],
                    "drafts": f"up to {depth_k}" if key == "fixed" else f"stop below {float(s.get('conf', 0)):.2f}",
                    "drafted per step": round(c["drafted_depth"], 2) if c.get("drafted_depth") is not None else None,
                    "kept per step": round(sm["tokens_per_step"], 2) if sm.get("tokens_per_step") is not None else None,
                    "α": round(sm["alpha"], 3) if sm.get("alpha") is not None else None,
                    "decoding tokens/s (median)": round(decode_rate(b[key])[0], 1),
                    "speedup over plain (decoding alone)": round(speed, 2),
                    "95% range": rule.span(lo, hi) if lo is not None else "one run",
                    "wasted GFLOP": round(sm["flops_wasted"] / 1e9, 1),
                }
            )
    return out


def notes(m: dict, s: dict) -> list[str]:
    """Per batch: how much less the gate drafted and what it kept per step (the table's columns), and at a larger batch
    the padded slots its verify passes still carried."""
    out = []
    for b in m["batches"]:
        f, g = b["m_fixed"].get("drafted_depth"), b["m_gated"].get("drafted_depth")
        fk, gk = b["fixed"]["summary"].get("tokens_per_step"), b["gated"]["summary"].get("tokens_per_step")
        if not f or g is None or fk is None or gk is None:
            continue
        less = f"{abs(1 - g / f):.0%} {'fewer' if g <= f else 'more'}"
        line = f"Batch {b['batch']}: the gate drafted {g:.2f} tokens per step against {f:.2f} ({less})"
        line += f" and kept {gk:.2f} per step against {fk:.2f}"
        slots, real = verified_slots(b["gated"])
        if b["batch"] > 1 and slots:
            line += (
                f"; its verify passes still carried {slots - real} padded slots of {slots}, rows that had stopped while another drafted on"
            )
        out.append(line + ".")
    return out


CAPTION = DECODING_ALONE + (
    " Wasted GFLOP: the target's "
    "work on verified positions past each row's accepted prefix (padding included) and the drafter's on rejected drafts. "
    "The tokens the gate skipped were never verified, so whether the target would have taken them is not measured."
)


RECORD = Experiment(
    adaptive,
    (
        Knob("l5_depth", "Speculation depth k", (0, *range(2, 9)), 0, CURVE_HELP + ": the deepest one-row draft inside the room"),
        Knob("l5_conf", "Stop drafting below joint confidence", (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9), 0.3),
    ),
    Prediction("At batch 1, the gated run's tokens/s ÷ the always-draft-k run's (decoding alone)?", "e.g. 1.1", gate_ratio, gate_models),
    needs=("eagle", "model"),
    leviathan=lambda m, s: leviathan_of(m["batches"][0]["m_gated"]),
    notes=notes,
    table=adaptive_table,
    figures=lambda m, s, label: [adaptive_figure(m, s, label)],
    caption=CAPTION,
    numbers=lambda m, s: pair_numbers(  # each speedup the rule's over the interleaved rounds, as the page's table shows it
        [(f"batch {r['batch']} {w}", r[f"m_{w}"], {"ar": r["ar"], "spec": r[w]}) for r in m["batches"] for w in ("fixed", "gated")]
    ),
    gpu_passes=lambda s: verify_passes(s, sorted({1, int(s.get("batch") or 8)})),  # the batch the run chose (page.chosen_settings)
    contest=lambda m, s: (
        f"the gated run at batch {m['batches'][0]['batch']}",
        "drafting all k",
        rate_rounds(m["batches"][0]["gated"]),
        rate_rounds(m["batches"][0]["fixed"]),
    ),
    plain=lambda m: (m["batches"][0]["batch"], m["batches"][0]["ar"]),
    gpu_lines=gate_lines,
    name="adaptive",
    schema={
        "drafter": "str",
        "batches": [{"batch": "int", "ar": LANE, "fixed": LANE, "gated": LANE, "m_fixed": NUMBERS, "m_gated": NUMBERS}],
        **CHOSEN,
        **WARMUP,
    },
    claims=(
        Claim(
            "Stopping where unsure pays where guesses cost",
            "the gated run",
            "drafting all k",
            "the larger batch",
            lane_rounds("gated", "fixed", lambda m: m["batches"][-1]),
            1,
            lead=True,
        ),
        Claim(
            "Stopping where unsure pays",
            "the gated run",
            "drafting all k",
            "batch 1",
            lane_rounds("gated", "fixed", lambda m: m["batches"][0]),
            1,
        ),
    ),
)
