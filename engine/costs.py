"""FLOPs and bytes of a forward pass, the roofline, and Leviathan et al.'s speculative-decoding formulas.

Counting follows the usual transformer accounting (Kaplan et al. 2020; the "2·N·tokens" rule):
- every weight of a Linear layer does one multiply-add per token: 2 · linear_params · n FLOPs,
  where the output head is included (its logits are computed for every verified position);
- attention adds QK^T and AV for every new token against every key in the cache:
  2 matmuls · 2 FLOPs · n · L_kv · n_heads · head_dim per layer (dense count, as FlopCounterMode does);
- bytes: every weight is streamed once per forward (that is what makes decoding memory-bound),
  plus the KV cache read and the new KV written.
Time per step is always measured, never taken from these numbers; they are used to express the
measured time as achieved FLOP/s and bandwidth (in % of the probed peak), and to show that a
speculative run does *more* FLOPs than a plain one for the same output.

Leviathan, Kalman, Matias 2023, "Fast Inference from Transformers via Speculative Decoding" (§3.1-3.3):
alpha = per-token acceptance, k = depth (their gamma), c = cost of a draft step / cost of a target step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ModelCosts:
    linear_params: int  # weights inside matmuls (all nn.Linear, including the output head)
    head_params: int  # the output head's weights (vocab x hidden)
    weight_bytes: int  # bytes streamed per forward: every parameter once (tied embeddings counted once)
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    elem_bytes: int
    vocab_rows: int = 0  # rows of the output head (vocabulary entries it scores)
    resident_bytes: int = 0  # bytes the weights hold in memory (an untied input embedding too); 0: weight_bytes

    @property
    def held_bytes(self) -> int:
        """Bytes the weights occupy in memory, whether or not a pass streams them all."""
        return self.resident_bytes or self.weight_bytes

    @classmethod
    def from_model(cls, model: torch.nn.Module) -> ModelCosts:
        cfg = model.config
        linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
        seen, weight_bytes, resident = set(), 0, 0
        input_emb = model.get_input_embeddings().weight
        output_emb = model.get_output_embeddings().weight
        for p in model.parameters():
            if p.data_ptr() in seen:
                continue
            seen.add(p.data_ptr())
            resident += p.numel() * p.element_size()
            # An untied input embedding is only gathered row by row, not streamed whole.
            if p is input_emb and input_emb.data_ptr() != output_emb.data_ptr():
                continue
            weight_bytes += p.numel() * p.element_size()
        n_heads = cfg.num_attention_heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
        return cls(
            linear_params=linear,
            head_params=output_emb.numel(),
            weight_bytes=weight_bytes,
            n_layers=cfg.num_hidden_layers,
            n_heads=n_heads,
            n_kv_heads=getattr(cfg, "num_key_value_heads", None) or n_heads,
            head_dim=head_dim,
            elem_bytes=output_emb.element_size(),
            vocab_rows=output_emb.shape[0],
            resident_bytes=resident,
        )

    def with_head_rows(self, rows: int) -> ModelCosts:
        """The same model with its output head cut to `rows` vocabulary entries (a reduced draft head)."""
        from dataclasses import replace

        hidden = self.head_params // max(1, self.vocab_rows)
        cut = max(0, self.head_params - rows * hidden)
        return replace(
            self,
            linear_params=self.linear_params - cut,
            head_params=self.head_params - cut,
            weight_bytes=self.weight_bytes - cut * self.elem_bytes,
            vocab_rows=rows,
            resident_bytes=max(0, self.resident_bytes - cut * self.elem_bytes) if self.resident_bytes else 0,
        )

    def forward_flops(self, batch: int, new_tokens: int, past: float, logits_tokens: int | None = None) -> float:
        """FLOPs of one forward: `batch` rows of `new_tokens` each, over a KV cache of `past` tokens per row.

        `logits_tokens` is how many positions per row go through the output head (all by default;
        prefill and draft steps keep only the last one)."""
        logits_tokens = new_tokens if logits_tokens is None else logits_tokens
        body = 2 * (self.linear_params - self.head_params) * new_tokens + 2 * self.head_params * logits_tokens
        attention = 4 * new_tokens * (past + new_tokens) * self.n_heads * self.head_dim * self.n_layers
        return float(batch * (body + attention))

    def forward_bytes(self, batch: int, new_tokens: int, past: float) -> float:
        """Bytes of one forward: every weight once, plus each row's KV cache (past + new) once."""
        return float(self.weight_bytes + batch * self.kv_bytes_per_token * (past + new_tokens))

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * self.elem_bytes

    def token_flops(self, past: float) -> float:
        """FLOPs of one more token (with its logits) at context `past`: the price of a rejected draft."""
        return self.forward_flops(1, 1, past)


