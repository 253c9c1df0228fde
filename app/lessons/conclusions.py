"""The Lessons page's conclusions, as text computed from what an experiment just measured (no streamlit).

Each function takes the measurement an experiment in app/lesson_experiments.py returns (pass-cost rows and
probed peaks, or lanes (app/measurement.py) and their `metrics.compare` numbers), live or recorded, and
returns Markdown. Every claim is decided
by comparing the run's own numbers: a measured cost against the ridge or a 1.25× tolerance, tokens kept
against what a step cost, one run's α or draft time against another's. No outcome is written in advance.
"""

from __future__ import annotations

from app.lessons.load import cell
from app.views import metrics, roofline

NEARLY_FREE = 1.25  # a pass within this factor of the one-token (or plain) pass counts as nearly free


def _row_at(rows: list[dict], tokens: int) -> dict:
    return min(rows, key=lambda r: abs(r["tokens_per_pass"] - tokens))


def memory_bound_conclusion(result: dict) -> list[str]:
    """Lesson 1's conclusion, every claim decided by the measured rows and the probed peaks."""
    rows = sorted(result["rows"], key=lambda r: r["tokens_per_pass"])
    first, sixteen = rows[0], _row_at(rows, 16)
    one, many, n = first["ms"], sixteen["ms"], sixteen["tokens_per_pass"]
    extra = (many - one) / (n - 1) if n > 1 else 0.0
    cheap = extra < one / 2
    lines = [
        f"One token: {one:.1f} ms. {'Sixteen' if n == 16 else n} tokens in one pass: {many:.1f} ms, or {many / one:.2f}× "
        f"the time for {n}× the tokens ({one / sixteen['ms_per_token']:.1f}× cheaper per token). Each extra token "
        f"added {extra:.1f} ms on average, against {one:.1f} ms for the first: "
        + (
            "less than half, so most of a pass's time did not depend on how many tokens it carried."
            if cheap
            else "at least half, so on this machine the extra tokens were not nearly free."
        )
    ]
    shares = roofline.peak_shares(rows, result["peak_bandwidth"], result["peak_flops"])
    low, high = shares[0], shares[-1]
    lines.append(
        f"Against the probed peaks ({result['peak_bandwidth'] / 1e9:.0f} GB/s, {result['peak_flops'] / 1e9:.0f} GFLOP/s, "
        f"{result['dtype']}): the one-token pass did {low['intensity']:.2f} FLOP per byte it read and reached "
        f"{low['bandwidth_share']:.0%} of peak bandwidth and {low['flops_share']:.0%} of peak FLOP/s, so it was "
        f"**{low['regime']}**; the {high['tokens_per_pass']}-token pass reached {high['bandwidth_share']:.0%} and "
        f"{high['flops_share']:.0%}: **{high['regime']}**."
    )
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


def more_flops_conclusion(m: dict) -> str:
    ops = m.get("operations_factor")
    text = (
        f"Speculation did {m['flops_ratio']:.2f}× the FLOPs of plain decoding"
        + (f" (Leviathan's operations factor for this run's α and k: {ops:.2f}× over the decode steps)" if ops else "")
        + f", and {metrics.fmt_flops(m['flops_wasted'])} of them went on rejected draft tokens. "
    )
    text += f"It ran {m['speedup']:.2f}× as fast as plain decoding" + metrics.speedup_reason(m, "here")
    verify = m.get("median_verify_ratio")
    if verify is not None:
        text += f" A verify pass alone cost {verify:.2f}× a plain step (median)."
    return text


def drafter_label(kind: str) -> str:
    return {"eagle": "EAGLE head", "model": "draft model", "ngram": "n-gram lookup"}.get(kind, kind)


def draft_share(lane: dict) -> float:
    """Fraction of the decode steps' time a lane spent drafting (app/measurement.py `lane`)."""
    return lane["draft_share"]


def ridge_run_line(label: str, batch: int, run: dict, depth: int) -> str:
    m = run["m"]
    steps = (
        f"; {m['spec_decode_steps']} decode steps against {m['ar_decode_steps']} plain"
        if m.get("spec_decode_steps") and m.get("ar_decode_steps")
        else ""
    )
    return (
        f"- {label}, batch {batch}: {batch * (depth + 1)} tokens per pass (batch × (k + 1)); a verify pass "
        f"cost {metrics.fmt(m['median_verify_ratio'])}× a plain step of the same batch, a whole step "
        f"{metrics.fmt(m['step_cost_ratio'])}× ({draft_share(run['spec']):.0%} of it drafting); α "
        f"{metrics.fmt(m['alpha'])}, {metrics.fmt(m.get('kept_per_step'))} tokens kept per sequence per step"
        f"{steps}; speedup {m['speedup']:.2f}×"
    )


