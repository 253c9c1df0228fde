"""Summary numbers for an AR trace beside a speculative trace of the same prompts.

Leviathan, Kalman, Matias 2023 (Theorem 3.8): expected speedup = (1 - α^(k+1)) / ((1 - α)(k·c + 1)),
with α the measured per-token acceptance, k the depth and c the measured cost ratio
c = (mean draft forward time per drafted token) / (mean plain target step time),
the plain target step time taken from the AR trace's decode steps (each is one plain target pass).
The formula assumes a k-token verify costs one plain target step (the memory-bound regime); the
measured verify / AR step ratio is reported beside it to show when that assumption breaks.
"""

from __future__ import annotations

from engine.costs import expected_speedup

from .tokens import first_differences


def measured_c(ar, spec) -> float | None:
    """Mean draft time per drafted position / mean AR decode step time (None when either is unknown)."""
    ar_steps = [s for s in ar.steps if s.kind == "decode"]
    drafting = [s for s in spec.steps if s.kind == "decode" and s.depth > 0]
    if not ar_steps or not drafting:
        return None
    ar_step_ms = sum(s.verify_ms for s in ar_steps) / len(ar_steps)
    draft_ms_per_token = sum(s.draft_ms for s in drafting) / sum(s.depth for s in drafting)
    return draft_ms_per_token / ar_step_ms if ar_step_ms > 0 else None


def verify_cost_ratio(ar, spec) -> float | None:
    """Mean speculative verify pass time / mean AR step time: 1.0 means verifying k+1 tokens is free."""
    ar_steps = [s for s in ar.steps if s.kind == "decode"]
    verify = [s for s in spec.steps if s.kind == "decode" and s.depth > 0]
    if not ar_steps or not verify:
        return None
    ar_ms = sum(s.verify_ms for s in ar_steps) / len(ar_steps)
    return (sum(s.verify_ms for s in verify) / len(verify)) / ar_ms if ar_ms > 0 else None


def compare(ar, spec) -> dict:
    """Every number the summary panel shows. Missing quantities are None, never NaN."""
    a, s = ar.summary, spec.summary
    depth = int(spec.config.get("depth", 0))
    c = measured_c(ar, spec)
    alpha = s.get("alpha")
    predicted = expected_speedup(alpha, depth, c) if alpha is not None and c is not None and depth > 0 else None
    speedup = s["tokens_per_s"] / a["tokens_per_s"] if a.get("tokens_per_s") else None
    flops_ratio = s["flops"] / a["flops"] if a.get("flops") else None
    return {
        "ar_tokens_per_s": a.get("tokens_per_s"),
        "spec_tokens_per_s": s.get("tokens_per_s"),
        "speedup": speedup,
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
        "flops_wasted": s.get("flops_wasted"),
        "depth": depth,
        "c": c,
        "verify_cost_ratio": verify_cost_ratio(ar, spec),
        "predicted_speedup": predicted,
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
