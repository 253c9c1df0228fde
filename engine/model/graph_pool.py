"""Static KV buffers and CUDA graphs kept per model and bucket across decode runs (issue 30, item 5).

A CUDA graph replays fixed addresses: the static KV buffers it reads and writes must outlive it. Made
anew at every run, every run paid for new buffers and new captures, and the capture time landed inside
the run (then subtracted from passes timed on another clock). Here each model (a target, a draft model or
an EAGLE runner) keeps, per cache mode, a `PoolEntry`: its buffers, the StaticPass over them and the
GraphRunner with its graphs and memory pool. A run takes a free entry at set-up (`acquire`, called where
the decode loop makes its caches, before its clock starts) and gives it back when its cache is dropped.

- Buffers grow, never shrink: a run needing more rows or columns than the entry holds reallocates them
  (`PoolEntry.ensure`), and the graphs over the old buffers are dropped with them.
- A bucket first met inside a run runs eagerly there and is queued (GraphRunner's `defer`); the next
  set-up captures the queue, largest bucket first, two warm-ups each, on the host clock, and the trace
  reports it as warm-up (`graph_capture_ms`), not inside a lane. `engine.decoding.warmup.warm_graphs`
  does one untimed run and its captures right after a model loads.
- Two caches of one model decoding at once (two runs iterated in lockstep) get two entries; beyond
  MAX_ENTRIES per model and mode an entry is made for that run only (correct, not kept).

The pool holds models weakly: a model pair that leaves memory takes its buffers and graphs with it.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

import torch

from engine.model.graphs import GraphRunner

MAX_ENTRIES = 2  # kept per model and mode


@dataclass(eq=False)
class PoolEntry:
    mode: str
    graphs: GraphRunner
    kv: object | None = None  # engine.model.static_cache.StaticKV
    passes: object | None = None  # engine.model.static_cache.StaticPass over kv
    in_use: bool = False
    runs: int = 0  # set-ups that took this entry
    allocations: int = 0  # times its buffers were (re)allocated
    kept: bool = field(default=True)

    def ensure(self, rows: int, capacity: int, make) -> bool:
        """Buffers of at least `rows` x `capacity`: kept when they fit, else `make(rows, capacity) -> (kv,
        passes)` at the larger of old and new sizes, and the graphs over the old buffers are forgotten.
        Returns True when it (re)allocated."""
        kv = self.kv
        if kv is not None and kv.rows >= rows and kv.capacity >= capacity:
            return False
        if kv is not None:
            rows, capacity = max(rows, kv.rows), max(capacity, kv.capacity)
        self.kv = self.passes = None  # the old buffers can go before the new ones are allocated
        self.graphs.reset()
        self.kv, self.passes = make(rows, capacity)
        self.allocations += 1
        return True


_POOL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> [PoolEntry]
_LOCK = threading.Lock()


def acquire(owner: torch.nn.Module, mode: str, device: torch.device) -> PoolEntry:
    """A free entry of `owner` for `mode` (made when none is free), marked in use and ready for a run:
    its per-run counts zeroed and the buckets queued by earlier runs captured now (before the run's clock)."""
    with _LOCK:
        entries = _POOL.setdefault(owner, [])
        entry = next((e for e in entries if e.mode == mode and not e.in_use), None)
        if entry is None:
            kept = sum(e.mode == mode for e in entries) < MAX_ENTRIES
            entry = PoolEntry(mode, GraphRunner(device, capture=mode == "graphs", defer=True), kept=kept)
            if kept:
                entries.append(entry)
        entry.in_use = True
    entry.runs += 1
    entry.graphs.start_run()
    entry.graphs.capture_pending()
    return entry


def release(entry: PoolEntry) -> None:
    entry.in_use = False


def entries(owner: torch.nn.Module) -> list[PoolEntry]:
    """The kept entries of a model (for warm-up and tests)."""
    with _LOCK:
        return list(_POOL.get(owner, ()))


def capture_pending(owner: torch.nn.Module) -> tuple[int, float]:
    """Capture every queued bucket of a model's free entries now: (graphs captured, host ms)."""
    captured, ms = 0, 0.0
    for entry in entries(owner):
        if entry.in_use:
            continue
        before = entry.graphs.capture_ms_total
        captured += entry.graphs.capture_pending()
        ms += entry.graphs.capture_ms_total - before
    return captured, ms