def past_the_ridge_conclusion(result: dict, depth: int) -> list[str]:
    """Lesson 3's conclusion: the measured verify cost against the ridge, and why the n-gram run differs."""
    name = drafter_label(result["drafter"])
    one, many = sorted(result["runs"], key=lambda r: r["batch"])
    b1, bn = one["batch"], many["batch"]
    t1, tn = b1 * (depth + 1), bn * (depth + 1)
    m1, mn, ng = one["m"], many["m"], result["ngram"]["m"]
    lines = []
    ridge = result.get("ridge_tokens")
    if ridge:

        def side(tokens):
            return "below" if tokens < ridge else "at or above"

        lines.append(
            f"From the probed peaks the ridge is ≈ {ridge:.0f} tokens per pass: batch {b1}'s verify pass "
            f"({t1} tokens) is {side(t1)} it, batch {bn}'s ({tn} tokens) {side(tn)} it."
        )
    v1, vn = m1["median_verify_ratio"], mn["median_verify_ratio"]
    if v1 is not None and vn is not None:

        def free(ratio):
            return f"within {NEARLY_FREE}×: nearly free" if ratio <= NEARLY_FREE else f"above {NEARLY_FREE}×: not free"

        lines.append(
            f"Verifying {depth} draft tokens per sequence cost {v1:.2f}× a plain step of the same batch at "
            f"batch {b1} ({free(v1)}) and {vn:.2f}× at batch {bn} ({free(vn)})."
        )
    line = f"With the {name}, the speedup went from {m1['speedup']:.2f}× at batch {b1} to {mn['speedup']:.2f}× at batch {bn}"
    lines.append(line + metrics.speedup_reason(mn, f"at batch {bn}"))
    if ng["alpha"] is not None and mn["alpha"] is not None:
        dn, dm = draft_share(result["ngram"]["spec"]), draft_share(many["spec"])
        reasons = []
        if dn < dm:
            reasons.append(f"its drafts took {dn:.0%} of a step against {dm:.0%} for the {name}")
        if ng["alpha"] > mn["alpha"]:
            reasons.append(f"its acceptance on text it can copy was α {ng['alpha']:.2f} against {mn['alpha']:.2f}")
        better = ng["speedup"] > mn["speedup"]
        text = (
            f"The n-gram lookup at batch {bn} on extractive prompts ran {ng['speedup']:.2f}× plain decoding "
            f"({'better' if better else 'no better'} than the {name}'s {mn['speedup']:.2f}×)"
        )
        if better and reasons:
            text += ": " + " and ".join(reasons) + "."
        else:
            text += (
                f". Its drafts took {dn:.0%} of a step (the {name}'s {dm:.0%}) and its α was {ng['alpha']:.2f} "
                f"(the {name}'s {mn['alpha']:.2f})."
            )
        lines.append(text)
    return lines


def verified_slots(lane: dict) -> tuple[int, int]:
    """(draft positions the target verified, real draft tokens among them): the rest is padding, the slots of rows
    that had stopped drafting while another row in the batch went on (app/measurement.py `verified_slots`)."""
    slots, real = lane["verified_slots"]
    return slots, real


def adaptive_conclusion(result: dict, gate_depth: int) -> str:
    """Lesson 5's conclusion: what the gate changed, measured; nothing about the tokens it never sent."""
    parts = []
    for run in result["batches"]:
        batch = run["batch"]
        fixed, gated = run["fixed"]["summary"], run["gated"]["summary"]
        cut = 1 - gated["drafted_tokens"] / fixed["drafted_tokens"] if fixed["drafted_tokens"] else 0.0
        faster = gated["tokens_per_s"] / fixed["tokens_per_s"] if fixed["tokens_per_s"] else 0.0
        part = f"at batch {batch} it drafted {cut:.0%} fewer tokens and ran {faster:.2f}× as fast as drafting all {gate_depth}"
        if gated["alpha"] is not None and fixed["alpha"] is not None:
            higher = "higher than" if gated["alpha"] > fixed["alpha"] else "not higher than"
            part += (
                f", and the drafts it did send were accepted at α {gated['alpha']:.2f}, {higher} the "
                f"{fixed['alpha']:.2f} of drafting all {gate_depth}"
            )
        slots, real = verified_slots(run["gated"])
        if batch > 1 and slots:
            part += (
                f"; its verify passes still carried {slots - real} padded positions of {slots} draft slots "
                f"({(slots - real) / slots:.0%}), rows that had stopped while another row drafted on"
            )
        parts.append(part)
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
    return (
        f"Both passes carry {n} tokens and read the {wide['weight_bytes'] / 1e6:.0f} MB of weights once. "
        f"{timing} What differs is the KV cache: {wide['batch']} rows of context cost "
        f"{wide['kv_bytes'] / 1e6:.1f} MB of KV reads against {deep['kv_bytes'] / 1e6:.1f} MB for one row"
        + (f" ({kv:.1f}×)" if kv else "")
        + f", and {wide['flops'] / 1e9:.2f} against {deep['flops'] / 1e9:.2f} "
        f"GFLOP (the attention term). And what the tokens buy: the batch moves {wide['batch']} sequences one token "
        f"each; the single row moves one sequence by 1 plus however many of its {deep['new_tokens'] - 1} drafts "
        "the target accepts."
    )