# --- roofline ---------------------------------------------------------------------------------
def ridge_point(peak_flops: float, peak_bandwidth: float) -> float:
    """Arithmetic intensity (FLOP/byte) above which a kernel is compute-bound on this machine."""
    return peak_flops / peak_bandwidth


def ridge_tokens(costs: ModelCosts, peak_flops: float, peak_bandwidth: float) -> float:
    """Tokens per pass at which a forward's weight FLOPs reach the ridge: n* = ridge · weight_bytes / (2·params)."""
    return ridge_point(peak_flops, peak_bandwidth) * costs.weight_bytes / (2 * costs.linear_params)


def ridge_tokens_with_kv(costs: ModelCosts, peak_flops: float, peak_bandwidth: float, context: float, tokens_per_row: int = 1) -> float:
    """Tokens per pass at which a pass turns compute-bound counting the weights AND each row's KV cache: rows of
    `tokens_per_row` new tokens, each over `context` cached tokens (`ridge_tokens` counts the weights alone).

    A pass of B rows does B·f FLOPs (f = `forward_flops(1, tokens_per_row, context)`, attention included) and moves
    W + B·b bytes (W = weight_bytes, b = one row's KV, read and written). It reaches the ridge R = peak FLOP/s ÷ peak
    bandwidth at B* = R·W / (f − R·b) rows, i.e. B*·tokens_per_row tokens. Where f ≤ R·b every added row brings KV
    bytes faster than arithmetic, so no batch turns the pass compute-bound: the result is infinite."""
    ridge = ridge_point(peak_flops, peak_bandwidth)
    row_flops = costs.forward_flops(1, tokens_per_row, context)
    row_kv = costs.kv_bytes_per_token * (context + tokens_per_row)
    if row_flops <= ridge * row_kv:
        return math.inf
    return tokens_per_row * ridge * costs.weight_bytes / (row_flops - ridge * row_kv)


def roofline_ms(flops: float, nbytes: float, peak_flops: float, peak_bandwidth: float) -> float:
    """Lower bound on a pass's time: whichever of compute or memory traffic takes longer."""
    return 1000.0 * max(flops / peak_flops, nbytes / peak_bandwidth)


# --- Leviathan et al. 2023 --------------------------------------------------------------------
def expected_tokens_per_step(alpha: float, depth: int) -> float:
    """E[tokens per target pass] = (1 - alpha^(k+1)) / (1 - alpha)   (their eq. 1)."""
    if alpha >= 1.0:
        return float(depth + 1)
    return (1.0 - alpha ** (depth + 1)) / (1.0 - alpha)


def expected_speedup(alpha: float, depth: int, c: float) -> float:
    """Walltime improvement = (1 - alpha^(k+1)) / ((1 - alpha)(k·c + 1))   (their Theorem 3.8).

    Assumes a k-token verify costs one target step, i.e. the memory-bound regime."""
    return expected_tokens_per_step(alpha, depth) / (depth * c + 1.0)


def operations_factor(alpha: float, depth: int, c_hat: float) -> float:
    """Total arithmetic relative to plain decoding = (1 - alpha)(k·ĉ + k + 1) / (1 - alpha^(k+1))   (Theorem 3.11).

    ĉ = FLOPs of a draft token / FLOPs of a target token. It is > 1: speculation does *more* work."""
    return (depth * c_hat + depth + 1.0) / expected_tokens_per_step(alpha, depth)
