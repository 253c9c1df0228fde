"""The Lessons page's conclusions, as text computed from what an experiment just measured (no streamlit).

Each function takes the measurement an experiment in app/lessons/experiments.py returns (pass-cost rows and
probed peaks, or lanes (app/common/measurement.py) and their `metrics.compare` numbers), live or recorded, and
returns Markdown. Every claim is decided by comparing the run's own numbers: a measured cost against the ridge,
the machine's knee or a 1.25× tolerance, tokens kept against what a step cost, one run's α or draft time
against another's; a winner only by the one rule over the interleaved rounds (app/common/verdict.py); step costs
from one statistic, so a step never reads cheaper than its own verify pass. No outcome is written in advance.
Lesson 6's text is app/lessons/load.py, lesson 7's app/lessons/width.py.
"""

from __future__ import annotations

from app.lessons import noise, switch
from app.lessons.noise import serving_note
from app.lessons.pass_conclusions import (  # noqa: F401  (lessons 1-3: the page and the tests read them here)
    IN_STEP,
    NEARLY_FREE,
    SAME_TIME,
    curve_line,
    drafter_label,
    memory_bound_conclusion,
    more_flops_conclusion,
    past_the_ridge_conclusion,
    ridge_run_line,
    room_of,
    seed_conclusion,
    speedup_words,
)
from app.lessons.width import width_conclusion, width_table  # noqa: F401  (the page reads them here)
from app.views import metrics


def verified_slots(lane: dict) -> tuple[int, int]:
    """(draft positions the target verified, real draft tokens among them): the rest is padding, the slots of rows
    that had stopped drafting while another row in the batch went on (app/common/measurement.py `verified_slots`)."""
    slots, real = lane["verified_slots"]
    return slots, real


def wasted_text(lane: dict, name: str) -> str:
    """'; the gated run's 91.6 GFLOP on rejected drafts paid for 326 verified positions past the accepted
    prefix (190 of them padding) and 136 rejected draft tokens', from the lane's counts: SpecLab counts, as wasted,
    the target's work on every verified position past a row's accepted prefix (padding included) and the
    drafter's on every rejected real draft (engine/decoding/decode.py `wasted_flops`)."""
    s = lane["summary"]
    if not s.get("flops_wasted") or "verified_slots" not in lane:
        return ""
    slots, real = lane["verified_slots"]
    rejected = s["drafted_tokens"] - s["accepted_tokens"]
    past = slots - s["accepted_tokens"]
    return (
        f"; {name}'s {metrics.fmt_flops(s['flops_wasted'])} on rejected drafts paid for {past:.0f} verified positions "
        f"past the accepted prefix ({slots - real:.0f} of them padding) and {rejected:.0f} rejected draft tokens"
    )


def alpha_words(gated: float, fixed: float) -> str:
    """'higher than' / 'lower than' / 'the same as', judged at the three digits shown (so a sentence never reads
    "0.60, higher than the 0.60")."""
    g, f = round(gated, 3), round(fixed, 3)
    return "higher than" if g > f else "lower than" if g < f else "the same as"


def _gate_part(run: dict, depth: int) -> str:
    batch, fixed, gated = run["batch"], run["fixed"]["summary"], run["gated"]["summary"]
    cut = 1 - gated["drafted_tokens"] / fixed["drafted_tokens"] if fixed["drafted_tokens"] else 0.0
    g, f = switch.rate(run["gated"]), switch.rate(run["fixed"])
    v = noise.judge(switch.decode_spread(run["gated"]), switch.decode_spread(run["fixed"]))
    part = f"at batch {batch} it drafted {cut:.0%} fewer tokens (decoding alone: medians {g:.1f} against {f:.1f} tokens/s): " + (
        v.words(b=f"drafting all {depth}") if v else f"one run each against drafting all {depth}: can't tell"
    )
    whole_f = fixed["tokens_per_s"]
    if whole_f:
        part += f"; {gated['tokens_per_s'] / whole_f:.2f}× over the whole run, prefill included"
    if gated["alpha"] is not None and fixed["alpha"] is not None:
        part += (
            f"; the drafts it did send were accepted at α {gated['alpha']:.3f}, {alpha_words(gated['alpha'], fixed['alpha'])} "
            f"the {fixed['alpha']:.3f} of drafting all {depth}"
        )
    slots, real = verified_slots(run["gated"])
    if batch > 1 and slots:
        part += (
            f"; its verify passes still carried {slots - real} padded positions of {slots} draft slots "
            f"({(slots - real) / slots:.0%}), rows that had stopped while another row drafted on"
        )
    if batch > 1:  # where rows stop at different points, padding joins the wasted positions
        part += wasted_text(run["fixed"], f"drafting all {depth}") + wasted_text(run["gated"], "the gated run")
    return part


def adaptive_conclusion(result: dict, gate_depth: int) -> str:
    """Lesson 5's conclusion: what the gate changed, measured (decoding alone, a verdict only by the one rule over
    the rounds); nothing about the tokens it never sent. The depth is the one the run chose where it records it."""
    depth = int((result.get("chosen") or {}).get("depth") or gate_depth)
    parts = [_gate_part(run, depth) for run in result["batches"]]
    return (
        "Stopping where the drafter was unsure: " + "; ".join(parts) + ". The tokens it skipped were never "
        "verified, so whether the target would have taken them is not measured here."
    )


def turn_it_off_conclusion(m: dict, s: dict) -> list[str]:
    """Lesson 4's conclusion (app/lessons/switch.py): the room and the settings it chose, always-on speculation and
    the off-above-batch-N switch against plain decoding, decoding alone, in each phase of the shrinking batch, each
    verdict by the one rule over the interleaved rounds; then per-request latency."""
    batch = switch.settings_of(m, s)["batch"]
    return switch.conclusion(m, s) + [serving_note(m["ar"], m["on"], batch)]
