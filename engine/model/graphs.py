"""CUDA-graph capture and replay of decode passes, one graph per shape bucket.

An eager decode pass of a small model issues hundreds of kernel launches from Python (808 per batch-1
pass of a 1.7B Llama shape, measured on an H200: scripts/investigate/gpu_graphs.py), and at small batch the GPU
waits for them. Captured once as a CUDA graph, the whole pass is one launch (PyTorch's
torch.cuda.CUDAGraph; gpt-fast's `torch.compile(mode="reduce-overhead")` and vLLM's CUDA graph runner
do the same for decode). A graph replays fixed addresses, so every input is copied into the graph's
own static tensors before a replay, and the KV cache must be static buffers (engine/model/static_cache.py).

`GraphRunner.run(key, fn, inputs)`: with capture on (CUDA), the first call of a key warms fn up on a
side stream and captures it (PyTorch's documented recipe), later calls copy the inputs in and replay.
With capture off (a CPU, or the "padded" mode) it runs fn eagerly on the same padded inputs: the
computation a graph would replay, so its logic is tested on a CPU. A capture that fails leaves that key
eager for the rest of the run and says why (`fallback`). Capture time is kept apart (`take_capture_ms`)
so the decode loop can keep it off the run's clock: it is a one-off cost, not the pass's.
"""

from __future__ import annotations

import time

import torch

MAX_GRAPHS = 128  # per cache and run; shapes beyond this run eagerly (a run that keeps meeting new buckets)


class GraphRunner:
    def __init__(self, device: torch.device, capture: bool):
        self.device = torch.device(device)
        self.capture = capture and self.device.type == "cuda"
        self.reset()

    def reset(self) -> None:
        """Forget every graph (the buffers they replay were reallocated)."""
        self.graphs: dict = {}  # key -> (graph, static inputs, static outputs) or None (capture failed)
        self.pool = None
        self.captured = self.replays = self.eager_passes = 0
        self.capture_ms_total = 0.0
        self._capture_ms = 0.0  # since the last take_capture_ms
        self.fallback: str | None = None

    def take_capture_ms(self) -> float:
        ms, self._capture_ms = self._capture_ms, 0.0
        return ms

    def run(self, key, fn, inputs: dict):
        """fn(**inputs) -> (tensor, tensor or None); replayed from a graph where one is (or can be) captured."""
        if not self.capture:
            self.eager_passes += 1
            return fn(**inputs)
        if key not in self.graphs:
            if len(self.graphs) >= MAX_GRAPHS:
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
            with torch.cuda.stream(side):  # one warm-up outside the capture (allocator, library handles)
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
        self._capture_ms += ms
        return entry
