"""Lessons 1-3's conclusions, as text computed from what the experiment measured (no streamlit).

Each function takes the measurement app/lessons/pass_lessons.py returns, live or recorded, and returns Markdown.
Every claim is decided by the run's own numbers: a pass's cost against the one-token pass and the room
(app/lessons/knee.py: within knee.ROOM× a one-token pass), a winner only by the one rule (app/common/verdict.py:
the 95% range of the paired rounds' ratio excludes 1 and the gap is at least 3%), a round far outside the others
named and kept, speedups decoding alone (the prompt's pass apart) with the whole run beside them, and one statistic
for the chart, its table and these words (noise.speedup). A pass carrying more tokens is never called cheaper than
a smaller one unless the rule says so. No outcome is written in advance. conclusions.py re-exports these.
"""

from __future__ import annotations

from app.common import verdict as rule
from app.lessons import knee, noise
from app.lessons.noise import serving_note, step_costs
from app.views import metrics, roofline

NEARLY_FREE = knee.ROOM  # a pass within this factor of the one-token (or plain) pass counts as nearly free
IN_STEP = 0.75  # a pass whose time grew by at least this share of its FLOPs' growth grew with its arithmetic
SAME_TIME = 1.10  # two passes within this factor of each other took "about the same time"


def drafter_label(kind: str) -> str:
    return {"eagle": "EAGLE head", "model": "draft model", "ngram": "n-gram lookup"}.get(kind, kind)


def _row_at(rows: list[dict], tokens: int) -> dict:
    return min(rows, key=lambda r: abs(r["tokens_per_pass"] - tokens))


def _rounds(row: dict) -> str:
    sp, far = noise.with_far(row.get("ms_runs"))
    if not sp or len(row["ms_runs"]["values"]) < 2:
        return ""
    left = f"; round {', '.join(str(i + 1) for i in far)} far outside the others, kept" if far else ""
    return f" (rounds {sp['min']:.1f}–{sp['max']:.1f}{left})"


def cheaper_notes(rows: list[dict]) -> list[str]:
    """Where a pass carrying more tokens has a lower median than a smaller one: 'the same within noise' when their
    rounds overlap, else what that is (a kernel that suits that size), never 'cheaper tokens'."""
    out = []
    for small, large in zip(rows, rows[1:]):
        if large["ms"] >= small["ms"]:
            continue
        a, b = small.get("ms_runs"), large.get("ms_runs")
        head = f"The {large['tokens_per_pass']}-token pass read {large['ms']:.2f} ms"
        head += f" against {small['ms']:.2f} ms for {small['tokens_per_pass']}"
        v = rule.cheaper(b["values"], a["values"]) if a and b else None
        if v is not None and v.sign > 0:
            out.append(f"{head}: lower by the rule ({v.interval}), a kernel path that suits that size, not cheaper tokens.")
        else:
            out.append(f"{head}: the same within noise ({v.kind if v else 'one round'}), not a cheaper pass.")
    return out


def _past_line(rows: list[dict], room: int, past: dict) -> str:
    one, n = rows[0], past["tokens_per_pass"]
    ratio = past["ms"] / one["ms"]
    extra = (past["ms"] - one["ms"]) / (n - 1) if n > 1 else 0.0
    fixed = max(0.0, one["ms"] - extra)  # the part of a pass that does not grow with its tokens (a straight line's intercept)
    head = f"The {n}-token pass ({n / room:.0f}× the room) cost {past['ms']:.1f} ms{_rounds(past)}, "
    head += f"{ratio:.2f}× the one-token pass for {n}× the tokens"
    if ratio <= NEARLY_FREE:
        return head + ": still nearly free, so this machine's room reaches past this pass."
    a, b = one.get("ms_runs"), past.get("ms_runs")
    v = rule.judge(b["values"], a["values"]) if a and b else None  # past ÷ one in ms, its 95% range from the rounds
    beyond = f" (95% range {v.lo:.2f}–{v.hi:.2f}×)" if v and v.lo and v.lo > NEARLY_FREE else ""
    return head + (
        f": more than {NEARLY_FREE}×{beyond}, so past the room the extra tokens cost real time (about {extra:.2f} ms each); "
        f"still far from {n}×, because about {fixed:.1f} ms of every pass ({fixed / past['ms']:.0%} of this one) did not "
        "depend on its tokens."
        if ratio < n / 2
        else f": close to {n}×: past the room each token cost nearly a whole pass of its own."
    )


