"""Static KV buffers and CUDA graphs kept per model and bucket across decode runs.

A CUDA graph replays fixed addresses: the static KV buffers it reads and writes must outlive it. Made
anew at every run, every run paid for new buffers and new captures, and the capture time landed inside
the run (then subtracted from passes timed on another clock). Here each model (a target, a draft model or
an EAGLE runner) keeps, per backend, a `PoolEntry`: its buffers and the GraphRunner with its graphs and memory
pool (the captured passes hold the `Pass` and the buffers they were captured over). A run takes a free entry at
set-up (`acquire`, called where the decode loop makes its caches, before its clock starts) and gives it back when
its cache is dropped.

- Buffers grow, never shrink: a run needing more rows or columns than the entry holds reallocates them
  (`PoolEntry.ensure`), and the graphs over the old buffers are dropped with them.
- A bucket first met inside a run runs eagerly there and is queued (GraphRunner's `defer`); the next
  set-up captures the queue, largest bucket first, two warm-ups each, on the host clock, and the trace
  reports it as warm-up (`graph_capture_ms`), not inside a lane. `engine.decoding.warmup.warm_graphs`
  does one untimed run and its captures right after a model loads.
- Two caches of one model decoding at once (two runs iterated in lockstep) get two entries; beyond
  MAX_ENTRIES per model and backend an entry is made for that run only (correct, not kept).

The pool holds models weakly: a model pair that leaves memory takes its buffers and graphs with it.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

import torch

from engine.model.graphs import GraphRunner

MAX_ENTRIES = 2  # kept per model and backend


@dataclass(eq=False)
class PoolEntry:
    backend: object  # engine.model.backend.Backend
    graphs: GraphRunner
    kv: object | None = None  # engine.model.static_cache.StaticKV
    in_use: bool = False
    runs: int = 0  # set-ups that took this entry
    allocations: int = 0  # times its buffers were (re)allocated
    kept: bool = field(default=True)

    def ensure(self, rows: int, capacity: int, make) -> bool:
        """Buffers of at least `rows` x `capacity`: kept when they fit, else `make(rows, capacity) -> kv` at the larger
        of old and new sizes, and the graphs over the old buffers are forgotten. Returns True when it (re)allocated."""
        kv = self.kv
        if kv is not None and kv.rows >= rows and kv.capacity >= capacity:
            return False
        if kv is not None:
            rows, capacity = max(rows, kv.rows), max(capacity, kv.capacity)
        self.kv = None  # the old buffers can go before the new ones are allocated
        self.graphs.reset()
        self.kv = make(rows, capacity)
        self.allocations += 1
        return True


_POOL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> [PoolEntry]
_LOCK = threading.Lock()


def _same(a, b) -> bool:
    """Whether two backends run the same passes (their notes aside)."""
    return (a.name, a.graph_mode, a.device) == (b.name, b.graph_mode, b.device)


def acquire(owner: torch.nn.Module, backend) -> PoolEntry:
    """A free entry of `owner` for `backend` (engine/model/backend.Backend; made when none is free), marked in use and
    ready for a run: its per-run counts zeroed and the buckets queued by earlier runs captured now (before the run's
    clock)."""
    with _LOCK:
        entries = _POOL.setdefault(owner, [])
        entry = next((e for e in entries if _same(e.backend, backend) and not e.in_use), None)
        if entry is None:
            kept = sum(_same(e.backend, backend) for e in entries) < MAX_ENTRIES
            entry = PoolEntry(backend, GraphRunner(backend, defer=True), kept=kept)
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
