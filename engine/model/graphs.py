"""CUDA-graph capture and replay of decode passes, one graph per shape bucket.

An eager decode pass of a small model issues hundreds of kernel launches from Python (808 per batch-1
pass of a 1.7B Llama shape, measured on an H200: scripts/investigate/gpu_graphs.py), and at small batch the GPU
waits for them. Captured once as a CUDA graph, the whole pass is one launch (PyTorch's
torch.cuda.CUDAGraph; gpt-fast's `torch.compile(mode="reduce-overhead")` and vLLM's CUDA graph runner
do the same for decode). A graph replays fixed addresses, so every input is copied into the graph's
own static tensors before a replay, and the KV cache must be static buffers (engine/model/static_cache.py).

`GraphRunner.run(key, fn, inputs)`: with capture on (CUDA), a key with a graph copies the inputs in and
replays it. A key met for the first time inside a decode run (`defer`) runs eagerly and is queued:
`capture_pending()` captures the queue later, outside any run's clock (engine/model/graph_pool.py keeps
the runner, its buffers and its graphs across runs and captures at a run's set-up; largest bucket first
so smaller graphs reuse the memory pool, as vLLM captures; two warm-ups each on a side stream, then the
capture: PyTorch's documented recipe). Without `defer` (the pass-cost curve's warm-up pass) a miss is
captured at once. With capture off (a CPU, or the "padded" mode) it runs fn eagerly on the same padded
inputs: the computation a graph would replay, so its logic is tested on a CPU. A capture that fails leaves
that key eager and says why (`fallback`). Capture time is timed on the host clock only and reported as
warm-up (`capture_ms_total`), never subtracted from a pass timed by CUDA events.
"""

from __future__ import annotations

import time

import torch

MAX_GRAPHS = 128  # per runner (kept across runs); shapes beyond this run eagerly (a run that keeps meeting new buckets)
WARM_UPS = 2  # eager runs of a bucket on the side stream before its capture
WINDOW_BUCKET = 128  # attention-window granularity of the graph buckets (columns)


def batch_bucket(batch: int, limit: int) -> int:
    """The captured batch size a batch of `batch` rows runs at: powers of two up to 16, then multiples of
    16 up to 128, then of 64; never above `limit` (the buffers' rows). vLLM captures multiples of 8 once
    at start-up; SpecLab captures within each run (the model pair stays stateless), so it keeps fewer
    buckets (fewer captures as rows finish) at the price of padding rows (< 2x at small batch)."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1; got {batch}")
    if batch <= 16:
        bucket = 1 << (batch - 1).bit_length()
    else:
        step = 16 if batch <= 128 else 64
        bucket = -(-batch // step) * step
    return min(bucket, limit)


def window_bucket(window: int, capacity: int) -> int:
    """The attention window (columns) a pass over `window` live columns runs at: rounded up to
    WINDOW_BUCKET, never above the buffers' capacity."""
    if not 1 <= window <= capacity:
        raise ValueError(f"window {window} outside 1..{capacity}")
    return min(-(-window // WINDOW_BUCKET) * WINDOW_BUCKET, capacity)


class GraphRunner:
    """The passes of one backend's static caches: captured and replayed where `backend` (engine/model/backend.Backend)
    captures CUDA graphs (the "cuda_graphs" backend with graph mode "graphs", on CUDA), else run eagerly."""

    def __init__(self, backend, defer: bool = False):
        self.device = torch.device(backend.device)
        self.capture = backend.graph_mode == "graphs" and self.device.type == "cuda"
        self.defer = defer
        self.reset()

    def reset(self) -> None:
        """Forget every graph (the buffers they replay were reallocated)."""
        self.graphs: dict = {}  # key -> (graph, static inputs, static outputs) or None (capture failed)
        self.pending: dict = {}  # key -> (fn, inputs' (shape, dtype)): met in a run, captured by capture_pending
        self.pool = None
        self.fallback: str | None = None
        self.start_run()

    def start_run(self) -> None:
        """Zero the per-run counts (the graphs stay)."""
        self.captured = self.replays = self.eager_passes = 0
        self.capture_ms_total = 0.0

    def capture_pending(self) -> int:
        """Capture the queued buckets, largest first (smaller graphs then fit in the pool the largest made)."""
        if not self.capture:
            self.pending.clear()
            return 0
        before = self.captured
        for key in sorted(self.pending, key=bucket_size, reverse=True):
            fn, specs = self.pending.pop(key)
            inputs = {name: torch.zeros(shape, dtype=dtype, device=self.device) for name, (shape, dtype) in specs.items()}
            self.graphs[key] = self._capture(key, fn, inputs)
        return self.captured - before

    def run(self, key, fn, inputs: dict):
        """fn(**inputs) -> (tensor, tensor or None); replayed from a graph where one is (or can be) captured."""
        if not self.capture:
            self.eager_passes += 1
            return fn(**inputs)
        if key not in self.graphs:
            if self.defer and len(self.graphs) + len(self.pending) < MAX_GRAPHS:
                self.pending.setdefault(key, (fn, {name: (tuple(t.shape), t.dtype) for name, t in inputs.items()}))
                self.eager_passes += 1  # this run: eager; captured outside any run's clock (capture_pending)
                return fn(**inputs)
            if len(self.graphs) + len(self.pending) >= MAX_GRAPHS:
                self.eager_passes += 1
                self.fallback = self.fallback or f"more than {MAX_GRAPHS} shape buckets: later ones eager"
                return fn(**inputs)
            self.graphs[key] = self._capture(key, fn, inputs)
        entry = self.graphs[key]
        if entry is None:
            self.eager_passes += 1
            return fn(**inputs)
        graph, static_in, static_out = entry
        for name, tensor in inputs.items():
            static_in[name].copy_(tensor)
        graph.replay()
        self.replays += 1
        out, hidden = static_out
        # the next replay overwrites the outputs; callers may hold them (EAGLE keeps the features)
        return out.clone(), (hidden.clone() if hidden is not None else None)

    def _capture(self, key, fn, inputs: dict):
        torch.cuda.synchronize(self.device)
        t = time.perf_counter()
        static_in = {name: tensor.clone() for name, tensor in inputs.items()}
        try:
            if self.pool is None:
                self.pool = torch.cuda.graph_pool_handle()  # one memory pool for all of this cache's graphs
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):  # warm-ups outside the capture (allocator, library handles)
                for _ in range(WARM_UPS):
                    fn(**static_in)
            torch.cuda.current_stream(self.device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            # thread_local: CUDA calls from other threads (another app session's page) do not break this capture
            with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
                static_out = fn(**static_in)
            entry = (graph, static_in, static_out)
            self.captured += 1
        except Exception as exc:  # e.g. an op that synchronises: run this bucket eagerly
            self.fallback = self.fallback or f"capture of bucket {key} failed ({type(exc).__name__}: {exc}); eager"
            entry = None
        torch.cuda.synchronize(self.device)
        ms = (time.perf_counter() - t) * 1000
        self.capture_ms_total += ms
        return entry


def bucket_size(key) -> int:
    """A bucket key's size for ordering captures: the product of its leading integers (rows, tokens, window)."""
    size = 1
    for part in key:
        if isinstance(part, bool) or not isinstance(part, int):
            break
        size *= max(part, 1)
    return size
