"""Pass costs at several contexts, in interleaved rounds: the third axis of a pass's size beside batch and depth.

A decode pass streams the weights once and every row's KV cache once; a verify pass of k + 1 tokens per row reads
the same cache as a one-token pass. So the longer the context, the larger the share of a pass that extra tokens per
row ride on for free. `context_rounds` times passes of `batch` rows × each of `tokens` new tokens per row over a
KV cache of each of `contexts` tokens per row: one cache per context, prefilled once (one row's context, copied into
every row: the shared prefix of engine/model/kvcache.py), then every (context, tokens) pass once per round, the
rounds in turn, so a burst of other work lands on every contender alike. The cache rolls back after each pass, so
every pass of a context sees the same cache.
"""

from __future__ import annotations

import statistics

import torch

from engine.config import DecodeConfig
from engine.hardware import StepTimer
from engine.model.pair import ModelPair
from engine.model.static_cache import make_cache

SEED = 0  # the contexts' token ids: the same every call, so a warm prefix cache serves them


def _rows(contexts: list[int], gen: torch.Generator) -> list[list[int]]:
    """One row of token ids per context, drawn in order from `gen`: the same rows for the same seed and contexts."""
    return [torch.randint(100, 40000, (context,), generator=gen).tolist() for context in contexts]


def _cache(pair: ModelPair, batch: int, row: list[int], most: int, prefix_cache=None):
    cache = make_cache(pair.target, pair.device, pair.target_costs, DecodeConfig(max_new_tokens=most))
    cache.warm = None if prefix_cache is None else prefix_cache.shared_only()  # a context prefilled before is read from it
    cache.prefill([row] * batch, pad_id=0, shared=len(row) - 1)
    return cache


def warm_contexts(pair: ModelPair, contexts: list[int], prefix_cache) -> None:
    """File the caches `context_rounds` builds for `contexts` in `prefix_cache` without timing a pass, so a later
    call over the same contexts reads them warm (a server does this before anyone asks, so no timing waits for a long
    context's prefill). Raises ValueError where a context does not fit the model's window."""
    if not contexts or min(contexts) < 2 or max(contexts) >= pair.max_context:
        raise ValueError(f"warm_contexts needs contexts of 2 to {pair.max_context - 1} tokens")
    with torch.inference_mode():
        for row in _rows(contexts, torch.Generator().manual_seed(SEED)):
            _cache(pair, 2, row, 1, prefix_cache)  # two rows: the shared prefix's pass files it


def _time(cache, ids: torch.Tensor, repeats: int, device) -> float:
    """The median of `repeats` timed passes of `ids` (each rolled back), after one untimed pass."""
    times = []
    for i in range(repeats + 1):
        with StepTimer(device) as timer:
            cache.forward(ids)
        cache.keep(cache.lengths - ids.shape[1])
        if i:
            times.append(timer.ms)
    return statistics.median(times)


def context_rounds(
    pair: ModelPair, batch: int, tokens: list[int], contexts: list[int], rounds: int = 5, repeats: int = 3, prefix_cache=None
) -> list[dict]:
    """One row per (context, new tokens per row): {"context", "batch", "new_tokens", "tokens_per_pass", "ms" (the
    median over rounds), "ms_rounds" (each round's median of `repeats` passes), "ms_per_token", "flops", "bytes"
    (weights + KV read, engine.costs), "achieved_flops", "achieved_bandwidth" (per second)}. Raises ValueError where
    a context and its new tokens do not fit the model's window. prefix_cache: the caller's warm prefixes
    (engine/model/prefix_cache.py): a context prefilled by an earlier call is read from it, not prefilled again."""
    if batch < 1 or rounds < 1 or repeats < 1 or not tokens or not contexts or min(tokens) < 1 or min(contexts) < 2:
        raise ValueError("context_rounds needs batch, rounds, repeats ≥ 1, new tokens ≥ 1 and contexts ≥ 2 tokens")
    if max(contexts) + max(tokens) > pair.max_context:
        raise ValueError(f"a context of {max(contexts)} plus {max(tokens)} new tokens exceeds the model's {pair.max_context}-token window")
    gen, costs = torch.Generator().manual_seed(SEED), pair.target_costs
    with torch.inference_mode():
        caches = {c: _cache(pair, batch, row, max(tokens), prefix_cache) for c, row in zip(contexts, _rows(contexts, gen))}
        ids = {n: torch.randint(100, 40000, (batch, n), generator=gen).to(pair.device) for n in tokens}
        for c in contexts:  # one untimed pass of every shape: first calls and allocations off the clock
            for n in tokens:
                _time(caches[c], ids[n], 1, pair.device)
        timed = {(c, n): [] for c in contexts for n in tokens}
        for _ in range(rounds):
            for c in contexts:
                for n in tokens:
                    timed[(c, n)].append(_time(caches[c], ids[n], repeats, pair.device))
    return [_row(batch, c, n, timed[(c, n)], costs) for c in contexts for n in tokens]


def _row(batch: int, context: int, n: int, rounds: list[float], costs) -> dict:
    ms = statistics.median(rounds)
    flops, nbytes = costs.forward_flops(batch, n, context), costs.forward_bytes(batch, n, context)
    return {
        "context": context,
        "batch": batch,
        "new_tokens": n,
        "tokens_per_pass": batch * n,
        "ms": ms,
        "ms_rounds": rounds,
        "ms_per_token": ms / (batch * n),
        "flops": flops,
        "bytes": nbytes,
        "achieved_flops": flops / (ms / 1000),
        "achieved_bandwidth": nbytes / (ms / 1000),
    }
