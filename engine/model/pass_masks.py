"""What every layer of a pass shares, made once per pass: the RoPE tables and the attention mask or bias.

The fused fast pass (engine/model/fastpass.py) and the static buffers (engine/model/static_cache.py) build
these per pass, with `pass_mask` the one builder of a pass's mask (dynamic cache, static buffers, padded graph
buckets, draft trees); the native pass takes the cheap routes where they apply (`rope_lookup`: tables made once
per model; `pass_mask`'s float bias made without the boolean mask, for a pass whose rows are all live and whose
columns are all valid), which cost a fraction of the general routes (docs/journal.md, "Masks and RoPE").
"""

from __future__ import annotations

import torch

SMALL_ATTEND_QUERIES = 16  # at most this many new tokens per row: `small_attend` (CPU), else SDPA


def rope_tables(positions, inv_freq, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and a sign-folded sin, (B, n, 1, d) in the model's dtype, once per pass: `rope`'s tables."""
    freqs = positions[..., None].float() * inv_freq  # (B, n, d/2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
    half = sin.shape[-1] // 2
    return cos[:, :, None], torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)[:, :, None]


_ROPE: dict = {}  # (id(inv_freq), dtype) -> (inv_freq, cos (P, 1, d), sin (P, 1, d)): `rope_lookup`'s tables


def rope_lookup(positions, inv_freq, dtype, top: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """`rope_tables` by lookup: the tables are made once per model and dtype for positions 0..P-1 (P doubles
    when a run outgrows it), so a pass indexes them instead of running seven small ops. The same elementwise
    arithmetic (tests/engine/test_fastpass.py). The native pass's (it reads the positions on the host: never
    inside a CUDA graph). top: a bound the positions stay below, where the caller knows one (a pass over a window of
    W columns: every position < W), else read off the positions; a position past the tables raises IndexError."""
    if top is None:
        top = int(positions.max()) + 1 if positions.numel() else 1
    key = (id(inv_freq), dtype)
    entry = _ROPE.get(key)
    if entry is None or entry[0] is not inv_freq or entry[1].shape[0] < top:
        size = max(512, 1 << (top - 1).bit_length())
        cos, sin = rope_tables(torch.arange(size, device=inv_freq.device)[None], inv_freq, dtype)  # (1, P, 1, d)
        entry = _ROPE[key] = (inv_freq, cos[0], sin[0])
    return entry[1][positions], entry[2][positions]


def rope(x, cos, signed_sin):
    """x * cos + rotate_half(x) * sin over (B, n, heads, d) in three ops and a flip: swapping the halves
    and folding rotate_half's sign into the sin table gives the same products (IEEE negation is exact)."""
    d = x.shape[-1]
    swapped = x.unflatten(-1, (2, d // 2)).flip(-2).flatten(-2)
    return x * cos + swapped * signed_sin


def attention_bias(mask, n_kv: int, groups: int):
    """The pass's boolean mask (B, 1, n, W) as `small_attend`'s additive float32 bias, built once per pass:
    (B * n_kv, groups * n, W), 0 where allowed and -inf elsewhere, its rows laid out as small_attend's
    scores (query head j * groups + g, query i: row g * n + i of kv head j's matrix)."""
    bsz, _, n, window = mask.shape
    bias = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device).masked_fill_(~mask, float("-inf"))
    return bias[:, :, None].expand(bsz, n_kv, groups, n, window).reshape(bsz * n_kv, groups * n, window)


def pass_mask(valid, past: int, n: int, rows: int, window: int, attend=None, heads: tuple[int, int] | None = None, device=None):
    """The one builder of a pass's attention mask: (rows, 1, n, window) bool. Row b < B sees its valid columns up to
        each query's own column (past + i), or, in a draft tree's pass, its row of `attend` (B, n, past + n: its context
        and its ancestors); padding rows (B <= r < rows) see only their own new columns (finite, discarded); columns past
        the live ones are masked for everyone. valid: (B, past + n) bool, or None (every column real, B = rows; the mask
    is made on `device`).

        With `heads` (n_kv, groups): that mask as `small_attend`'s additive float32 bias (`attention_bias`), made in one
        or two ops for the common pass, where every row is live, every column valid and no tree is fed (batch 1, or a
        batch that has not gone ragged): zeros, -inf above the causal diagonal."""
    bsz = rows if valid is None else valid.shape[0]
    width = past + n
    device = valid.device if valid is not None else attend.device if attend is not None else device
    plain = attend is None and rows == bsz and window == width and (valid is None or bool(valid.all()))
    if heads is not None and plain:
        n_kv, groups = heads
        if n == 1:
            return torch.zeros(bsz * n_kv, groups, window, device=device)
        causal = torch.full((n, window), float("-inf"), device=device).triu_(past + 1)  # key column > past + query
        return causal.expand(bsz * n_kv, groups, n, window).reshape(bsz * n_kv, groups * n, window)
    if attend is not None and rows == bsz and window == attend.shape[2]:  # the tree's rows are the whole mask
        mask = attend[:, None].bool()
    else:
        cols = torch.arange(window, device=device)
        causal = cols[None, :] <= (past + torch.arange(n, device=device))[:, None]  # (n, window)
        cols_valid = torch.zeros(rows, window, dtype=torch.bool, device=device)
        cols_valid[:bsz, :width] = True if valid is None else valid
        cols_valid[bsz:, past:width] = True
        mask = (causal[None] & cols_valid[:, None, :])[:, None]
        if attend is not None:
            mask[:bsz, 0, :, : attend.shape[2]] = attend
    return mask if heads is None else attention_bias(mask, *heads)
