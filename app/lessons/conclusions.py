"""The Lessons page's conclusions, as text computed from what an experiment just measured (no streamlit).

Each function takes the measurement an experiment in app/lessons/experiments.py returns (pass-cost rows and
probed peaks, or lanes (app/lessons/measurement.py) and their `metrics.compare` numbers), live or recorded, and
returns Markdown. Every claim is decided by comparing the run's own numbers: a measured cost against the ridge,
the machine's knee or a 1.25× tolerance, tokens kept against what a step cost, one run's α or draft time
against another's; a winner only beyond the spread of the interleaved runs (app/lessons/noise.py); step costs
from one statistic, so a step never reads cheaper than its own verify pass. No outcome is written in advance.
Lesson 6's text is app/lessons/load.py, lesson 7's app/lessons/width.py.
"""

from __future__ import annotations

from app.lessons import switch
from app.lessons.noise import clear_winner, serving_note, speed_verdict, speedup_spread, step_costs
from app.lessons.width import width_conclusion, width_table  # noqa: F401  (the page reads them here)
from app.views import metrics, roofline

NEARLY_FREE = 1.25  # a pass within this factor of the one-token (or plain) pass counts as nearly free
IN_STEP = 0.75  # a pass whose time grew by at least this share of its FLOPs' growth grew with its arithmetic


def _row_at(rows: list[dict], tokens: int) -> dict:
    return min(rows, key=lambda r: abs(r["tokens_per_pass"] - tokens))


def memory_bound_conclusion(result: dict) -> list[str]:
    """Lesson 1's conclusion, every claim decided by the measured rows and the probed peaks."""
    rows = sorted(result["rows"], key=lambda r: r["tokens_per_pass"])
    first, sixteen = rows[0], _row_at(rows, 16)
    one, many, n = first["ms"], sixteen["ms"], sixteen["tokens_per_pass"]
    extra = (many - one) / (n - 1) if n > 1 else 0.0
    fixed = max(0.0, one - extra)  # the part of a pass that does not grow with its tokens (a straight line's intercept)
    share = fixed / many if many > 0 else 0.0
    lines = [
        f"One token: {one:.1f} ms. {'Sixteen' if n == 16 else n} tokens in one pass: {many:.1f} ms, or {many / one:.2f}× "
        f"the time for {n}× the tokens ({one / sixteen['ms_per_token']:.1f}× cheaper per token). Each extra token "
        f"added {extra:.1f} ms on average, so about {fixed:.1f} ms of a pass did not depend on its tokens: "
        + (
            f"{share:.0%} of the {n}-token pass, so most of a pass's time did not depend on how many tokens it carried."
            if share > 0.5
            else f"only {share:.0%} of the {n}-token pass, so most of its time went on the tokens it carried: on this "
            "machine the extra tokens were not nearly free."
        )
    ]
    shares = roofline.peak_shares(rows, result["peak_bandwidth"], result["peak_flops"])
    low, high = shares[0], shares[-1]
    text = (
        f"Against the probed peaks ({result['peak_bandwidth'] / 1e9:.0f} GB/s, {result['peak_flops'] / 1e9:.0f} GFLOP/s, "
        f"{result['dtype']}): the one-token pass did {low['intensity']:.2f} FLOP per byte it read and reached "
        f"{low['bandwidth_share']:.0%} of peak bandwidth and {low['flops_share']:.0%} of peak FLOP/s, so it was "
        f"**{low['regime']}**; the {high['tokens_per_pass']}-token pass reached {high['bandwidth_share']:.0%} and "
        f"{high['flops_share']:.0%}: **{high['regime']}** by that rule."
    )
    if len(rows) > 1:
        prev, last = rows[-2], rows[-1]
        grew, more = last["ms"] / prev["ms"], last["flops"] / prev["flops"]
        in_step = grew - 1 >= IN_STEP * (more - 1) and more > 1
        text += (
            f" From {prev['tokens_per_pass']} to {last['tokens_per_pass']} tokens its time grew {grew:.2f}× for "
            f"{more:.2f}× the FLOPs: "
            + (
                "in step with the arithmetic, so the arithmetic was setting its time (the quick probe's peak is "
                "not what these kernels reach)."
                if in_step and high["regime"] != "compute-bound"
                else "in step with the arithmetic."
                if in_step
                else "far less than the arithmetic grew, so a fixed cost still set much of its time."
            )
        )
    lines.append(text)
    free = roofline.memory_bound_span(rows, NEARLY_FREE)
    ridge = result.get("ridge_tokens")
    if ridge:
        side = "below" if high["tokens_per_pass"] < ridge else "at or above"
        lines.append(
            f"The ridge point is {result['ridge_point']:.1f} FLOP/byte, about {ridge:.0f} tokens per pass for this model; "
            f"the largest pass measured ({high['tokens_per_pass']} tokens) is {side} it."
            + (
                f" Up to {free} tokens a pass cost at most {NEARLY_FREE}× the one-token pass."
                if free and free > 1
                else f" Already the {rows[1]['tokens_per_pass']}-token pass cost more than {NEARLY_FREE}× the one-token pass."
                if len(rows) > 1
                else ""
            )
        )
    return lines


