"""Summary numbers for an AR trace beside a speculative trace of the same prompts.

Leviathan, Kalman, Matias 2023: with α the per-token acceptance, k the draft length and c the cost of a
draft step relative to a target step,
- Theorem 3.8, expected speedup = E(α, k) / (k·c + 1), where E(α, k) = (1 - α^(k+1)) / (1 - α) is the
  expected number of tokens a step yields. It assumes a verify pass of k+1 tokens costs one plain step.
- Theorem 3.11, operations factor = (k·ĉ + k + 1) / E(α, k): the arithmetic of speculation relative to
  plain decoding, with ĉ = FLOPs of a draft token / FLOPs of a target token. It is >= 1.
Everything here is taken from the two traces:
- k is the depth actually drafted: the mean over decode steps of the drafts per row (a confidence gate,
  the n-gram drafter's short matches, a depth policy or the end of a sequence all make it smaller than
  the configured depth);
- c = draft time per drafted token (per row) / the mean AR decode step, so k·c is the mean draft time of
  a decode step in AR steps;
- "Leviathan with the measured verify cost" replaces Theorem 3.8's 1 (verify = one plain step) by the
  measured T_verify(B·(k+1)) / T_AR(B): the speculative run's median verify time over the AR run's median
  step time. Where a pass is not free, this is the model that still holds.
"""

from __future__ import annotations

import math
import statistics

from engine.costs import expected_speedup, expected_tokens_per_step, operations_factor
from engine.trace.rates import ranking_rate
from engine.verdict import MIN_GAP, Verdict, judge

from .safe import md_text
from .tokens import first_differences


def _decode(trace) -> list:
    return [s for s in trace.steps if s.kind == "decode"]


def decode_totals(traces: list) -> dict:
    """FLOPs, bytes moved and FLOPs on rejected drafts of runs' decode steps (the prompt's pass left out), both models,
    and the tokens those steps wrote: what a per-decoded-token ratio divides (the Playground, lesson 2)."""
    steps = [st for t in traces for st in _decode(t)]
    return {
        "tokens": sum(len(q.emitted) for st in steps for q in st.seqs),
        "flops": sum(st.flops for st in steps),
        "bytes": sum(st.bytes for st in steps),
        "flops_wasted": sum(st.flops_wasted for st in steps),
    }


def decode_flops_ratio(ar, spec) -> float | None:
    """FLOPs per decoded token of the decode steps, speculative ÷ plain: the quantity Leviathan's operations factor
    predicts. None without decode steps or FLOPs."""
    per = [t["flops"] / t["tokens"] if t["tokens"] and t["flops"] else None for t in (decode_totals([ar]), decode_totals([spec]))]
    return per[1] / per[0] if per[0] and per[1] else None


def _mean_ar_step_ms(ar) -> float | None:
    steps = _decode(ar)
    ms = sum(s.verify_ms for s in steps) / len(steps) if steps else 0.0
    return ms if ms > 0 else None


def _row_drafts(step) -> float:
    """Draft tokens per row in one step (the mean over the rows in the pass)."""
    return sum(len(q.drafted) for q in step.seqs) / len(step.seqs) if step.seqs else 0.0


def drafted_depth(spec) -> float | None:
    """The depth actually drafted: mean over decode steps of the draft tokens per row (None: no decode step)."""
    steps = _decode(spec)
    return sum(_row_drafts(s) for s in steps) / len(steps) if steps else None


def measured_c(ar, spec) -> float | None:
    """Draft time per drafted token (per row) / mean AR decode step time (None when either is unknown)."""
    ar_ms = _mean_ar_step_ms(ar)
    drafting = [s for s in _decode(spec) if s.depth > 0]
    drafted = sum(_row_drafts(s) for s in drafting)
    if ar_ms is None or not drafted:
        return None
    return sum(s.draft_ms for s in drafting) / drafted / ar_ms


def verify_cost_ratio(ar, spec) -> float | None:
    """Mean speculative verify pass time / mean AR step time: 1.0 means verifying k+1 tokens is free."""
    ar_ms = _mean_ar_step_ms(ar)
    verify = [s for s in _decode(spec) if s.depth > 0]
    if ar_ms is None or not verify:
        return None
    return (sum(s.verify_ms for s in verify) / len(verify)) / ar_ms


