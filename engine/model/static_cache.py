"""Static (preallocated) KV buffers for the ragged cache, and the shape buckets that CUDA graphs replay.

`RaggedCache` (engine/model/kvcache.py) grows a transformers `DynamicCache` by concatenation: every pass makes
new tensors, so no pass can be captured as a CUDA graph (a graph replays fixed addresses). Here each
layer's keys and values live in one buffer (B_max, kv_heads, capacity, head_dim) allocated at prefill,
as gpt-fast's `KVCache` (model.py: `k_out[:, :, input_pos] = k_val` over `max_seq_length` columns) and
vLLM's preallocated blocks do. The ragged bookkeeping is RaggedCache's own and unchanged: `valid`
(B, W) marks real columns, rejected drafts become masked holes, all-hole columns are cropped, rows are
compacted past COMPACT_SLACK, finished rows leave the batch. Those moves copy inside the buffers (the
first W columns of the first B rows are the live cache), so the buffers never move.

The backends that run over the buffers (engine/model/backend.py): "fused" and "native" (StaticRaggedCache._fast,
engine/model/fastpass.py), and "cuda_graphs" in three modes (`DecodeConfig.cuda_graphs`):
- "static": eager, attending over exactly the W + n live columns: float32 output identical to the
  dynamic cache (tests check it);
- "padded": eager, but padded to the pass's graph bucket: batch rounded up (`batch_bucket`) and the
  attention window rounded up to WINDOW_BUCKET columns, extra rows and columns masked. This is exactly
  the computation a graph replays, runnable on a CPU;
- "auto" on CUDA: the padded pass captured once per bucket (batch, tokens per row, window, outputs) with
  torch.cuda.CUDAGraph and replayed (engine/model/graphs.py), eager where capture fails.
The prefill (prompt lengths vary) always runs eagerly. The output head is applied outside the graph
(as vLLM computes logits outside its graphs), so a graph holds hidden states, not (B, n, vocab) logits.
"""

from __future__ import annotations

import weakref

import torch
import torch.nn.functional as F

from engine.config import MAX_DEPTH, ConfigError, GraphMode
from engine.model import graph_pool, kvcache, static_tree
from engine.model.backend import Backend, choose_backend
from engine.model.fastllama import rms_norm
from engine.model.fastpass import FastRunner, fast_hidden_pass, fast_llama_pass
from engine.model.kvcache import RaggedCache
from engine.model.layer import buffer_store, decoder_layer, linear
from engine.model.pass_masks import padded_mask, pass_bias, rope_tables
from engine.model.prepared import form_of

WINDOW_BUCKET = 128  # attention-window granularity of the graph buckets (columns)
CAPACITY_MARGIN = 8  # spare columns beyond the longest the bookkeeping allows


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


def static_capacity(prompt_width: int, max_new_tokens: int) -> int:
    """Columns a run can need: the prompts, the new tokens and a draft beyond them, plus the holes
    RaggedCache tolerates before compacting (COMPACT_SLACK)."""
    return prompt_width + max_new_tokens + MAX_DEPTH + 1 + kvcache.COMPACT_SLACK + CAPACITY_MARGIN


def buffer_dtype(mode: str, device, dtype: torch.dtype) -> torch.dtype:
    """The KV buffers' dtype: the model's, but float32 for the fast pass on the CPU (fused or native), whose
    small_attend and native attention read float32 keys and values (no conversion per layer)."""
    if mode in FAST_PATHS and torch.device(device).type == "cpu":
        return torch.promote_types(dtype, torch.float32)
    return dtype


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


