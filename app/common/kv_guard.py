"""The long-context guard: how many tokens of KV cache (batch × context per row) one run on this server may hold.

A CPU server holds batch 8 at 4,096 tokens of context (32,768 tokens of cache, about 0.75 GB for the embedded target in
bfloat16); a GPU sixteen times that. Every page where a context is chosen (the Playground's context slider, the
Sweep's context axis and its pass curve's cache length) asks this one function, so the limit and its sentence are the
same wherever a user meets them. Plain data, no streamlit.
"""

from __future__ import annotations

CPU_CONTEXT_GUARD = 32_768  # batch × context tokens of KV cache allowed on a CPU server (batch 8 at 4,096)
GPU_CONTEXT_GUARD = 524_288


def context_guard(on_gpu: bool) -> int:
    """This server's most batch × context tokens of KV cache for one run."""
    return GPU_CONTEXT_GUARD if on_gpu else CPU_CONTEXT_GUARD


def context_problem(batch: int, context: int, on_gpu: bool, fix: str = "lower the batch size or the context") -> str | None:
    """The one-line refusal of a run whose batch × context is above the guard, or None where it fits."""
    guard = context_guard(on_gpu)
    if batch * context <= guard:
        return None
    return (
        f"batch {batch} × context {context:,} = {batch * context:,} tokens of KV cache, above this server's guard of {guard:,}. Fix: {fix}."
    )