def memory_bound_conclusion(result: dict) -> list[str]:
    """Lesson 1's conclusion: the room read from the measured rows, the pass past it, the regime against the probed
    peaks, the ridge the probe predicts against the room measured, and any larger pass that read cheaper."""
    rows = sorted(result["rows"], key=lambda r: r["tokens_per_pass"])
    one = rows[0]
    room = knee.room_tokens([r["tokens_per_pass"] for r in rows], [r["ms"] for r in rows])
    past = _row_at(rows, knee.PAST * room)  # the pass past the room: pass_lessons.read_tokens reads the same row
    inside = _row_at(rows, room)
    lines = [
        f"One token: {one['ms']:.1f} ms{_rounds(one)}. "
        + (
            f"Up to {room} tokens a pass cost at most {NEARLY_FREE}× that ({inside['ms']:.1f} ms for {room}): this machine's "
            "room, read from these rows. Inside it the extra tokens rode on idle arithmetic."
            if room > 1 and len(rows) > 1
            else f"Already the {rows[1]['tokens_per_pass'] if len(rows) > 1 else 2}-token pass cost more than {NEARLY_FREE}× "
            "the one-token pass: on this machine there is no room to fill."
        )
    ]
    if past["tokens_per_pass"] > room:
        lines.append(_past_line(rows, room, past))
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
        text += f" From {prev['tokens_per_pass']} to {last['tokens_per_pass']} tokens its time grew {grew:.2f}× for {more:.2f}× the FLOPs: "
        text += growth_words(grew, more, high["regime"])
    lines.append(text)
    ridge = result.get("ridge_tokens")
    if ridge:
        lines.append(
            f"The probed peaks put the ridge at {result['ridge_point']:.1f} FLOP/byte, about {ridge:.0f} tokens per pass for "
            f"this model; the room these rows measured is {room} token{'s' if room != 1 else ''}. The probe's ridge is an "
            "estimate from two quick kernels; the measured curve decides where extra tokens start to cost."
        )
    kv = counted_ridge(rows, result.get("ridge_point"))
    if kv:
        lines.append(kv)
    return lines + cheaper_notes(rows)


def growth_words(grew: float, more: float, regime: str) -> str:
    """How a pass's time grew against its FLOPs: in step (within SAME_TIME of the FLOPs' growth), faster than the
    arithmetic (the larger pass left the caches or its kernel path changed), or slower (part of the time is fixed)."""
    if more > 1 and grew > more * SAME_TIME:
        return (
            "faster than the arithmetic grew: each token cost more in the larger pass (its working set outgrew the "
            "caches, or the kernels changed path), so the FLOPs alone do not explain its time."
        )
    if more > 1 and grew - 1 >= IN_STEP * (more - 1):
        return "in step with the arithmetic" + (
            ", so the arithmetic was setting its time (the quick probe's peak is not what these kernels reach)."
            if regime != "compute-bound"
            else "."
        )
    return "less than the arithmetic grew: part of that pass's time still did not depend on its tokens."