def median_verify_ratio(ar, spec) -> float | None:
    """T_verify / T_AR at the same rows in flight: per batch size both runs decoded at, the speculative run's median
    verify time over the AR run's median step time, then their geometric mean weighted by the speculative steps at
    each. A batch shrinks as its rows finish, at other steps in the two runs, so pooling every step would set a pass
    over 1 row against one over 2 (a Replay race read 0.73× so, about 0.95× at the same batch). Without a shared batch
    size: the pooled medians."""
    ar_steps, spec_steps = _decode(ar), _decode(spec)
    if not ar_steps or not spec_steps:
        return None
    logs, weight = 0.0, 0
    for b in {s.batch for s in spec_steps} & {s.batch for s in ar_steps}:
        at_b = [s.verify_ms for s in spec_steps if s.batch == b]
        ar_ms = statistics.median(s.verify_ms for s in ar_steps if s.batch == b)
        if ar_ms > 0 and statistics.median(at_b) > 0:
            logs += len(at_b) * math.log(statistics.median(at_b) / ar_ms)
            weight += len(at_b)
    if weight:
        return math.exp(logs / weight)
    ar_ms = statistics.median(s.verify_ms for s in ar_steps)
    return statistics.median(s.verify_ms for s in spec_steps) / ar_ms if ar_ms > 0 else None


def kept_per_step(trace) -> float | None:
    """Tokens a sequence gained per decode step, over every decode step and row (drafting or not)."""
    rows = [len(q.emitted) for s in _decode(trace) for q in s.seqs]
    return sum(rows) / len(rows) if rows else None


def step_cost_ratio(ar, spec) -> float | None:
    """Mean speculative decode step (draft + verify + overhead) / mean AR decode step, both wall time."""
    ar_steps, spec_steps = _decode(ar), _decode(spec)
    if not ar_steps or not spec_steps:
        return None
    ar_ms = sum(s.step_ms for s in ar_steps) / len(ar_steps)
    return (sum(s.step_ms for s in spec_steps) / len(spec_steps)) / ar_ms if ar_ms > 0 else None


def draft_flops_ratio(ar, spec) -> float | None:
    """ĉ: FLOPs per drafted token / FLOPs per token of a plain target pass (0 for a lookup drafter)."""
    drafted = sum(len(q.drafted) for s in _decode(spec) for q in s.seqs)
    ar_steps = _decode(ar)
    ar_tokens = sum(s.tokens_per_pass for s in ar_steps)
    if not drafted or not ar_tokens:
        return None
    target_per_token = sum(s.target_flops for s in ar_steps) / ar_tokens
    if target_per_token <= 0:
        return None
    return sum(s.draft_flops for s in _decode(spec)) / drafted / target_per_token


def leviathan_measured_verify(alpha: float, depth: float, c: float, verify_ratio: float) -> float:
    """Speedup = E(α, k) / (k·c + T_verify(B·(k+1)) / T_AR(B)): Theorem 3.8 with the verify pass priced as
    measured instead of as one plain step. verify_ratio 1 gives Leviathan's formula back."""
    return expected_tokens_per_step(alpha, depth) / (depth * c + verify_ratio)