def _consistent(run: dict) -> dict:
    """A run's compare numbers with its step cost taken from the lanes' means (step_costs), so the speedup's
    reason and the verify figure use one statistic."""
    verify, step = step_costs(run)
    return run["m"] | {"median_verify_ratio": verify, "step_cost_ratio": step}


def more_flops_conclusion(run: dict) -> str:
    """Lesson 2's conclusion from its measurement ({ar, spec, m, …}); a bare compare dict is read as before."""
    m = _consistent(run) if "m" in run else run
    ops = m.get("operations_factor")
    text = (
        f"Speculation did {m['flops_ratio']:.2f}× the FLOPs of plain decoding"
        + (f" (Leviathan's operations factor for this run's α and k: {ops:.2f}× over the decode steps)" if ops else "")
        + f", and {metrics.fmt_flops(m['flops_wasted'])} of them went on rejected draft tokens. "
    )
    text += f"It ran {m['speedup']:.2f}× as fast as plain decoding" + metrics.speedup_reason(m, "here")
    verify = m.get("median_verify_ratio")
    if verify is not None:
        text += f" A verify pass alone cost {verify:.2f}× a plain step" + (" (mean over the decode steps)." if "m" in run else " (median).")
    if "m" in run:
        text += f" Speculation against plain decoding: {speed_verdict(run['ar'], run['spec'])}."
    return text


def drafter_label(kind: str) -> str:
    return {"eagle": "EAGLE head", "model": "draft model", "ngram": "n-gram lookup"}.get(kind, kind)


def draft_share(lane: dict) -> float:
    """Fraction of the decode steps' time a lane spent drafting (app/lessons/measurement.py `lane`)."""
    return lane["draft_share"]


def ridge_run_line(label: str, batch: int, run: dict, depth: int) -> str:
    m = _consistent(run)
    steps = (
        f"; {m['spec_decode_steps']} decode steps against {m['ar_decode_steps']} plain"
        if m.get("spec_decode_steps") and m.get("ar_decode_steps")
        else ""
    )
    return (
        f"- {label}, batch {batch}: {batch * (depth + 1)} tokens per pass (batch × (k + 1)); a verify pass "
        f"cost {metrics.fmt(m['median_verify_ratio'])}× a plain step of the same batch, a whole step "
        f"{metrics.fmt(m['step_cost_ratio'])}× ({draft_share(run['spec']):.0%} of it drafting; means over the decode steps); α "
        f"{metrics.fmt(m['alpha'])}, {metrics.fmt(m.get('kept_per_step'))} tokens kept per sequence per step"
        f"{steps}; speedup {m['speedup']:.2f}×"
        + (f"; {metrics.fmt(run['spec'].get('tpot_ms'), '.1f')} ms per output token of a request" if run["spec"].get("tpot_ms") else "")
    )


def curve_line(result: dict, batch: int, depth: int) -> str | None:
    """Where the large batch's verify pass sits on this machine's measured pass curve (None without a curve)."""
    curve = result.get("curve")
    if not curve:
        return None
    tokens, ms_ = curve["tokens"], curve["ms"]

    def at(n):  # the curve's time at n tokens, linear between points, held past the last
        pts = list(zip(tokens, ms_))
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
            if x0 <= n <= x1:
                return y0 + (y1 - y0) * (n - x0) / (x1 - x0)
        return ms_[-1] if n > tokens[-1] else ms_[0]

    n, knee = batch * (depth + 1), curve["knee_tokens"]
    priced = at(n) / at(batch) if at(batch) > 0 else None
    return (
        f"This machine's pass curve (measured {curve['measured_at'][:10]}): from {knee:.0f} tokens a pass costs "
        f"1.5× a one-token pass or more (its knee). Batch {batch}'s verify pass carries {n} tokens, "
        f"{n / knee:.1f}× the knee"
        + (f"; the curve prices it at {priced:.2f}× a plain pass of the same batch ({batch} tokens)." if priced else ".")
    )