class StaticPass:
    """The forward of a LeanLlama (target, model drafter) or of the EAGLE runner over static buffers.

    `__call__(ids, positions, mask, cols, features)` runs the decoder layers over a `window` fixed per
    call and returns (out, hidden): for a Llama the final-normed states of the kept positions (the head
    is applied by the caller) and the fused features when asked; for the runner its normed output g."""

    def __init__(self, lean, kv: StaticKV, runner=None):
        self.lean, self.kv, self.runner = lean, kv, runner
        self.inv_freq = lean.inv_freq.to(kv.keys[0].device)  # on the device: no host copy inside a capture

    def body(self, x, positions, mask, is_causal, cols, window, collect=(), into=None):
        """LeanLlama.body over the buffers (engine/model/layer.py's `decoder_layer`, `buffer_store`). mask: (B, 1, n,
        window) bool or None."""
        lean = self.lean
        cos, sin = rope_tables(positions, self.inv_freq, x.dtype)  # (B, n, 1, dim)
        dims = (lean.n_heads, lean.n_kv, lean.head_dim, lean.eps, lean.scale)
        for i, (weights, (k_buf, v_buf)) in enumerate(zip(lean.prepared().layers("concat"), self.kv.layers())):
            x = decoder_layer(x, cos, sin, buffer_store(k_buf, v_buf, cols, window), mask, weights, *dims, is_causal=is_causal)
            if i in collect:
                into[i] = x
        return x

    def __call__(
        self,
        ids,
        positions,
        mask,
        cols,
        features=None,
        *,
        window: int,
        is_causal: bool = False,
        keep: int = 0,
        return_hidden: bool | tuple[int, ...] = False,
    ):
        lean = self.lean
        if self.runner is not None:  # EAGLE: fc([embed(t); f]) -> one layer -> norm
            x = self.body(self.runner.inputs(ids, features), positions, mask, is_causal, cols, window)
            return rms_norm(x, self.runner.norm, lean.eps), None
        layers = return_hidden if isinstance(return_hidden, tuple) else ()
        collected: dict[int, torch.Tensor] = {}
        x = self.body(F.embedding(ids, lean.embed), positions, mask, is_causal, cols, window, layers, collected)
        if return_hidden:  # as LeanLlama.forward: the norm over all positions, then the kept ones
            final = rms_norm(x, lean.final_norm, lean.eps)  # (B, n, H)
            kept = final[:, -keep:] if keep else final
            hidden = torch.cat([collected[i] for i in layers] + [final], dim=-1) if layers else final
            return kept, hidden
        if keep:
            x = x[:, -keep:]
        return rms_norm(x, lean.final_norm, lean.eps), None