def compare(ar, spec) -> dict:
    """Every number the summary panel shows. Missing quantities are None, never NaN."""
    a, s = ar.summary, spec.summary
    depth = int(spec.config.get("depth", 0))
    k = drafted_depth(spec)
    c = measured_c(ar, spec)
    alpha = s.get("alpha")
    ratio = median_verify_ratio(ar, spec)
    c_hat = draft_flops_ratio(ar, spec)
    ready = alpha is not None and k is not None and k > 0
    predicted = expected_speedup(alpha, k, c) if ready and c is not None else None
    measured_model = leviathan_measured_verify(alpha, k, c, ratio) if ready and c is not None and ratio else None
    ops = operations_factor(alpha, k, c_hat) if ready and c_hat is not None else None
    whole = s["tokens_per_s"] / a["tokens_per_s"] if a["tokens_per_s"] else None
    decode_a, decode_s = a["decode_tokens_per_s"], s["decode_tokens_per_s"]
    speedup = ranking_rate(s) / ranking_rate(a) if ranking_rate(a) else None  # decoding alone, by the one rule
    flops_ratio = s["flops"] / a["flops"] if a.get("flops") else None
    return {
        "ar_tokens_per_s": a.get("tokens_per_s"),
        "spec_tokens_per_s": s.get("tokens_per_s"),
        "speedup": speedup,
        "whole_run_speedup": whole,
        "ar_decode_tokens_per_s": decode_a,
        "spec_decode_tokens_per_s": decode_s,
        "ar_ttft_s": a["ttft_s"],
        "spec_ttft_s": s["ttft_s"],
        "ar_wall_s": a.get("wall_s"),
        "spec_wall_s": s.get("wall_s"),
        "acceptance_rate": s.get("acceptance_rate"),
        "alpha": alpha,
        "tokens_per_step": s.get("tokens_per_step"),
        "ar_target_forwards": a.get("target_forwards"),
        "spec_target_forwards": s.get("target_forwards"),
        "ar_flops": a.get("flops"),
        "spec_flops": s.get("flops"),
        "flops_ratio": flops_ratio,
        "decode_flops_ratio": decode_flops_ratio(ar, spec),
        "flops_wasted": s.get("flops_wasted"),
        "depth": depth,
        "drafted_depth": k,
        "c": c,
        "c_hat": c_hat,
        "verify_cost_ratio": verify_cost_ratio(ar, spec),
        "median_verify_ratio": ratio,
        "step_cost_ratio": step_cost_ratio(ar, spec),
        "kept_per_step": kept_per_step(spec),
        "ar_decode_steps": len(_decode(ar)),
        "spec_decode_steps": len(_decode(spec)),
        "predicted_speedup": predicted,
        "predicted_measured_verify": measured_model,
        "operations_factor": ops,
        "first_differences": first_differences(ar.output_ids, spec.output_ids),
    }


def fmt_flops(x: float | None) -> str:
    if x is None:
        return "—"
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.0f} FLOP"


def fmt(x, spec: str = ".2f", suffix: str = "") -> str:
    return "—" if x is None else f"{x:{spec}}{suffix}"


def arithmetic_line(m: dict, verdict: Verdict | None = None) -> str:
    """What the run says about arithmetic and time, every claim decided by its numbers (the Playground's caption).
    verdict: speculative against plain over the interleaved rounds (`speed_verdict`), the only source of a winner;
    the speedup in `m` is then the round drawn."""
    parts = [
        "Speculation does at least as much arithmetic as plain decoding for the same output; the two are equal only "
        "when every draft is accepted and the drafter is free."
    ]
    decode, ops = m.get("decode_flops_ratio"), m.get("operations_factor")
    if decode is not None:  # decode steps against Leviathan's factor over decode steps: one kind of number, compared
        parts.append(
            f"Here its decode steps did {decode:.2f}× plain decoding's FLOPs per decoded token"
            + (f" (Leviathan's operations factor for this run's α, k and ĉ: {ops:.2f}×)" if ops else "")
            + (f"; with the prompt's pass (prefill) included, {m['flops_ratio']:.2f}×." if m.get("flops_ratio") is not None else ".")
        )
    elif m.get("flops_ratio") is not None:
        parts.append(f"Here it did {m['flops_ratio']:.2f}× the FLOPs, the prompt's pass (prefill) included.")
    verify, speedup = m.get("median_verify_ratio"), m.get("speedup")
    if speedup is not None:
        if verify is not None:
            parts.append(verify_words(verify))
        lead = "In the round drawn here speculation" if verdict is not None else "Speculation"
        parts.append(f"{lead} ran {speedup:.2f}× as fast as plain decoding" + speedup_where(m) + speedup_reason(m, "here", verdict))
    return " ".join(parts)


SAME_WITHIN_NOISE = 0.05  # per-step timings on a shared machine scatter by a few percent: closer than this is "the same"


def verify_words(verify: float) -> str:
    """The verify pass against a plain step, never as cheaper than the one-token pass it extends: a pass that
    carries more tokens reads "about the same" when it measured at or below a plain step (the gap is noise)."""
    if verify < 1 + SAME_WITHIN_NOISE:
        return (
            f"A verify pass cost about the same as a plain step ({verify:.2f}×, median: the same within noise, since a "
            "pass carrying more tokens cannot be cheaper than one carrying fewer); Leviathan's formula assumes 1.00×."
        )
    return f"A verify pass cost {verify:.2f}× a plain step (median; Leviathan's formula assumes 1.00×)."


