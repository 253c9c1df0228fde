"""What a chain of drafts is worth before the target sees it, and the depth that pays most (the goodput policy,
engine/decoding/goodput.py, prices chains with these; engine/decoding/tree_value.py prices trees).

In one step a row emits 1 + (accepted drafts) tokens; with a_j the acceptance of draft j given drafts 1..j-1 were
accepted, E[tokens](k) = 1 + sum over i <= k of a_1 x ... x a_i (Leviathan et al. 2023's expected tokens per step,
with a rate per position instead of one alpha). The depth that pays most maximises expected tokens per ms, with
the verify pass priced from the measured pass-cost curve (engine/decoding/passcurve.py).

A step's price is `step_rate`, the one rule goodput uses for plain steps, chains and trees alike; `PRICE_VERSION`
names it, and the warm-start store (engine/decoding/warmstart.py) keys what a policy learnt by it, so states learnt
under another pricing are not read back.
"""

from __future__ import annotations

PRICE_VERSION = 1  # raise it when `step_rate`'s rule changes


def step_rate(tokens: float, verify_ms: float, draft_ms: float = 0.0, fixed_ms: float = 0.0) -> float:
    """Expected tokens per ms of one decode step: the tokens it is expected to emit over what it costs, its verify pass,
    its drafting and the per-step time outside both (summed in that order)."""
    return tokens / (verify_ms + draft_ms + fixed_ms)


def expected_tokens(accept: list[float], k: int) -> float:
    """Expected tokens a row emits in a step of depth k: 1 (the target's own) + sum over i <= k of the
    chance that drafts 1..i are all accepted, with accept[j] the acceptance of position j+1 given the ones
    before it (with a constant alpha this is Leviathan et al.'s (1 - alpha^(k+1)) / (1 - alpha))."""
    total, run = 1.0, 1.0
    for j in range(k):
        run *= accept[j]
        total += run
    return total


def best_depth(batch: int, max_depth: int, accept, verify_ms, draft_ms_per_position: float, min_depth: int = 0, fixed_ms=(0.0, 0.0)):
    """(k, expected tokens per ms) maximising batch * E[tokens](k) / (verify_ms(batch * (k + 1)) + k * draft + fixed), k >= min_depth.
    fixed_ms: per-step time that does not grow with k, (plain step, speculative step); goodput measures it."""
    best_k, best_rate = (0, step_rate(batch, verify_ms(batch), fixed_ms[0])) if min_depth == 0 else (0, float("-inf"))
    for k in range(max(1, min_depth), max_depth + 1):
        rate = step_rate(batch * expected_tokens(accept, k), verify_ms(batch * (k + 1)), k * draft_ms_per_position, fixed_ms[1])
        if rate > best_rate:
            best_k, best_rate = k, rate
    return best_k, best_rate
