"""What every layer of a pass shares, made once per pass: the RoPE tables and the attention mask or bias.

The fused fast pass (engine/model/fastpass.py) and the static buffers (engine/model/static_cache.py) build
these per pass; the native pass takes the cheap routes where they apply (`rope_lookup`: tables made once per
model; `pass_bias`: the float bias without the boolean mask, for a pass whose rows are all live and whose
columns are all valid). Measured on the 2-core EPYC (2026-12-02), the general routes cost ~30 us (RoPE) and
~80 us (mask then bias) per pass, a pass of the EAGLE head ~0.6 ms in all.
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


def rope_lookup(positions, inv_freq, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """`rope_tables` by lookup: the tables are made once per model and dtype for positions 0..P-1 (P doubles
    when a run outgrows it), so a pass indexes them instead of running seven small ops (~30 us on the 2-core
    EPYC). The same elementwise arithmetic (tests/engine/test_fastpass.py). The native pass's."""
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


def pass_bias(valid, past: int, n: int, rows: int, window: int, n_kv: int, groups: int) -> torch.Tensor | None:
    """attention_bias(padded_mask(...)) in one or two ops for the common pass, where every row is live and every
    column valid (batch 1, or a batch that has not gone ragged): zeros, -inf above the causal diagonal when n > 1.
    None otherwise (and beyond SMALL_ATTEND_QUERIES new tokens, where the pass takes a boolean mask): the caller
    builds the mask the general way. valid: (B, past + n) bool."""
    bsz = valid.shape[0]
    if n > SMALL_ATTEND_QUERIES or rows != bsz or window != past + n or not bool(valid.all()):
        return None
    if n == 1:
        return torch.zeros(bsz * n_kv, groups, window, device=valid.device)
    causal = torch.full((n, window), float("-inf"), device=valid.device).triu_(past + 1)  # key column > past + query
    return causal.expand(bsz * n_kv, groups, n, window).reshape(bsz * n_kv, groups * n, window)


def padded_mask(valid: torch.Tensor, past: int, n_new: int, batch: int, window: int) -> torch.Tensor:
    """(batch, 1, n_new, window) bool for a padded pass: row r < B sees its valid columns up to each
    query's own column (past + i); padding rows see only their own new columns (finite, discarded);
    columns past the live ones are masked for everyone."""
    live, width = valid.shape  # (B, past + n_new)
    device = valid.device
    cols = torch.arange(window, device=device)
    causal = cols[None, :] <= (past + torch.arange(n_new, device=device))[:, None]  # (n, window)
    cols_valid = torch.zeros(batch, window, dtype=torch.bool, device=device)
    cols_valid[:live, :width] = valid
    cols_valid[live:, past:width] = True
    return (causal[None] & cols_valid[:, None, :])[:, None]