def speedup_where(m: dict) -> str:
    """' decoding alone (… whole run …)': which clock the speedup is on, with the whole-run figure beside it."""
    whole = m.get("whole_run_speedup")
    if m["ar_decode_tokens_per_s"] is None or m["spec_decode_tokens_per_s"] is None:  # engine/trace/rates.py's one rule
        return " over the whole run (prefill included: a run with no decode step wrote only the prompt's pass's tokens)"
    return f" after the first token (decoding alone; {whole:.2f}× over the whole run, the prompt's prefill included)" if whole else ""


# what the one rule's verdict (engine/verdict.py) says of speculation, as the end of a sentence
VERDICT_CLAUSE = {
    "faster": "speculation paid",
    "slower": "speculation slowed decoding down",
    "level": "the two were level",
    "can't tell": "no winner can be named from these rounds",
}


def speedup_reason(m: dict, where: str, rule: Verdict | None = None) -> str:
    """': <steps saved and what a step cost>, which is why <won or lost>' from `compare` numbers.

    Decode time is (decode steps) x (mean step time), so the speedup over the decode steps is the factor by which
    speculation cut the steps divided by what a speculative step cost in plain steps. The verdict is the measured
    speedup; the step comparison is called its reason only when the two agree (the prefill can tip a close run).
    With `rule` (the one rule over the interleaved rounds, engine/verdict.py) the verdict is the rule's, and where
    it names no winner none is named."""
    step, speedup = m.get("step_cost_ratio"), m["speedup"]
    n_ar, n_spec, kept = m.get("ar_decode_steps"), m.get("spec_decode_steps"), m.get("kept_per_step")
    won = speedup > 1 if rule is None else rule.sign > 0
    verdict = VERDICT_CLAUSE["faster" if won else "slower"] if rule is None else VERDICT_CLAUSE[rule.kind]
    if step is None or not n_ar or not n_spec:
        return f": {verdict}."
    fewer = n_ar / n_spec
    gains = fewer > step
    said = (
        f": {where} it took {n_spec} decode steps against {n_ar} ({fewer:.2f}× fewer), and a speculative step cost {step:.2f} plain steps"
    )
    if kept is not None and fewer < 0.9 * kept:
        said += (
            f" (a sequence kept {kept:.2f} tokens per step on average over all its decode steps, plain ones included, "
            "not τ's drafting steps alone; but a batch runs until its slowest sequence is done)"
        )
    if rule is not None and rule.sign == 0:
        return said + f"; by the rule over {rule.rounds} round{'s' if rule.rounds != 1 else ''}, {verdict}."
    if gains == won:
        return said + f", which is why {verdict}."
    return said + f"; the timed steps and the decode clock disagree within noise, and over the decode {verdict}."


def divergence_note(greedy: bool, dtype: str, diffs: dict[int, int]) -> str | None:
    """One sentence on why the lanes' outputs part, or None when they match."""
    if not diffs:
        return None
    where = ", ".join(f"sequence {i + 1} at token {j + 1}" for i, j in sorted(diffs.items())[:4])
    if not greedy:
        return (
            f"The lanes differ ({where}): with temperature > 0 both sample from the target's distribution, "
            "but they draw different random numbers, so their texts differ while their statistics match."
        )
    if dtype != "float32":
        return (
            f"The lanes part at ⚑ ({where}): in {dtype} a k-token verify pass and a single-token pass round "
            "differently, so a near-tie in the target's argmax can flip; switch to float32 and the lanes match exactly."
        )
    return f"The lanes differ ({where}) even in float32: that would be a bug, please report it."


