"""A warm-up before the clock, shared by the Playground and the Lessons: a process's first passes after a pause pay a
cold start (first calls, allocations, caches; one token's prefill once read 166 ms against 30 ms warm), so every
contender decodes once, untimed, before any timed round. At most WARM_TOKENS new tokens: every pass shape of the job
(the prompt's pass, a decode step, a verify pass) at a fraction of its time. No streamlit."""

from __future__ import annotations

import dataclasses
import time

from engine import DecodeConfig, generate

WARM_TOKENS = 4


def warm(pair, prompts: list[str], cfg: DecodeConfig, prefix_cache=None):
    """(the warm-up's trace, the seconds it took): `cfg` once on `prompts`, at most WARM_TOKENS new tokens; with the
    run's warm prefix cache (engine/model/prefix_cache.py) the prompts' shared prefix is filed there for the timed runs."""
    t0 = time.perf_counter()
    short = dataclasses.replace(cfg, max_new_tokens=min(cfg.max_new_tokens, WARM_TOKENS))
    trace = generate(pair, prompts, short, prefix_cache=prefix_cache)
    return trace, time.perf_counter() - t0
