"""Static (preallocated) KV buffers for the ragged cache, and the shape buckets that CUDA graphs replay.

`RaggedCache` (engine/model/kvcache.py) grows a transformers `DynamicCache` by concatenation: every pass makes
new tensors, so no pass can be captured as a CUDA graph (a graph replays fixed addresses). Here each
layer's keys and values live in one buffer (B_max, kv_heads, capacity, head_dim) allocated at prefill,
as gpt-fast's `KVCache` (model.py: `k_out[:, :, input_pos] = k_val` over `max_seq_length` columns) and
vLLM's preallocated blocks do. The ragged bookkeeping is RaggedCache's own and unchanged: `valid`
(B, W) marks real columns, rejected drafts become masked holes, all-hole columns are cropped, rows are
compacted past COMPACT_SLACK, finished rows leave the batch. Those moves copy inside the buffers (the
first W columns of the first B rows are the live cache), so the buffers never move.

The backends that run over the buffers (engine/model/backend.py), each a route chosen once per run (`route_for`,
held by the cache with the `Pass` built for it, engine/model/passes.py): "fused" and "native" (`FastRoute`,
engine/model/fastpass.py), and "cuda_graphs" in three modes (`DecodeConfig.cuda_graphs`):
- "static" (`ExactRoute`): eager, attending over exactly the W + n live columns: float32 output identical to the
  dynamic cache (tests check it);
- "padded" (`BucketedRoute`): eager, but padded to the pass's graph bucket: batch rounded up (`batch_bucket`) and
  the attention window rounded up to WINDOW_BUCKET columns (engine/model/graphs.py), extra rows and columns masked.
  This is exactly the computation a graph replays, runnable on a CPU;
- "auto" on CUDA (`BucketedRoute` too): the padded pass captured once per bucket (batch, tokens per row, window, outputs) with
  torch.cuda.CUDAGraph and replayed (engine/model/graphs.py), eager where capture fails.
The prefill (prompt lengths vary) always runs eagerly. The output head is applied outside the graph
(as vLLM computes logits outside its graphs), so a graph holds hidden states, not (B, n, vocab) logits.
"""

from __future__ import annotations

import weakref

import torch
import torch.nn.functional as F

from engine.hardware import configure_attention
from engine.model import graph_pool, kvcache, static_tree
from engine.model.backend import Backend, choose_backend
from engine.model.fastllama import LeanLlama, supports
from engine.model.fastpass import FastRoute, FastRunner
from engine.model.graphs import WINDOW_BUCKET, batch_bucket, window_bucket
from engine.model.kvcache import RaggedCache
from engine.model.layer import buffer_store
from engine.model.pass_masks import pass_mask
from engine.model.passes import Pass
from engine.model.prefix_cache import WarmPrefix, WarmPrompts
from engine.options import MAX_DEPTH, ConfigError, GraphMode

CAPACITY_MARGIN = 8  # spare columns beyond the longest the bookkeeping allows


def static_capacity(prompt_width: int, max_new_tokens: int) -> int:
    """Columns a run can need: the prompts, the new tokens and a draft beyond them, plus the holes
    RaggedCache tolerates before compacting (COMPACT_SLACK)."""
    return prompt_width + max_new_tokens + MAX_DEPTH + 1 + kvcache.COMPACT_SLACK + CAPACITY_MARGIN


class StaticKV:
    """One buffer of keys and one of values per layer: (rows, kv_heads, capacity, head_dim), views into one
    tensor of all layers' keys and one of their values (`all_keys`, `all_values`: (layers, rows, ...)), so a move
    of columns in every layer is one op (static_tree.keep_path)."""

    def __init__(self, n_layers: int, rows: int, kv_heads: int, capacity: int, head_dim: int, dtype, device):
        shape = (n_layers, rows, kv_heads, capacity, head_dim)
        self.all_keys = torch.zeros(shape, dtype=dtype, device=device)
        self.all_values = torch.zeros(shape, dtype=dtype, device=device)
        self.keys, self.values = list(self.all_keys.unbind(0)), list(self.all_values.unbind(0))  # contiguous views
        self.rows, self.capacity = rows, capacity

    def layers(self):
        return zip(self.keys, self.values)


