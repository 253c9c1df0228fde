"""Draft trees over the static KV buffers (engine/model/static_cache.py): RaggedCache's `forward_tree` and
`keep_path` for the fused eager and native passes, so that a tree verify and a tree draft run on
the same fast pass as a chain's (the pass the measured pass-cost curve prices: engine/decoding/passcurve.py).

A tree pass feeds its nodes at explicit positions (their depths) and gives each its own attention row
(its context and its ancestors: engine/decoding/verify_tree.py); the fast pass takes that row as its
boolean mask, so the native layer's attention (an additive bias per query) and SDPA both honour it.
Roll-back copies the accepted path's columns inside the buffers, as RaggedCache.keep_path does inside
its DynamicCache.
"""

from __future__ import annotations

import torch


def remap_attend(attend: torch.Tensor, index: torch.Tensor, old_width: int) -> torch.Tensor:
    """`attend` (B, n, old_width + n) after the cache's columns were packed by `index` (B, W'): new column
    c is old column index[b, c]; the n new columns keep their place at the end."""
    batch, n, _ = attend.shape
    cached = attend[:, :, :old_width].gather(2, index[:, None, :].expand(batch, n, index.shape[1]))
    return torch.cat([cached, attend[:, :, old_width:]], dim=2)


def forward_tree(cache, input_ids, positions, attend, logits_to_keep=0, return_hidden=False, features=None):
    """RaggedCache.forward_tree over the buffers (`cache`: a StaticRaggedCache on the fast route, whose `run` takes a
    tree's attention rows)."""
    n_new = input_ids.shape[1]
    if cache.width == 0:
        raise ValueError("forward_tree needs a prefilled cache")
    if cache.width + n_new > cache.kv.capacity:
        old_width = cache.width
        index = cache._compact()
        attend = remap_attend(attend, index, old_width)
    if cache.width + n_new > cache.kv.capacity:
        raise RuntimeError(f"static KV buffers full: {cache.width} + {n_new} columns > {cache.kv.capacity}")
    cache.counter.step(cache.batch, n_new, float(cache.lengths.float().mean()), logits_to_keep)
    past = cache.width
    cache.lengths = cache.lengths + n_new
    cache.width = past + n_new
    cache.valid = torch.cat([cache.valid, torch.ones(cache.batch, n_new, dtype=torch.bool, device=cache.device)], 1)
    cache.dense = False  # the tree's rows are its mask
    out, hidden = cache.route.run(cache, input_ids, positions, cache.valid, past, logits_to_keep, return_hidden, features, attend)
    return cache.outputs(out, hidden, return_hidden)


def keep_path(cache, path: torch.Tensor, keep: torch.Tensor, n_new: int) -> None:
    """RaggedCache.keep_path inside the buffers: row b keeps the verify columns path[b, j] where keep[b, j],
    packed right after its cache; only slots from the first one that moves are copied, in every layer at once
    (StaticKV's buffers are views of one tensor: four ops, not four per layer)."""
    base, width, batch = cache.width - n_new, path.shape[1], cache.batch
    moved = (path != torch.arange(width, device=path.device)).any(0)  # (P,)
    start = int(moved.long().argmax()) if bool(moved.any()) else width
    if start < width:
        for k in (cache.kv.all_keys, cache.kv.all_values):  # (layers, rows, kv, capacity, d)
            layers, _, heads, _, d = k.shape
            index = path[None, :, None, start:, None].expand(layers, batch, heads, width - start, d)
            moved_cols = k[:, :batch, :, base : base + n_new].gather(3, index)  # a gathered copy: safe to write back
            k[:, :batch, :, base + start : base + width] = moved_cols
    cache.lengths = cache.lengths - n_new + keep.long().sum(1)
    cache.valid = torch.cat([cache.valid[:, :base], keep], dim=1)
    cache.width = base + width
    cache._tidy()
