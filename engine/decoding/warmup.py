"""Capture a configuration's CUDA graphs at load, before any timed run.

`warm_graphs(pair, prompts, cfg)` decodes once, untimed: every shape bucket that run meets is queued in
the model pair's graph pool (engine/model/graph_pool.py), then captured at once, largest bucket first,
two warm-ups each. Later runs of that configuration replay; a bucket a later run meets for the first
time runs eagerly there and is captured at the next run's set-up. The time it took is warm-up on the
host's wall clock, returned here (and shown as such), never inside a lane's timings.
"""

from __future__ import annotations

import time

from engine.config import DecodeConfig
from engine.decoding.decode import generate
from engine.model import graph_pool
from engine.model.backend import choose_backend
from engine.options import BackendKind


def graph_owners(pair) -> list:
    """The models that may hold pooled buffers: the target, the draft model and the EAGLE runner."""
    return [pair.target, *(loaded.module for loaded in pair.loaded.values())]


def warm_graphs(pair, prompts: list[str], cfg: DecodeConfig) -> dict:
    """One untimed run of `cfg` on `prompts`, then every bucket it met captured. Returns
    {"graphs_captured", "warmup_ms" (host wall clock, the run and the captures), "graphs_ready"}."""
    if choose_backend(pair.device, cfg.backend, cfg.cuda_graphs).name != BackendKind.CUDA_GRAPHS.value:  # nothing to capture
        return {"graphs_captured": 0, "warmup_ms": 0.0, "graphs_ready": 0}
    t = time.perf_counter()
    trace = generate(pair, prompts, cfg)
    captured = 0
    for owner in graph_owners(pair):
        captured += graph_pool.capture_pending(owner)[0]
    ready = sum(sum(g is not None for g in e.graphs.graphs.values()) for o in graph_owners(pair) for e in graph_pool.entries(o))
    del trace
    return {"graphs_captured": captured, "warmup_ms": (time.perf_counter() - t) * 1000, "graphs_ready": ready}