class ExactRoute:
    """cuda_graphs="static": every pass eager over exactly the live columns, with the dynamic cache's choice of mask."""

    pooled, label = True, "eager (static KV buffers, exact windows)"
    skips_holes = False  # SDPA reads every column of its window, masked or not

    def __init__(self, backend: Backend):
        self.backend = backend

    def buffer_dtype(self, device, dtype: torch.dtype) -> torch.dtype:
        return dtype

    def run(self, cache, ids, positions, valid, past, keep, return_hidden, features, attend=None):
        n = ids.shape[1]
        window = past + n
        mask = None
        if not bool(valid.all()) or (n > 1 and past > 0):
            mask = pass_mask(valid, past, n, ids.shape[0], window)
        kv, cols = cache.kv, torch.arange(past, window, device=cache.device)  # (n,) buffer columns of the new tokens
        store = lambda i: buffer_store(kv.keys[i], kv.values[i], cols, window)  # noqa: E731
        return cache.passes(ids, positions, mask, store, features, keep=keep, return_hidden=return_hidden, is_causal=mask is None and n > 1)


class BucketedRoute(ExactRoute):
    """cuda_graphs="padded" and "auto" on CUDA: a decode pass padded to its graph bucket (batch, window), replayed as a
    CUDA graph or run eagerly (the cache's GraphRunner decides); the prefill (prompt lengths vary) exact and eager."""

    def __init__(self, backend: Backend):
        super().__init__(backend)
        graphs = backend.graph_mode == "graphs"
        self.label = "CUDA graphs (static KV buffers)" if graphs else "eager (static KV buffers, padded to graph buckets)"

    def run(self, cache, ids, positions, valid, past, keep, return_hidden, features, attend=None):
        if past == 0:
            return super().run(cache, ids, positions, valid, past, keep, return_hidden, features)
        batch, n = ids.shape
        kv, passes = cache.kv, cache.passes  # not the cache: a queued capture may outlive this run
        rows = batch_bucket(batch, kv.rows)
        window = window_bucket(past + n, kv.capacity)
        pad = rows - batch
        inputs = {
            "ids": F.pad(ids, (0, 0, 0, pad)),  # (rows, n): padding rows feed token 0
            "positions": torch.cat([positions, torch.arange(n, device=cache.device).expand(pad, n)]),  # (rows, n)
            "mask": pass_mask(valid, past, n, rows, window),  # (rows, 1, n, window)
            "cols": torch.arange(past, past + n, device=cache.device),  # (n,) buffer columns of the new tokens
        }
        if features is not None:
            inputs["features"] = F.pad(features, (0, 0, 0, 0, 0, pad))  # (rows, n, F)
        spec = return_hidden if isinstance(return_hidden, tuple) else bool(return_hidden)
        key = (rows, n, window, keep, spec, features is not None)

        def run(ids, positions, mask, cols, features=None):
            store = lambda i: buffer_store(kv.keys[i], kv.values[i], cols, window)  # noqa: E731
            return passes(ids, positions, mask, store, features, keep=keep, return_hidden=return_hidden)

        out, hidden = cache.graphs.run(key, run, inputs)
        return out[:batch], (hidden[:batch] if hidden is not None else None)


def route_for(backend: Backend):
    """The route of a static cache on `backend`, chosen once per run: "fused" and "native" the fast route, the
    "cuda_graphs" backend exact ("static") or bucketed ("padded", "graphs")."""
    if backend.name in ("fused", "native"):
        return FastRoute(backend)
    if backend.graph_mode == GraphMode.STATIC.value:
        return ExactRoute(backend)
    return BucketedRoute(backend)


