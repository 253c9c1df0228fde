"""RaggedCache: one model's KV cache for a ragged batch, with per-sequence rollback.

Layout: a transformers `DynamicCache` of shape (B, kv_heads, W, head_dim) per layer, each row
*right-aligned*: row i's `lengths[i]` valid entries sit in the last columns, the columns before them
are padding that the attention mask hides. Every forward appends the same number of new columns to all
rows (each row feeds real tokens), so the layout stays right-aligned. After verification each row keeps
its own number of tokens (`keep`): rows that rejected more drafts are shifted right by a gather, the
padding columns every row has are cropped, and nothing is ever truncated to another row's acceptance.
Position ids are per row (`lengths`), so RoPE sees the true positions whatever the padding.
"""

from __future__ import annotations

import os

import torch
from transformers import DynamicCache

from .costs import ModelCosts
from .fastllama import LeanLlama, supports


def lean_enabled() -> bool:
    """The lean Llama forward is on unless SPECLAB_LEAN=0 (to compare against transformers' own forward)."""
    return os.environ.get("SPECLAB_LEAN", "1") != "0"


def compile_enabled() -> bool:
    """SPECLAB_COMPILE=1 runs the lean forward's decoder layer under torch.compile (opt-in: see README)."""
    return os.environ.get("SPECLAB_COMPILE", "0") == "1"


class RaggedCache:
    def __init__(self, model: torch.nn.Module, device: torch.device, costs: ModelCosts, lean: bool | None = None):
        self.model = model
        # gpt-fast-style forward over the same weights when the model is a plain Llama (engine/fastllama.py).
        use_lean = lean_enabled() if lean is None else lean
        self.lean = LeanLlama(model, compile=compile_enabled()) if use_lean and supports(model) else None
        self.device = device
        self.costs = costs
        self.flops = 0.0  # accumulated over forwards; the decode loop reads and resets them per step
        self.bytes = 0.0
        self.cache = DynamicCache(config=model.config)
        self.lengths = torch.zeros(0, dtype=torch.long, device=device)  # (B,) valid tokens per row
        self.width = 0  # physical columns W

    @property
    def batch(self) -> int:
        return int(self.lengths.shape[0])

    def prefill(self, token_lists: list[list[int]], pad_id: int, logits_to_keep: int = 1) -> torch.Tensor:
        """Run the model on left-padded prompts. Returns logits (B, logits_to_keep, vocab)."""
        width = max(len(t) for t in token_lists)
        ids = torch.full((len(token_lists), width), pad_id, dtype=torch.long)
        for i, toks in enumerate(token_lists):
            ids[i, width - len(toks) :] = torch.tensor(toks, dtype=torch.long)
        self.lengths = torch.tensor([len(t) for t in token_lists], dtype=torch.long, device=self.device)
        self.width = 0
        return self.forward(ids.to(self.device), logits_to_keep=logits_to_keep)

    def attention_mask(self, n_new: int) -> torch.Tensor:
        """(B, W + n_new): 1 on each row's valid (right-aligned) columns and the new tokens."""
        total = self.width + n_new
        cols = torch.arange(total, device=self.device)  # (W+n,)
        start = self.width - (self.lengths - 0)  # first valid column per row, before the new tokens
        if self.width == 0:  # prefill: the new tokens themselves are left-padded
            start = total - self.lengths
        return (cols[None, :] >= start[:, None]).long()  # (B, W+n)

    def forward(self, input_ids: torch.Tensor, logits_to_keep: int = 0) -> torch.Tensor:
        """Feed (B, n) tokens, all real, at each row's next positions. Returns logits (B, n or keep, vocab)."""
        n_new = input_ids.shape[1]
        mask = self.attention_mask(n_new)
        if self.width == 0:
            positions = (mask.cumsum(-1) - 1).clamp_min(0)  # (B, n): left padding gets position 0
            self.width = n_new
            for length in self.lengths.tolist():  # count real prompt tokens, not padding
                self.flops += self.costs.forward_flops(1, length, 0, min(logits_to_keep or length, length))
            self.bytes += self.costs.forward_bytes(self.batch, float(self.lengths.float().mean()), 0)
        else:
            past = float(self.lengths.float().mean())
            self.flops += self.costs.forward_flops(self.batch, n_new, past, logits_to_keep or n_new)
            self.bytes += self.costs.forward_bytes(self.batch, n_new, past)
            positions = self.lengths[:, None] + torch.arange(n_new, device=self.device)  # (B, n)
            self.width += n_new
            self.lengths = self.lengths + n_new
        # No padding anywhere (always so at batch 1): let attention take its plain causal path, no mask to build.
        no_padding = bool(mask.all())
        if self.lean is not None:
            return self.lean.forward(input_ids, positions, None if no_padding else mask, self.cache, logits_to_keep)
        out = self.model(
            input_ids=input_ids,
            attention_mask=None if no_padding else mask,
            position_ids=positions,
            past_key_values=self.cache,
            use_cache=True,
            logits_to_keep=logits_to_keep,
        )
        return out.logits

    def take_counts(self) -> tuple[float, float]:
        """FLOPs and bytes of the forwards since the last call."""
        counts = (self.flops, self.bytes)
        self.flops = self.bytes = 0.0
        return counts

    def keep(self, new_lengths: torch.Tensor) -> None:
        """Roll back: row i keeps its first new_lengths[i] tokens (<= lengths[i]); drop the rest."""
        drop = self.lengths - new_lengths  # (B,) tokens removed from each row's end
        if bool((drop < 0).any()):
            raise ValueError("RaggedCache.keep can only shorten rows")
        new_width = int(new_lengths.max()) if self.batch else 0
        min_drop = int(drop.min()) if self.batch else 0
        if bool((drop == min_drop).all()):
            # Every row drops the same amount (always true at batch 1): a plain crop, no copy.
            left = self.width - min_drop - new_width
            for layer in self.cache.layers:
                layer.keys = layer.keys[:, :, left : self.width - min_drop]
                layer.values = layer.values[:, :, left : self.width - min_drop]
        else:
            # Shift each row right by its own drop: new column j of row i reads old column j + offset_i.
            cols = torch.arange(new_width, device=self.device)  # (W',)
            offset = (self.width - drop) - new_width  # (B,): old end of kept region minus new width
            index = (cols[None, :] + offset[:, None]).clamp_min(0)  # (B, W'); padding columns read junk, masked
            for layer in self.cache.layers:
                b, h, _, d = layer.keys.shape
                gather = index[:, None, :, None].expand(b, h, new_width, d)
                layer.keys = layer.keys.gather(2, gather)
                layer.values = layer.values.gather(2, gather)
        self.lengths = new_lengths.clone()
        self.width = new_width

    def select(self, rows: torch.Tensor) -> None:
        """Keep only `rows` of the batch (finished sequences stop costing work), then crop shared padding."""
        self.lengths = self.lengths[rows]
        for layer in self.cache.layers:
            layer.keys = layer.keys[rows]
            layer.values = layer.values[rows]
        if self.batch:
            self.keep(self.lengths)