def past_the_ridge_conclusion(result: dict, depth: int) -> list[str]:
    """Lesson 3's conclusion: the measured verify cost against the ridge and the machine's knee, the speedup
    against the spread of its runs, per-request latency, and what decides the n-gram run."""
    name = drafter_label(result["drafter"])
    one, many = sorted(result["runs"], key=lambda r: r["batch"])
    b1, bn = one["batch"], many["batch"]
    t1, tn = b1 * (depth + 1), bn * (depth + 1)
    mn, ng = _consistent(many), _consistent(result["ngram"])
    lines = []
    ridge = result.get("ridge_tokens")
    if ridge:

        def side(tokens):
            return "below" if tokens < ridge else "at or above"

        lines.append(
            f"From the probed peaks the ridge is ≈ {ridge:.0f} tokens per pass: batch {b1}'s verify pass "
            f"({t1} tokens) is {side(t1)} it, batch {bn}'s ({tn} tokens) {side(tn)} it."
        )
    knee = curve_line(result, bn, depth)
    if knee:
        lines.append(knee)
    (v1, s1), (vn, sn) = step_costs(one), step_costs(many)
    if v1 is not None and vn is not None:

        def free(ratio):
            return f"within {NEARLY_FREE}×: nearly free" if ratio <= NEARLY_FREE else f"above {NEARLY_FREE}×: not free"

        text = (
            f"Verifying {depth} draft tokens per sequence cost {v1:.2f}× a plain step of the same batch at "
            f"batch {b1} ({free(v1)}) and {vn:.2f}× at batch {bn} ({free(vn)})"
        )
        if s1 is not None and sn is not None:
            text += f"; with drafting, a whole step cost {s1:.2f}× and {sn:.2f}×"
        lines.append(text + ".")
    line = f"With the {name}, the speedup went from {one['m']['speedup']:.2f}× at batch {b1} to {mn['speedup']:.2f}× at batch {bn}"
    lines.append(line + metrics.speedup_reason(mn, f"at batch {bn}"))
    lines.append(f"At batch {bn}, speculation against plain decoding: {speed_verdict(many['ar'], many['spec'])}.")
    if ng["alpha"] is not None and mn["alpha"] is not None:
        dn, dm = draft_share(result["ngram"]["spec"]), draft_share(many["spec"])
        better = clear_winner(speedup_spread(result["ngram"]), speedup_spread(many))
        text = (
            f"The n-gram lookup at batch {bn} on extractive prompts ran {ng['speedup']:.2f}× plain decoding "
            f"(the {name}: {mn['speedup']:.2f}×)"
        )
        kept_n, kept_m = ng.get("kept_per_step"), mn.get("kept_per_step")
        step_n, step_m = ng.get("step_cost_ratio"), mn.get("step_cost_ratio")
        if None not in (kept_n, kept_m, step_n, step_m):
            text += (
                f". What decides it is tokens kept per step against what a step costs: the lookup kept "
                f"{kept_n:.2f} tokens per sequence per step for a step of {step_n:.2f} plain steps (drafting "
                f"{dn:.0%} of it, α {ng['alpha']:.2f}); the {name} kept {kept_m:.2f} for {step_m:.2f} (drafting "
                f"{dm:.0%}, α {mn['alpha']:.2f}). Past the knee a step costs more, and speculation still pays "
                "where cheap drafts are accepted often enough to cover it"
            )
        else:
            text += f". Its drafts took {dn:.0%} of a step (the {name}'s {dm:.0%}) and its α was {ng['alpha']:.2f}"
            text += f" (the {name}'s {mn['alpha']:.2f})"
        text += (
            f". Its speedup in every round was {'above' if better > 0 else 'below'} the {name}'s in every round."
            if better
            else ". The two drafters' runs overlap (or ran once each): no clear winner between them."
        )
        lines.append(text)
    lines.append(serving_note(many["ar"], many["spec"], bn))
    return lines


def live_against_recording(live: dict, recorded: dict, depth: int, live_machine: str, recorded_machine: str) -> str | None:
    """Lesson 3, live against the shipped recording: None when they agree (both speculation clearly paid, or
    both did not, at the large batch); else what differs and the measured reason (another machine, another knee,
    another large batch)."""
    a, b = sorted(live["runs"], key=lambda r: r["batch"])[-1], sorted(recorded["runs"], key=lambda r: r["batch"])[-1]
    sa, sb = a["m"]["speedup"], b["m"]["speedup"]
    if (sa > 1) == (sb > 1):
        return None
    text = (
        f"Live on {live_machine} speculation ran {sa:.2f}× plain decoding at batch {a['batch']}; the recording from "
        f"{recorded_machine} measured {sb:.2f}× at batch {b['batch']}. "
    )
    (va, _), (vb, _) = step_costs(a), step_costs(b)
    if va is not None and vb is not None:
        text += f"A verify pass cost {va:.2f}× a plain step here against {vb:.2f}× there. "
    ka, kb = (m.get("curve", {}).get("knee_tokens") for m in (live, recorded))
    if ka and kb:
        text += f"This machine's knee is at {ka:.0f} tokens per pass, the recording machine's at {kb:.0f}: "
        text += f"{a['batch'] * (depth + 1)} tokens per pass is {a['batch'] * (depth + 1) / ka:.1f}× the knee here, "
        text += f"{b['batch'] * (depth + 1) / kb:.1f}× there. Another machine, another knee: "
        text += "where the verify pass stops being nearly free moves with it."
    else:
        text += "Another machine has another knee (the recording has no pass curve to compare)."
    return text


