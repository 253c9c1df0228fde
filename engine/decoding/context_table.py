"""Goodput's (batch, context) -> k table: the depth the goodput policy chooses before it has learnt anything, at each
measured (batch, context), beside the depth the measured passes themselves price best.

vLLM's `num_speculative_tokens_per_batch_size` sets k per batch range; its RFC #48627 ("Context-length-aware
speculative token scheduling", github.com/vllm-project/vllm/issues/48627) proposes entries
[min_batch, max_batch, min_context, max_context, k], because at a long context a verify pass reads each row's KV
cache once whatever its tokens, and speculation pays again at a batch where it stopped paying at a short one. Each
row here is such an entry for one measured point: `k_prior` from goodput's prior (this machine's short-context curve
plus the KV read at the probed bandwidth, engine/decoding/goodput.py), `k_measured` from the (batch, context) curve
(engine/decoding/context_curves.py), both with the drafter's card as acceptance and the same drafting prior, so the
two differ only where the prior misprices the verify pass.
"""

from __future__ import annotations

from engine.config import DecodeConfig
from engine.decoding.chain_value import best_depth
from engine.decoding.policies import PolicyContext, goodput_policy


def k_table(pair, cfg: DecodeConfig, curves) -> list[dict]:
    """One row per (batch, context) curve: {"batch", "context", "k_prior", "k_measured", "rate_prior",
    "rate_measured" (expected tokens per ms at that k), "entry" (the RFC's [min_batch, max_batch, min_context,
    max_context, k], from k_measured)}. cfg: a speculative goodput configuration (its drafter and depth)."""
    if not cfg.speculative or cfg.depth < 1:
        raise ValueError("a k table needs a speculative configuration with depth >= 1")
    rows = []
    for curve in curves:
        batch, context = curve.batch, curve.context
        policy = goodput_policy(pair, cfg, batch, context, remember=False)
        k_prior = policy.depth(PolicyContext(step=1, batch=batch, base_depth=cfg.depth, mean_accepted=None, context=context))
        _, rate_prior = policy.last_choice
        draft_ms = policy.draft_ms_per_position(batch)
        k, rate = best_depth(batch, cfg.depth, policy.accept, curve.curve.time_ms, draft_ms)
        rows.append(
            {
                "batch": batch,
                "context": context,
                "k_prior": k_prior,
                "k_measured": k,
                "rate_prior": rate_prior,
                "rate_measured": rate,
                "entry": [batch, batch, context, context, k],
            }
        )
    return rows