def width_table(result: dict) -> list[dict]:
    """Lesson 7's rows as a table: tokens per pass (what the verify pass carries), tokens emitted per pass,
    tokens/s, the verify pass's median time and FLOPs against plain decoding at the same batch."""
    out = []
    for r in result["rows"]:
        plain = cell(result["rows"], r["batch"], "plain decoding")
        out.append(
            {
                "batch": r["batch"],
                "contender": r["contender"],
                "tokens per pass": r["tokens_per_pass"],
                "tokens emitted per pass": round(r["tokens_per_step"], 2)
                if r.get("tokens_per_step")
                else (1.0 if r["contender"] == "plain decoding" else None),  # plain decoding: one per pass
                "tokens/s": round(r["tokens_per_s"], 1),
                "verify ms (median)": round(r["verify_ms"], 1) if r.get("verify_ms") is not None else None,
                "FLOPs × plain": round(r["flops"] / plain["flops"], 2) if plain and plain["flops"] else None,
            }
        )
    return out


def width_conclusion(result: dict) -> list[str]:
    """Lesson 7's conclusion, from the measurement: what the tree bought at batch 1 and what it cost at the large
    batch, against the chain of the same depth."""
    shape = f"{result['nodes']} nodes, top-{result['topk']}, depth {result['depth']}"
    lines, ratios = [], {}
    for batch in sorted({r["batch"] for r in result["rows"]}):
        tree, chain = cell(result["rows"], batch, "tree"), cell(result["rows"], batch, "chain")
        if not tree or not chain or not chain["tokens_per_s"]:
            continue
        ratio = tree["tokens_per_s"] / chain["tokens_per_s"]
        ratios[batch] = ratio
        text = (
            f"Batch {batch}: the tree ({shape}) ran {tree['tokens_per_s']:.1f} tokens/s, {ratio:.2f}× the chain's "
            f"{chain['tokens_per_s']:.1f} ({'faster' if ratio > 1 else 'slower'})."
        )
        if tree.get("tokens_per_step") and chain.get("tokens_per_step"):
            text += f" Each pass emitted {tree['tokens_per_step']:.2f} tokens per sequence against {chain['tokens_per_step']:.2f}"
            if tree.get("verify_ms") and chain.get("verify_ms"):
                text += (
                    f", and its verify pass of {tree['tokens_per_pass']} tokens took {tree['verify_ms']:.1f} ms "
                    f"against {chain['verify_ms']:.1f} ms for the chain's {chain['tokens_per_pass']} "
                    f"({tree['verify_ms'] / chain['verify_ms']:.2f}×)"
                )
            text += "."
        lines.append(text)
    if len(ratios) == 2:
        (small, r_small), (large, r_large) = sorted(ratios.items())
        big = cell(result["rows"], large, "tree")
        kept = (big["tokens_per_step"] - 1) / result["nodes"] if big.get("tokens_per_step") else None
        waste = f" ({1 - kept:.0%} of the tree's nodes were rejected at batch {large})" if kept is not None and 0 <= kept <= 1 else ""
        if r_small > 1 >= r_large:
            lines.append(
                f"Width paid at batch {small} and cost at batch {large}. At batch {small} the tree's extra "
                "nodes filled idle compute, the same compute a larger batch fills; at batch "
                f"{large} the batch had already filled it, so the nodes were extra work{waste}."
            )
        elif r_small > 1 and r_large > 1:
            lines.append(
                f"Width paid at both batch sizes on this machine: at batch {large} the pass still had idle "
                "compute to spend, by this measurement."
            )
        else:
            lines.append(
                f"Width did not pay at batch {small} on this machine: a pass of more tokens cost more here "
                "than the extra accepted tokens bought."
            )
    return lines