def counted_ridge(rows: list[dict], ridge_point: float | None) -> str | None:
    """Where these passes' own counted FLOPs per byte (weights AND this row's KV cache at the lesson's context, the
    engine's counts) reach the probed ridge point, interpolated between the measured sizes, and the cache's share of a
    one-token pass's bytes (its bytes grow by one token's KV per token added); None where the rows do not cross the
    ridge or carry no counts."""
    pts = [(r["tokens_per_pass"], r["flops"] / r["bytes"]) for r in rows if r.get("flops") and r.get("bytes")]
    if not ridge_point or len(pts) < 2 or len(pts) != len(rows):
        return None
    cross = [(n0 + (ridge_point - i0) * (n1 - n0) / (i1 - i0)) for (n0, i0), (n1, i1) in zip(pts, pts[1:]) if i0 < ridge_point <= i1]
    first, last = rows[0], rows[-1]
    per_token = (last["bytes"] - first["bytes"]) / (last["tokens_per_pass"] - first["tokens_per_pass"])
    if not cross or per_token <= 0:
        return None
    context = int(first.get("context", 0))
    share = per_token * (context + first["tokens_per_pass"]) / first["bytes"]
    return (
        f"Counting all these passes do and read (the weights, and this row's KV cache over a {context}-token context "
        f"with attention's arithmetic on it: the engine's counts), a pass reaches the ridge's {ridge_point:.1f} FLOP/byte "
        f"at about {cross[0]:.0f} tokens. One "
        f"row's cache is {share:.1%} of a one-token pass's bytes here, so it barely moves the ridge; in a batch every row "
        "reads its own cache, which is why long contexts keep large batches memory-bound (the GPU panel below)."
    )


def _consistent(run: dict) -> dict:
    """A run's compare numbers with its step cost taken from the lanes' means (step_costs), so the speedup's
    reason and the verify figure use one statistic, and its speedup the median over rounds (noise.speedup)."""
    verify, step = step_costs(run)
    sp = noise.speedup(run) if "ar" in run else None
    return run["m"] | {"median_verify_ratio": verify, "step_cost_ratio": step} | ({"speedup": sp["value"]} if sp else {})


def speedup_words(run: dict) -> str:
    """'1.42× (rounds 1.30–1.55×; whole run, prefill included: 1.21×)': the speedup every chart, table and sentence of
    lessons 2 and 3 shows, decoding alone, with the whole-run figure beside it, labelled."""
    sp, whole = noise.speedup(run), noise.speedup(run, whole=True)
    if sp is None:
        return f"{run['m']['speedup']:.2f}× (one run each)"
    parts = [f"95% range {sp['lo']:.2f}–{sp['hi']:.2f}× over {sp['rounds']} rounds"] if sp["lo"] is not None else ["one round"]
    parts += [noise.far_text(run)] if sp["far"] else []
    parts += [f"whole run, prefill included: {whole['value']:.2f}×"] if whole and sp["decode"] else []
    parts += [] if sp["decode"] else ["whole run: this recording did not time decoding apart from the prompt's pass"]
    return f"{sp['value']:.2f}×" + (f" ({'; '.join(parts)})" if parts else "")


def verdict_words(run: dict) -> str:
    """'faster than plain by the rule' / 'slower …' / 'level with plain (within 3%)' / "can't tell with 3 rounds"."""
    sp = noise.speedup(run)
    if sp is None:
        return "one run each: can't tell"
    v = sp["verdict"]
    return {
        "faster": "faster than plain by the rule",
        "slower": "slower than plain by the rule",
        "level": f"level with plain (within {rule.MIN_GAP:.0%})",
    }.get(v.kind, f"can't tell with {v.rounds} round{'s' if v.rounds != 1 else ''}")


def step_cost_words(ratio: float | None, what: str = "a verify pass") -> str:
    """'a verify pass cost 1.12× a plain step (within 1.25×)' (whether that is nearly free depends on where the pass
    sits on the curve: curve_line), and a pass with more tokens that read below one plain step is never cheaper."""
    if ratio is None:
        return ""
    if ratio < 1:
        return f"{what} read {ratio:.2f}× a plain step: the same as a plain step within noise (a pass with more tokens is not cheaper)"
    free = f"within {NEARLY_FREE}×" if ratio <= NEARLY_FREE else f"above {NEARLY_FREE}×"
    return f"{what} cost {ratio:.2f}× a plain step ({free})"


def per_token(m: dict) -> dict | None:
    """Lesson 2's decode steps per decoded token, speculative ÷ plain: FLOPs, bytes moved, and time (decode rates)."""
    costs = m.get("decode_costs")
    if not costs or not costs["ar"]["tokens"] or not costs["spec"]["tokens"]:
        return None
    a, b = costs["ar"], costs["spec"]
    sp = noise.speedup(m)
    return {
        "flops": (b["flops"] / b["tokens"]) / (a["flops"] / a["tokens"]),
        "bytes": (b["bytes"] / b["tokens"]) / (a["bytes"] / a["tokens"]),
        "time": 1 / sp["value"] if sp else None,
        "wasted": b["flops_wasted"] / b["flops"] if b["flops"] else 0.0,
    }