def machine_line(trace, threads_source: str | None = None) -> str:
    """'Measured on <machine> · cpu float32 · 2 torch threads (CPU quota 2)': the run's machine line (Markdown;
    the trace's strings, which may come from an uploaded file, are shown literally). threads_source: why this
    server uses that many threads (live runs only; a recorded trace's machine name carries its thread count)."""
    meta, summary = trace.meta, trace.summary
    name = meta.get("device_name") or (meta.get("probe") or {}).get("device_name") or "an unknown machine"
    device = str(meta.get("device") or summary.get("device") or "")
    dtype = str(summary.get("dtype") or meta.get("dtype") or "")
    line = f"Measured on {md_text(name)} · {md_text(f'{device} {dtype}'.strip()) or 'unknown device'}"
    if threads_source and device == "cpu":
        line += f" · torch threads: {md_text(threads_source)}"
    return line


# --- interleaved rounds and the one verdict rule (engine/verdict.py) ------------------------------
def round_rates(ar, spec) -> dict:
    """One round (a plain lane, then a speculative one) as its four rates in tokens/s: each lane decoding alone (the
    prompt's pass apart; a run with no decode step: its whole run, engine/trace/rates.py's one rule) and over the
    whole run."""
    a, s = ar.summary, spec.summary
    return {"ar_decode": ranking_rate(a), "spec_decode": ranking_rate(s), "ar_whole": a["tokens_per_s"], "spec_whole": s["tokens_per_s"]}


def speed_verdict(rounds: list[dict]) -> Verdict:
    """Speculative against plain, decoding alone, by the one rule over the rounds (paired round by round)."""
    return judge([r["spec_decode"] for r in rounds], [r["ar_decode"] for r in rounds])


def whole_run_verdict(rounds: list[dict]) -> Verdict:
    """Speculative against plain over the whole run (the prompt's pass included), by the same rule."""
    return judge([r["spec_whole"] for r in rounds], [r["ar_whole"] for r in rounds])


def verdict_sentence(v: Verdict) -> str:
    """The one rule's verdict on speculation against plain decoding, decoding alone, as a sentence with its interval."""
    if v.rounds < 2:
        return f"One run each: can't tell; add rounds. Decoding alone, speculative ÷ plain tokens/s was {v.interval}."
    if v.kind == "can't tell":
        return f"Decoding alone, speculation against plain decoding: can't tell, {v.interval}; add rounds."
    return f"Decoding alone, speculation was {v.words(b='plain decoding')}."


def rounds_line(rounds: list[dict], shown: int | None = None) -> str:
    """Every round's decoding-alone rates in the order run: 'Decoding alone, in the order run: round 1: plain 58.1,
    speculative 70.2 tokens/s (1.21×); …', the round whose lanes are drawn marked."""
    parts = [
        f"round {i + 1}{' (drawn)' if i == shown and len(rounds) > 1 else ''}: plain {r['ar_decode']:.1f}, speculative "
        f"{r['spec_decode']:.1f} tokens/s ({r['spec_decode'] / r['ar_decode']:.2f}×)"
        for i, r in enumerate(rounds)
    ]
    return "Decoding alone, in the order run: " + "; ".join(parts) + "."


def whole_run_excess(rounds: list[dict]) -> str | None:
    """None when the whole run's speedup stays within max(1, the decode-only speedup), else a sentence saying it did not.

    Both lanes read the same prompts in their first pass (the speculative lane its drafter's share too), so the whole
    run's ratio is the decode-only one diluted toward 1: it may fall below the decode-only one, never rise above both it
    and 1. Rising beyond that means the lanes were not on one clock (a cold start or other work in one lane). Beyond the
    noise: by the one rule over the rounds (the whole run's ratio 'faster' than the bound, round by round); with one
    round, which has no range, by more than the rule's smallest gap."""
    whole = [r["spec_whole"] / r["ar_whole"] for r in rounds]
    bound = [max(1.0, r["spec_decode"] / r["ar_decode"]) for r in rounds]
    v = judge(whole, bound)
    beyond = v.kind == "faster" if v.rounds > 1 else v.ratio >= 1 + MIN_GAP
    if not beyond:
        return None
    return (
        f"Check failed: over the whole run speculation ran {whole_run_verdict(rounds).ratio:.2f}× as fast as plain decoding, "
        f"above the {speed_verdict(rounds).ratio:.2f}× of decoding alone (whole run ÷ max(1, decoding alone): {v.interval}). "
        "The prompt's pass, the same in both lanes, can only pull the whole run toward 1, so the lanes were not on one "
        "clock (a cold start, or other work during one lane): run again, or add rounds."
    )