def verified_slots(lane: dict) -> tuple[int, int]:
    """(draft positions the target verified, real draft tokens among them): the rest is padding, the slots of rows
    that had stopped drafting while another row in the batch went on (app/lessons/measurement.py `verified_slots`)."""
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
    verdict = switch.verdict(switch.decode_spread(run["gated"]), switch.decode_spread(run["fixed"]))
    part = (
        f"at batch {batch} it drafted {cut:.0%} fewer tokens and decoded {g / f:.2f}× as fast as drafting all {depth} "
        f"({g:.1f} against {f:.1f} tokens/s, decoding alone): {verdict} drafting all {depth}"
        + (" beyond the spread of the runs" if verdict != "level with" else " (their runs overlap)")
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
    """Lesson 5's conclusion: what the gate changed, measured (decoding alone, a verdict only beyond the spread of
    the runs); nothing about the tokens it never sent. The depth is the one the run chose where it records it."""
    depth = int((result.get("chosen") or {}).get("depth") or gate_depth)
    parts = [_gate_part(run, depth) for run in result["batches"]]
    return (
        "Stopping where the drafter was unsure: " + "; ".join(parts) + ". The tokens it skipped were never "
        "verified, so whether the target would have taken them is not measured here."
    )


SAME_TIME = 1.10  # two passes within this factor of each other took "about the same time"


def seed_conclusion(seed: dict) -> str:
    """Barrow's example measured: k+1 tokens per pass as a batch of k+1 at depth 0 and as one row at depth k."""
    wide, deep = seed["passes"]
    ratio = wide["ms"] / deep["ms"] if deep["ms"] > 0 else None
    n = wide["tokens_per_pass"]
    if ratio is None:
        timing = "One of the passes took no measurable time."
    elif 1 / SAME_TIME <= ratio <= SAME_TIME:
        timing = (
            f"They took about the same time ({wide['ms']:.1f} against {deep['ms']:.1f} ms, within "
            f"{SAME_TIME:.2f}×), as Barrow's example says: the pass costs what its {n} tokens cost, however they "
            "were gathered."
        )
    else:
        more = "longer" if ratio > 1 else "less time"
        timing = (
            f"The batch-{wide['batch']} pass took {more}: {wide['ms']:.1f} against {deep['ms']:.1f} ms "
            f"({ratio:.2f}×), more than the {SAME_TIME:.2f}× this page calls the same time."
        )
    kv = wide["kv_bytes"] / deep["kv_bytes"] if deep["kv_bytes"] else None
    diff = wide["flops"] - deep["flops"]
    rel = diff / deep["flops"] if deep["flops"] else 0.0
    if abs(rel) < 0.005:  # the same to the shown digits: say so, and name the difference that exists
        flops = (
            f"the same FLOPs to within {abs(rel):.2%} ({wide['flops'] / 1e9:.2f} GFLOP each: only the attention term "
            f"differs, by {diff / 1e6:+.1f} MFLOP for the batch)"
        )
    else:
        flops = (
            f"{wide['flops'] / 1e9:.2f} against {deep['flops'] / 1e9:.2f} GFLOP ({rel:+.1%}, the attention term: "
            f"{wide['batch']} rows each attend over their own context)"
        )
    return (
        f"Both passes carry {n} tokens and read the {wide['weight_bytes'] / 1e6:.0f} MB of weights once. "
        f"{timing} What differs is the KV cache: {wide['batch']} rows of context cost "
        f"{wide['kv_bytes'] / 1e6:.1f} MB of KV reads against {deep['kv_bytes'] / 1e6:.1f} MB for one row"
        + (f" ({kv:.1f}×)" if kv else "")
        + f", and {flops}. And what the tokens buy: the batch moves {wide['batch']} sequences one token "
        f"each; the single row moves one sequence by 1 plus however many of its {deep['new_tokens'] - 1} drafts "
        "the target accepts."
    )


def turn_it_off_conclusion(m: dict, s: dict) -> list[str]:
    """Lesson 4's conclusion (app/lessons/switch.py): the room and the settings it chose, always-on speculation and
    the off-above-batch-N switch against plain decoding, decoding alone, in each phase of the shrinking batch, each
    verdict only beyond the spread of the interleaved runs; then per-request latency."""
    batch = switch.settings_of(m, s)["batch"]
    return switch.conclusion(m, s) + [serving_note(m["ar"], m["on"], batch)]
