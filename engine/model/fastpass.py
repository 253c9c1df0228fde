"""The fast decode route: fused projections over the static KV buffers, eager; on the CPU (the default there) each
decoder layer of a small pass is one call into SpecLab's native kernels (engine/model/cpukernels.py).

Why: at batch 1 a decode pass of SmolLM2-135M is ~1,200 small operations (30 layers x about 40), each dispatched
from Python, and the eager lean pass reaches a small share of the probed copy bandwidth (docs/journal.md,
"the fused fast pass"). What removes most of that:
- one QKV projection and one gate-up projection per layer, over the model's prepared weights
  (engine/model/prepared.py: made once per model at its first run on a backend and kept beside it, never in
  place of transformers' own parameters, which its forward, the exactness oracle, keeps reading): on "native"
  all four matrices in the kernels' layout, for passes of every size; on "fused" in bfloat16 on the CPU all four
  prepacked for oneDNN; at most one extra copy of a matrix per backend;
- per layer only what differs per layer: the RoPE tables and the attention bias (engine/model/pass_masks.py) are
  made once per pass, RoPE runs over the q and k heads together;
- the buffers are in the model's dtype on "native" (its attention reads bfloat16 keys and values as they are) and
  float32 on the CPU's "fused" route even for a bfloat16 model (StaticRaggedCache.reserve), so `small_attend`'s torch
  arithmetic reads them in float32 without converting the window in every layer; both attend over exactly the live
  columns;
- the native kernels: one call per layer for passes of up to cpukernels.LAYER_TOKENS tokens (a one-token pass reads
  the weights at about the probed bandwidth: docs/measurements.md, "Passes on the CPU").

No `torch.compile` of this pass: on the CPU it ran well below the native pass (docs/measurements.md, "Passes on the
CPU"); on a GPU CUDA graphs (engine/model/graphs.py) remove the per-op overhead.

The pass is engine/model/passes.py's `Pass` (the one layer loop and tail), here over the static buffers
(`buffer_store`, or the native layer over them); engine/model/prepared.py prepares the weights every pass reads.

Numerics: the same ops in the same order and dtype as the dynamic cache's pass, except attention's float32
score arithmetic in a small CPU pass (`small_attend`) (a bias added instead of a masked fill, the scale applied inside the product): a fused
projection computes the same dot products as the three separate ones, keys and values are rounded to the
model's dtype before they are stored. Float32 greedy decoding gives the same tokens as plain decoding and
transformers' generate() (tests/engine/test_fastpass.py on a tiny Llama); in bfloat16 the last bits of
the scores may round differently, so greedy tokens can differ from the eager path's.

Which route runs is the backend's choice, made once per run (engine/model/static_cache.py, `route_for`): "fused"
runs this route in torch ops, "native" (the CPU's default) with the native kernels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.model import cpukernels
from engine.model.graphs import batch_bucket
from engine.model.layer import buffer_store, small_pass
from engine.model.pass_masks import pass_mask


class FastRoute:
    """The "fused" and "native" backends' route: every pass (the prefill too) eager over exactly the live columns;
    at a batch that is not a batch bucket, padding rows feed token 0 (discarded). Buffers of its own per run."""

    pooled = False

    def __init__(self, backend):
        self.backend = backend
        self.label = "fused projections, " + ("native CPU kernels" if backend.native else "eager") + " (static KV buffers)"
        self.skips_holes = backend.native  # the native attention skips column blocks masked for every query

    def buffer_dtype(self, device, dtype: torch.dtype) -> torch.dtype:
        """The model's dtype on the native route and off the CPU: the native attention reads bfloat16 keys and values
        as they are (half the bytes of float32, the same values: keys and values are rounded to the model's dtype
        before they are stored). float32 on the CPU's "fused" route even for a bfloat16 model: small_attend's torch
        arithmetic reads float32 keys and values without converting the window in every layer."""
        if torch.device(device).type != "cpu" or self.backend.native:
            return dtype
        return torch.promote_types(dtype, torch.float32)

    def run(self, cache, ids, positions, valid, past, keep, return_hidden, features, attend=None):
        """(out, hidden) of one pass over `cache`'s buffers; `attend` (B, n, past + n): a draft tree's rows. Where the
        cache says every column of every row is real (`cache.dense`) and no row pads the batch, the mask is built as
        pass_mask builds it for valid=None, without reading `valid`."""
        passes, kv = cache.passes, cache.kv
        batch, n = ids.shape
        rows = batch_bucket(batch, kv.rows)
        window = past + n
        pad = rows - batch
        if pad:
            ids = F.pad(ids, (0, 0, 0, pad))  # (rows, n): padding rows feed token 0
            positions = torch.cat([positions, torch.arange(n, device=cache.device).expand(pad, n)])
            features = F.pad(features, (0, 0, 0, 0, 0, pad)) if features is not None else None
        x = passes.embed(ids, features)
        n_heads, n_kv, head_dim = passes.dims[:3]
        kernel = (kv.keys, kv.values, window) if cpukernels.layer_ready(x, passes.layers[0], kv.keys[0], head_dim) else None
        heads = (n_kv, n_heads // n_kv) if kernel is not None or small_pass(x) else None  # small_attend's float bias
        # a long pass over no cache and no padding (a prompt's, a shared prefix's): SDPA's causal path, no mask to build
        causal = heads is None and past == 0 and attend is None and not pad and bool(valid.all())
        dense = cache.dense and attend is None and not pad  # every column real: pass_mask's valid=None
        mask = (
            None if causal else pass_mask(None if dense else valid, past, n, rows, window, attend=attend, heads=heads, device=cache.device)
        )

        def fn(x, positions, mask):
            if kernel is not None:  # the native layers write the buffers themselves
                return passes.run(x, positions, mask, None, keep=keep, return_hidden=return_hidden, kernel=kernel)
            cols = torch.arange(past, window, device=cache.device)  # (n,) buffer columns of the new tokens
            store = lambda i: buffer_store(kv.keys[i], kv.values[i], cols, window)  # noqa: E731
            return passes.run(x, positions, mask, store, keep=keep, return_hidden=return_hidden, is_causal=causal)

        out, hidden = cache.graphs.run(None, fn, {"x": x, "positions": positions, "mask": mask})
        if not pad:
            return out, hidden
        return out[:batch], (hidden[:batch] if hidden is not None else None)


class FastRunner:
    """Runs the fast route's passes eagerly, in the interface of engine/model/graphs.py's GraphRunner (which the static
    caches of the other routes use), so the decode loop and the trace treat every cache alike: no graphs, no capture
    time, every pass counted as an eager one."""

    def __init__(self, device: torch.device):
        self.device = torch.device(device)
        self.fallback: str | None = None
        self.reset()

    def reset(self) -> None:
        self.captured = self.replays = self.eager_passes = 0
        self.capture_ms_total = 0.0
        self.graphs: dict = {}  # no CUDA graphs of its own (graph_meta counts GraphRunner's)
        self.pending: dict = {}  # nor buckets queued for capture

    def capture_pending(self) -> int:
        """GraphRunner's hook after a warm-up pass: nothing is ever queued here."""
        return 0

    def run(self, key, fn, inputs: dict):
        """fn(**inputs); `key` (the pass's shape) is GraphRunner's and unused here."""
        self.eager_passes += 1
        return fn(**inputs)