class StaticRaggedCache(RaggedCache):
    """RaggedCache over static buffers (see the module docstring): the run's `backend` (engine/model/backend.Backend),
    the route chosen for it (`route`) and the `Pass` built for that route (`passes`), all fixed at construction."""

    def __init__(self, model, device, costs, backend: Backend, max_new_tokens: int, runner=None):
        self.start(model, device, costs, backend)  # no DynamicCache and no dynamic-cache forward: the buffers are the cache
        if runner is None and not supports(model):
            raise ConfigError("static KV buffers need the lean Llama forward (a plain Llama, a backend other than 'transformers')")
        configure_attention(device)
        self.lean = LeanLlama(model) if runner is None else None  # a model drafter restricts its head on it
        lean = runner.lean if runner is not None else self.lean
        self.runner_model = runner
        self.route = route_for(backend)
        self.passes = Pass(lean, backend, runner=runner)  # its weights made at the model's first run on its backend
        self.max_new_tokens = max_new_tokens
        self.kv: StaticKV | None = None
        self.dense = False  # the latest pass's: every column of every row real (`forward`)
        if not self.route.pooled:  # its own runner and buffers per run
            self.pooled, self.graphs = None, FastRunner(device)
        else:  # buffers and graphs kept per model across runs (engine/model/graph_pool.py); queued captures happen here
            self.pooled = graph_pool.acquire(runner if runner is not None else model, backend)
            self.graphs = self.pooled.graphs
            weakref.finalize(self, graph_pool.release, self.pooled)

    # --- allocation ---------------------------------------------------------------------------------
    def reserve(self, rows: int, width: int) -> None:
        """The buffers for `rows` rows of prompts up to `width` tokens (RaggedCache.prefill calls it first)."""
        lean = self.passes.lean
        dtype = self.route.buffer_dtype(self.device, lean.layers[0][2].dtype)  # a k_proj weight: the model's dtype

        def make(rows: int, capacity: int) -> StaticKV:
            return StaticKV(len(lean.layers), rows, lean.n_kv, capacity, lean.head_dim, dtype, self.device)

        capacity = -(-static_capacity(width, self.max_new_tokens) // WINDOW_BUCKET) * WINDOW_BUCKET  # reusable
        if self.pooled is None:
            self.kv = make(rows, capacity)
            self.graphs.reset()
        else:
            self.pooled.ensure(rows, capacity, make)
            self.kv = self.pooled.kv

    # --- a warm prefix (RaggedCache.prefix_pass) over the buffers --------------------------------------
    def warm_form(self) -> str:
        return f"{self.backend.name} {self.kv.keys[0].dtype}"

    def first_columns(self, n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(k[:1, :, :n], v[:1, :, :n]) for k, v in self.kv.layers()]

    def take_warm(self, entry: WarmPrefix | WarmPrompts) -> None:
        rows, n = entry.keys[0].shape[0], entry.keys[0].shape[2]
        for (k, v), keys, values in zip(self.kv.layers(), entry.keys, entry.values):
            k[:rows, :, :n], v[:rows, :, :n] = keys, values

    # --- the pass -------------------------------------------------------------------------------------
    def forward(self, input_ids, logits_to_keep=0, return_hidden=False, new_valid=None, features=None):
        """RaggedCache.forward's bookkeeping, then the route's pass over the buffers."""
        n_new = input_ids.shape[1]
        if self.width + n_new > self.kv.capacity:
            self._compact()
        if self.width + n_new > self.kv.capacity:
            raise RuntimeError(f"static KV buffers full: {self.width} + {n_new} columns > {self.kv.capacity}")
        past = self.width
        # every column of every row real (each row's length is the width), read off the lengths on the host: the mask is
        # all ones and the route need not check it (always so at batch 1, where holes are cropped)
        self.dense = new_valid is None and past > 0 and self.device.type == "cpu" and all(n == past for n in self.lengths.tolist())
        if self.dense:
            mask = torch.ones(self.batch, past + n_new, dtype=torch.bool)
        else:
            mask = self.attention_mask(n_new, new_valid)  # (B, past + n)
        positions = self.advance(n_new, mask, new_valid, logits_to_keep)  # RaggedCache's bookkeeping
        self.width = past + n_new
        self.valid = mask
        out, hidden = self.route.run(self, input_ids, positions, mask, past, logits_to_keep, return_hidden, features)
        return self.outputs(out, hidden, return_hidden)

    def outputs(self, out, hidden, return_hidden):
        """The pass's result as `forward` returns it: a runner's states, else logits (and hidden states)."""
        if self.runner_model is not None:
            return out
        logits = self.passes.logits(out)  # (B, keep or n, vocab)
        return (logits, hidden) if return_hidden else logits

    def forward_tree(self, input_ids, positions, attend, logits_to_keep=0, return_hidden=False, features=None):
        """RaggedCache.forward_tree on the fast route (engine/model/static_tree.py)."""
        return static_tree.forward_tree(self, input_ids, positions, attend, logits_to_keep, return_hidden, features)

    def keep_path(self, path: torch.Tensor, keep: torch.Tensor, n_new: int) -> None:
        static_tree.keep_path(self, path, keep, n_new)

    # --- roll-back moves, inside the buffers ---------------------------------------------------------------
    def live(self):
        """Per layer (keys, values) of the live cache: (B, kv_heads, W, head_dim) views of the buffers."""
        b, w = self.batch, self.width
        return [(k[:b, :, :w], v[:b, :, :w]) for k, v in self.kv.layers()]

    def select(self, rows: torch.Tensor) -> None:
        self.lengths = self.lengths[rows]
        self.valid = self.valid[rows]
        m, w, kept = int(rows.numel()), self.width, rows.tolist()
        if all(a < b for a, b in zip(kept, kept[1:])):  # finished rows dropped, the rest in order (kept[i] >= i)
            # only a row whose slot moves is copied, one row's slab at a time, each read before a later move writes
            # over it: a batch that drops its last rows moves nothing, where copying the kept rows through an index
            # moved every one twice, more than a decode step's time (docs/engine.md, "a finished row")
            moves = [(i, r) for i, r in enumerate(kept) if i != r]
            for k, v in self.kv.layers():
                for i, r in moves:
                    k[i, :, :w].copy_(k[r, :, :w])
                    v[i, :, :w].copy_(v[r, :, :w])
        elif len(set(kept)) == 1:  # one row into every row (a shared prefix): broadcast, no gathered copy of them all
            r = kept[0]
            for buf in (b for layer in self.kv.layers() for b in layer):
                for lo, hi in ((0, min(r, m)), (r + 1, m)):
                    if hi > lo:
                        buf[lo:hi, :, :w].copy_(buf[r : r + 1, :, :w].expand(hi - lo, -1, -1, -1))
        else:  # repeated or reordered rows
            for k, v in self.kv.layers():
                k[:m, :, :w] = k[rows, :, :w]  # advanced indexing copies first: safe in place
                v[:m, :, :w] = v[rows, :, :w]
        self._tidy()

    def _slice_columns(self, start: int, stop: int) -> int:
        """Crop the right end in place; a left margin of all-hole columns (the batch's longest prompt left with its
        row) is kept where the route skips masked columns (`route.skips_holes`) and more than one row is left, since
        cropping it moves every kept row (docs/engine.md, "a finished row"); returns the margin kept."""
        if start > 0 and self.batch > 1 and self.route.skips_holes:
            self.valid, self.width = self.valid[:, :stop], stop
            return start
        b = self.batch
        if start > 0:
            for k, v in self.kv.layers():
                k[:b, :, : stop - start] = k[:b, :, start:stop].clone()
                v[:b, :, : stop - start] = v[:b, :, start:stop].clone()
        self.valid = self.valid[:, start:stop]
        self.width = stop - start
        return 0

    def _compact(self) -> torch.Tensor:
        """RaggedCache._compact's gather, written back into the buffers' first columns; returns the gather
        index (B, W'): new column c holds old column index[b, c]."""
        new_width = int(self.lengths.max())
        b, w = self.batch, self.width
        cols = torch.arange(w, device=self.device)
        index = torch.where(self.valid, cols, -1).sort(dim=1, stable=True).values[:, w - new_width :].clamp_min(0)
        for k, v in self.kv.layers():
            gather = index[:, None, :, None].expand(b, k.shape[1], new_width, k.shape[3])
            k[:b, :, :new_width] = k[:b, :, :w].gather(2, gather)
            v[:b, :, :new_width] = v[:b, :, :w].gather(2, gather)
        self.valid = torch.arange(new_width, device=self.device)[None, :] >= (new_width - self.lengths)[:, None]
        self.width = new_width
        self.compactions += 1
        return index


def make_cache(model, device: torch.device, costs, cfg, runner=None, backend: Backend | None = None) -> RaggedCache:
    """The cache a decode run uses for one model: the dynamic cache or static buffers, as the run's backend says
    (`backend`; None: engine/model/backend.choose_backend from `cfg.backend` and `cfg.cuda_graphs`), narrowed to
    this model (`Backend.for_model`) and to draft trees (`Backend.for_tree`). `cfg` None: the dynamic cache."""
    if cfg is None:
        cache = RaggedCache(model, device, costs, runner=runner)
        name = "torch" if cache.lean is not None or runner is not None else "transformers"
        cache.backend, cache.graph_note = Backend(name, torch.device(device)), None
        return cache
    backend = (backend or choose_backend(device, cfg.backend, cfg.cuda_graphs)).for_model(model, runner)
    if cfg.tree:
        backend = backend.for_tree()
    if not backend.static:
        cache = RaggedCache(model, device, costs, backend=backend, runner=runner)
    else:
        tree_columns = cfg.tree_nodes + 1 + cfg.tree_topk * cfg.depth if cfg.tree else 0  # a verify tree, or a drafter's entries
        cache = StaticRaggedCache(model, device, costs, backend, cfg.max_new_tokens + tree_columns, runner=runner)
    cache.backend, cache.graph_note = backend, backend.note
    return cache