def more_flops_conclusion(run: dict) -> str:
    """Lesson 2's conclusion from its measurement ({ar, spec, m, decode_costs, …}): FLOPs and bytes per decoded
    token, the speedup decoding alone beside the whole run, and what a verify pass cost."""
    m = _consistent(run) if "m" in run else run
    ratios = per_token(run) if "m" in run else None
    ops = m.get("operations_factor")
    if ratios:
        text = (
            f"Per decoded token (the prompt's pass left out), speculation did {ratios['flops']:.2f}× the FLOPs of plain "
            f"decoding and moved {ratios['bytes']:.2f}× the bytes: "
            + (
                "read the bars above. "
                if ratios["flops"] < 1 or ratios["bytes"] >= 1
                else "more arithmetic, far fewer bytes. "
                if ratios["flops"] >= 1.005
                else "the same arithmetic to within half a percent (every draft was accepted and drafting was free), far fewer bytes. "
            )
        )
    else:
        text = f"Speculation did {m['flops_ratio']:.2f}× the FLOPs of plain decoding. "
    text += (f"Leviathan's operations factor for this run's α and k: {ops:.2f}×. " if ops else "") + (
        f"{metrics.fmt_flops(m['flops_wasted'])} went on rejected draft tokens. "
    )
    if "m" in run:
        text += f"Decoding alone it ran {speedup_words(run)} as fast as plain decoding, {verdict_words(run)}"
    else:
        text += f"It ran {m['speedup']:.2f}× as fast as plain decoding"
    sp = noise.speedup(run) if "m" in run else None
    text += metrics.speedup_reason(m, "here", sp["verdict"] if sp else None)
    verify = step_cost_words(m.get("median_verify_ratio"), "A verify pass")
    return text + (f" {verify} (means over the decode steps)." if verify else "")


# --- lesson 3: inside the room and past it ------------------------------------------------------------
def ridge_run_line(label: str, batch: int, run: dict, depth: int) -> str:
    m = _consistent(run)
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


def room_of(result: dict) -> int | None:
    """The room the run chose its settings from (its `chosen`), else read from its recorded curve, else None."""
    chosen, curve = result.get("chosen") or {}, result.get("curve")
    if chosen.get("room"):
        return int(chosen["room"])
    return knee.room_tokens(curve["tokens"], curve["ms"]) if curve else None


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
    ng, mn = _consistent(result["ngram"]), _consistent(many)
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
        + metrics.speedup_reason(_consistent(many), f"at batch {bn}", (noise.speedup(many) or {}).get("verdict"))
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


def seed_conclusion(seed: dict) -> str:
    """Barrow's example measured: k+1 tokens per pass as a batch of k+1 at depth 0 and as one row at depth k."""
    wide, deep = seed["passes"]
    ratio = wide["ms"] / deep["ms"] if deep["ms"] > 0 else None
    n = wide["tokens_per_pass"]
    if ratio is None:
        timing = "One of the passes took no measurable time."
    elif 1 / SAME_TIME <= ratio <= SAME_TIME or rule.cheaper(wide["times_ms"], deep["times_ms"]).sign == 0:
        timing = (
            f"They took the same time within noise ({wide['ms']:.1f} against {deep['ms']:.1f} ms; within {SAME_TIME:.2f}× or "
            f"the rule names no winner), as Barrow's example says: the pass costs what its {n} tokens cost, however they were gathered."
        )
    else:
        more = "longer" if ratio > 1 else "less time"
        timing = (
            f"The batch-{wide['batch']} pass took {more}: {wide['ms']:.1f} against {deep['ms']:.1f} ms "
            f"({ratio:.2f}×), a difference the rule names and more than the {SAME_TIME:.2f}× this page calls the same time."
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
