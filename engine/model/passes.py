"""The pass: one model's forward on one backend, built once per run by the cache that runs it.

Every SpecLab pass (the lean Llama over the dynamic cache, the static buffers exact or padded to a graph bucket,
a captured CUDA graph, the fused and native fast passes, the EAGLE head's one layer) is the same three steps,
written once here:

    x = embed(ids, features)           the token embedding, or the EAGLE head's fc([embed(t); f])
    x, collected = body(x, ...)        the one layer loop: engine/model/layer.py's `decoder_layer` per layer, or
                                       per layer one native call (cpukernels.layer) where the kernels take the pass
    out, hidden = tail(x, ...)         the one tail: the final norm, the kept positions, the hidden features

and `logits(out)` applies the output head outside (outside a CUDA graph too, as vLLM computes logits). What
differs between the routes is data fixed when the pass is built (the run's `Backend`, which the prepared weights
are asked with, engine/model/prepared.py; whether the native kernels may run) or an argument of a call (the layers'
store, the mask): engine/model/static_cache.py says which route a static cache takes, once per run, from its
`Backend`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.model import cpukernels
from engine.model.layer import cache_store, decoder_layer, linear, norm
from engine.model.pass_masks import pass_mask, rope_lookup, rope_tables


class Pass:
    """A LeanLlama's pass (target, model drafter) or the EAGLE runner's on the run's `backend` (engine/model/backend.py's
    `Backend`, carried as it is: the prepared weights give its form, engine/model/prepared.py). `native`: whether its
    layers hold natively packed matrices (the "native" backend where the kernels take the model), so a small pass runs
    each layer as one native call."""

    def __init__(self, lean, backend, runner=None):
        self.lean, self.runner, self.backend = lean, runner, backend
        self.weights = lean.prepared()
        self.layers = self.weights.layers(backend)
        self.native = isinstance(self.layers[0][1], cpukernels.Packed)
        self.dims = (lean.n_heads, lean.n_kv, lean.head_dim, lean.eps, lean.scale)
        self.inv_freq = lean.inv_freq.to(backend.device)  # on the device: no host copy inside a capture
        self.final_norm = runner.norm if runner is not None else lean.final_norm
        self.runner_matrices = runner.matrices(self.weights, backend) if runner is not None else None  # fixed for the run

    def embed(self, ids: torch.Tensor, features: torch.Tensor | None = None) -> torch.Tensor:
        """The first layer's input (B, n, H): the tokens' embeddings, or the EAGLE head's fc([embed(t); f])."""
        if self.runner is not None:
            return self.runner.inputs(ids, features, self.backend, self.runner_matrices)
        return F.embedding(ids, self.lean.embed)

    def body(self, x, positions, mask, store, *, is_causal=False, collect=(), kernel=None):
        """The one layer loop over input embeddings x (B, n, H): the last layer's output (pre-norm) and the outputs of
        the layers in `collect` (EAGLE-3 fusion). store(i): layer i's `cache_store` or `buffer_store`; mask: None, a
        boolean (B, 1, n, T) mask or small_attend's float bias (engine/model/layer.py); kernel (k_bufs, v_bufs,
        window): each layer is one native call over the buffers (cpukernels.layer; the bias must be the pass's float
        bias), which updates x in place: the caller hands over an x of its own (the embedding `embed` made)."""
        if kernel is not None:
            k_bufs, v_bufs, window = kernel
            cos, sin = rope_lookup(positions, self.inv_freq, x.dtype, top=window)  # (B, n, 1, d): positions < the window
            x, col0, mask = x.contiguous(), window - x.shape[1], mask.contiguous()  # the window's last n columns
        else:
            cos, sin = rope_tables(positions, self.inv_freq, x.dtype)
        collected = []
        for i, weights in enumerate(self.layers):
            if kernel is not None:
                cpukernels.layer(x, cos, sin, k_bufs[i], v_bufs[i], col0, window, mask, weights, *self.dims)
            else:
                x = decoder_layer(x, cos, sin, store(i), mask, weights, *self.dims, is_causal=is_causal)
            if i in collect:
                collected.append(x.clone() if kernel is not None else x)
        return x, collected

    def tail(self, x, collected, keep: int = 0, return_hidden: bool | tuple[int, ...] = False):
        """The one tail: (out, hidden). out: the final-normed states of the kept positions (the head is applied by
        `logits`), the runner's normed output g for the EAGLE head; hidden (with `return_hidden`): the final states of
        all positions, after the collected layers' outputs where there are some (B, n, H * (len(collected) + 1))."""
        eps = self.dims[3]
        if self.runner is not None:
            return norm(x, self.final_norm, eps, self.native), None
        if not return_hidden:
            return norm(x[:, -keep:] if keep else x, self.final_norm, eps, self.native), None
        final = norm(x, self.final_norm, eps, self.native)  # (B, n, H)
        hidden = torch.cat(collected + [final], dim=-1) if collected else final
        return (final[:, -keep:] if keep else final), hidden

    def __call__(self, ids, positions, mask, store, features=None, *, keep=0, return_hidden=False, is_causal=False):
        """embed, body, tail: (out, hidden) as `tail` returns them."""
        return self.run(self.embed(ids, features), positions, mask, store, keep=keep, return_hidden=return_hidden, is_causal=is_causal)

    def run(self, x, positions, mask, store, *, keep=0, return_hidden=False, is_causal=False, kernel=None):
        """body and tail over the embedded input x (B, n, H): (out, hidden) as `tail` returns them."""
        return_hidden = return_hidden if self.runner is None else False
        collect = return_hidden if isinstance(return_hidden, tuple) else ()
        x, collected = self.body(x, positions, mask, store, is_causal=is_causal, collect=collect, kernel=kernel)
        return self.tail(x, collected, keep, return_hidden)

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        """The output head over `out` (B, keep or n, H), as the run's backend reads it (a draft's reduced head where it
        has one)."""
        return linear(out, self.weights.head(self.lean.head, self.backend))

    @torch.no_grad()
    def over_cache(self, ids, positions, valid, cache, keep=0, return_hidden=False, features=None):
        """This pass over a transformers DynamicCache (RaggedCache's): valid (B, W + n) marks real columns (None: no
        padding), or (B, n, W + n) says which columns each new token attends to (a draft tree's pass). Returns what
        RaggedCache.forward returns: logits (and hidden states), or the runner's g (B, n, H)."""
        bsz, n = ids.shape
        first = cache.layers[0]
        past = first.keys.shape[2] if first.is_initialized and first.keys.dim() == 4 else 0
        mask = None
        if valid is not None and valid.dim() == 3:
            mask = pass_mask(None, past, n, bsz, past + n, attend=valid)
        elif valid is not None or (n > 1 and past > 0):
            mask = pass_mask(valid, past, n, bsz, past + n, device=ids.device)
        out, hidden = self(
            ids,
            positions,
            mask,
            lambda i: cache_store(cache.layers[i], past),  # DynamicCache(config=...) holds one lazily made layer per block
            features,
            keep=keep,
            return_hidden=return_hidden,
            is_causal=mask is None and n > 1,
        )
        if self.runner is not None:
            return out
        logits = self.logits(out)
        return (logits, hidden) if return_hidden else logits