class StaticRaggedCache(RaggedCache):
    """RaggedCache over static buffers (see the module docstring); `mode` is a GraphMode value:
    "static" (exact eager), "padded" (graph buckets, eager) or "graphs" (graph buckets, captured)."""

    def __init__(self, model, device, costs, mode: str, max_new_tokens: int, runner=None, lean=None):
        super().__init__(model, device, costs, lean=lean, runner=runner)
        self.body_lean = runner.lean if runner is not None else self.lean
        if self.body_lean is None:
            raise ConfigError("static KV buffers need the lean Llama forward (a plain Llama, a backend other than 'transformers')")
        self.runner_model = runner
        self.mode = mode
        self.max_new_tokens = max_new_tokens
        self.kv: StaticKV | None = None
        self.passes: StaticPass | None = None
        if mode in FAST_PATHS:  # fused projections, eager ("fused") or native kernels: engine/model/fastpass.py
            self.body_lean.prepared().layers(form_of(mode))  # made at the model's first run on this backend, then kept
            self.pooled = None  # its own runner and buffers per run
            self.graphs = FastRunner(device)
        else:  # buffers and graphs kept per model across runs (engine/model/graph_pool.py); queued captures happen here
            self.pooled = graph_pool.acquire(runner if runner is not None else model, mode, torch.device(device))
            self.graphs = self.pooled.graphs
            weakref.finalize(self, graph_pool.release, self.pooled)

    # --- allocation ---------------------------------------------------------------------------------
    def prefill(self, token_lists, pad_id, logits_to_keep=1, return_hidden=False, features=None):
        width = max(len(t) for t in token_lists)
        lean = self.body_lean
        ref = lean.layers[0][2]  # a k_proj weight: the model's dtype and device

        dtype = buffer_dtype(self.mode, self.device, ref.dtype)

        def make(rows: int, capacity: int):
            kv = StaticKV(len(lean.layers), rows, lean.n_kv, capacity, lean.head_dim, dtype, self.device)
            return kv, StaticPass(lean, kv, runner=self.runner_model)

        capacity = -(-static_capacity(width, self.max_new_tokens) // WINDOW_BUCKET) * WINDOW_BUCKET  # reusable
        if self.pooled is None:  # the fast path
            self.kv, self.passes = make(len(token_lists), capacity)
            self.graphs.reset()
        else:
            self.pooled.ensure(len(token_lists), capacity, make)
            self.kv, self.passes = self.pooled.kv, self.pooled.passes
        return super().prefill(token_lists, pad_id, logits_to_keep, return_hidden, features)

    # --- the pass -------------------------------------------------------------------------------------
    def forward(self, input_ids, logits_to_keep=0, return_hidden=False, new_valid=None, features=None):
        """RaggedCache.forward's bookkeeping, then the pass over the buffers (exact, padded or a graph)."""
        n_new = input_ids.shape[1]
        if self.width + n_new > self.kv.capacity:
            self._compact()
        if self.width + n_new > self.kv.capacity:
            raise RuntimeError(f"static KV buffers full: {self.width} + {n_new} columns > {self.kv.capacity}")
        past = self.width
        mask = self.attention_mask(n_new, new_valid)  # (B, past + n)
        positions = self.advance(n_new, mask, new_valid, logits_to_keep)  # RaggedCache's bookkeeping
        self.width = past + n_new
        self.valid = mask
        cols = torch.arange(past, past + n_new, device=self.device)  # (n,) buffer columns of the new tokens
        if self.mode == GraphMode.STATIC.value or (past == 0 and self.mode not in FAST_PATHS):  # the fast pass prefills too
            out, hidden = self._exact(input_ids, positions, mask, cols, past, logits_to_keep, return_hidden, features)
        elif self.mode in FAST_PATHS:
            out, hidden = self._fast(input_ids, positions, mask, cols, past, logits_to_keep, return_hidden, features)
        else:
            out, hidden = self._bucketed(input_ids, positions, mask, cols, past, logits_to_keep, return_hidden, features)
        return self._outputs(out, hidden, return_hidden)

    def _outputs(self, out, hidden, return_hidden):
        """The pass's result as `forward` returns it: a runner's states, else logits (and hidden states)."""
        if self.runner_model is not None:
            return out
        if self.mode in FAST_PATHS:
            head = self.body_lean.prepared().head(self.body_lean.head, form_of(self.mode))
            logits = linear(out, head)  # (B, keep or n, vocab)
        else:
            logits = F.linear(out, self.body_lean.head)  # (B, keep or n, vocab)
        return (logits, hidden) if return_hidden else logits

    def forward_tree(self, input_ids, positions, attend, logits_to_keep=0, return_hidden=False, features=None):
        """RaggedCache.forward_tree on the fast pass (engine/model/static_tree.py)."""
        return static_tree.forward_tree(self, input_ids, positions, attend, logits_to_keep, return_hidden, features)

    def keep_path(self, path: torch.Tensor, keep: torch.Tensor, n_new: int) -> None:
        static_tree.keep_path(self, path, keep, n_new)

    def _exact(self, ids, positions, valid, cols, past, keep, return_hidden, features):
        """Eager over exactly the live columns, with LeanLlama.body's choice of mask."""
        n = ids.shape[1]
        window = past + n
        mask = None
        if not bool(valid.all()) or (n > 1 and past > 0):
            c = torch.arange(window, device=self.device)
            causal = c[None, :] <= (past + torch.arange(n, device=self.device))[:, None]  # (n, window)
            mask = causal[None, None] if bool(valid.all()) else (causal[None] & valid[:, None, :])[:, None]
        return self.passes(
            ids, positions, mask, cols, features, window=window, is_causal=mask is None and n > 1, keep=keep, return_hidden=return_hidden
        )

    def _bucketed(self, ids, positions, valid, cols, past, keep, return_hidden, features):
        """Padded to the graph bucket (batch, window); replayed as a CUDA graph or run eagerly."""
        batch, n = ids.shape
        rows = batch_bucket(batch, self.kv.rows)
        window = window_bucket(past + n, self.kv.capacity)
        pad = rows - batch
        inputs = {
            "ids": F.pad(ids, (0, 0, 0, pad)),  # (rows, n): padding rows feed token 0
            "positions": torch.cat([positions, torch.arange(n, device=self.device).expand(pad, n)]),  # (rows, n)
            "mask": padded_mask(valid, past, n, rows, window),  # (rows, 1, n, window)
            "cols": cols,
        }
        if features is not None:
            inputs["features"] = F.pad(features, (0, 0, 0, 0, 0, pad))  # (rows, n, F)
        spec = return_hidden if isinstance(return_hidden, tuple) else bool(return_hidden)
        key = (rows, n, window, keep, spec, features is not None)

        passes = self.passes  # not the cache: a queued capture may outlive this run

        def run(ids, positions, mask, cols, features=None):
            return passes(ids, positions, mask, cols, features, window=window, keep=keep, return_hidden=return_hidden)

        out, hidden = self.graphs.run(key, run, inputs)
        return out[:batch], (hidden[:batch] if hidden is not None else None)

    def _fast(self, ids, positions, valid, cols, past, keep, return_hidden, features, attend=None):
        """The fused pass (engine/model/fastpass.py) over exactly the live columns; at a batch that is not a batch
        bucket, padding rows feed token 0 (discarded)."""
        batch, n = ids.shape
        rows = batch_bucket(batch, self.kv.rows)
        window = past + n
        pad = rows - batch
        if pad:
            ids = F.pad(ids, (0, 0, 0, pad))  # (rows, n): padding rows feed token 0
            positions = torch.cat([positions, torch.arange(n, device=self.device).expand(pad, n)])
        lean, runner = self.body_lean, self.runner_model
        mask = None
        if self.mode == "native" and attend is None:  # the native pass's float bias, made directly
            mask = pass_bias(valid, past, n, rows, window, lean.n_kv, lean.n_heads // lean.n_kv)
        elif attend is not None and not pad and attend.shape[2] == window:  # a draft tree's rows are the whole mask
            mask = attend[:, None]  # (B, 1, n, window)
        if mask is None:
            mask = padded_mask(valid, past, n, rows, window)  # (rows, 1, n, window)
            if attend is not None:  # a draft tree (forward_tree): each node sees its context and its ancestors
                mask[:batch, 0, :, : attend.shape[2]] = attend
        if runner is not None:  # EAGLE: fc([embed(t); f]) outside, then one layer and the runner's norm
            features = F.pad(features, (0, 0, 0, 0, 0, pad)) if pad else features
            x, final_norm, keep, return_hidden = runner.inputs(ids, features), runner.norm, 0, False
        else:
            x, final_norm = F.embedding(ids, lean.embed), lean.final_norm
        fn = fast_hidden_pass if return_hidden else fast_llama_pass
        dims = (lean.n_heads, lean.n_kv, lean.head_dim, lean.eps, lean.scale)
        collect = return_hidden if isinstance(return_hidden, tuple) else ()  # EAGLE-3: these layers' outputs too
        layers = lean.prepared().layers(form_of(self.mode))
        args = (x, positions, mask, cols, self.passes.inv_freq, self.kv.keys, self.kv.values, layers, final_norm, window, keep, dims)
        key = (fn.__name__, rows, n, window, keep, collect)
        out = self.graphs.run(key, fn, args, {"collect": collect} if collect else {})
        out, hidden = out if return_hidden else (out, None)
        if not pad:
            return out, hidden
        return out[:batch], (hidden[:batch] if hidden is not None else None)

    # --- roll-back moves, inside the buffers ---------------------------------------------------------------
    def live(self):
        """Per layer (keys, values) of the live cache: (B, kv_heads, W, head_dim) views of the buffers."""
        b, w = self.batch, self.width
        return [(k[:b, :, :w], v[:b, :, :w]) for k, v in self.kv.layers()]

    def select(self, rows: torch.Tensor) -> None:
        self.lengths = self.lengths[rows]
        self.valid = self.valid[rows]
        m, w = int(rows.numel()), self.width
        for k, v in self.kv.layers():
            k[:m, :, :w] = k[rows, :, :w]  # advanced indexing copies first: safe in place
            v[:m, :, :w] = v[rows, :, :w]
        self._tidy()

    def _slice_columns(self, start: int, stop: int) -> None:
        b = self.batch
        if start > 0:
            for k, v in self.kv.layers():
                k[:b, :, : stop - start] = k[:b, :, start:stop].clone()
                v[:b, :, : stop - start] = v[:b, :, start:stop].clone()
        self.valid = self.valid[:, start:stop]
        self.width = stop - start

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


FAST_PATHS = ("fused", "native")  # StaticRaggedCache modes of the fast pass: the "fused" and "native" backends


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
        cache = RaggedCache(model, device, costs, lean=backend.lean, runner=runner)
    else:
        tree_columns = cfg.tree_nodes + 1 + cfg.tree_topk * cfg.depth if cfg.tree else 0  # a verify tree, or a drafter's entries
        cache = StaticRaggedCache(model, device, costs, backend.cache_mode, cfg.max_new_tokens + tree_columns, runner=runner)
    cache.backend, cache.graph_note = backend, backend.note
    return cache
