"""A lean forward pass for Llama-architecture models (gpt-fast style), over the same weights and cache.

Why: at batch 1 a decode step of a small model is mostly Python. transformers' generic forward builds
masks, rotary tables, output records and kwargs plumbing on every call; for the 16.8M-parameter draft
that overhead is most of its step time, and every millisecond of draft time is paid k times per
speculative step (c, the draft/target cost ratio in Leviathan's speedup formula). This module runs the
same arithmetic as `LlamaForCausalLM.forward` (RMSNorm in float32, default RoPE, SDPA attention,
SwiGLU MLP, tied or untied head) with one Python call per op and nothing else.

It reads the weights of an existing transformers model (no copy) and appends to the same
`DynamicCache` layers `RaggedCache` manages, so roll-back, row selection and the FLOP accounting are
unchanged. `supports(model)` says whether a model qualifies: plain Llama (SmolLM2, TinyLlama, the
distilled draft); anything else (biases, scaled RoPE, other architectures) keeps the transformers path.

Numerics: the same ops in the same order and dtype as transformers; float32 logits agree with
transformers' to ~1e-5 (a test checks it), not bit for bit (SDPA may pick another kernel for the mask).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def supports(model: torch.nn.Module) -> bool:
    """True for a plain LlamaForCausalLM: default RoPE, SiLU MLP, no biases."""
    cfg = getattr(model, "config", None)
    if cfg is None or getattr(cfg, "model_type", None) != "llama":
        return False
    rope = getattr(cfg, "rope_parameters", None) or {}
    return (
        rope.get("rope_type", "default") == "default"
        and not getattr(cfg, "attention_bias", False)
        and not getattr(cfg, "mlp_bias", False)
        and getattr(cfg, "hidden_act", "silu") == "silu"
        and hasattr(model, "model")
        and hasattr(model, "lm_head")
    )


class LeanLlama:
    """Holds references to a Llama model's parameters; `forward` is one decode/verify/prefill pass."""

    def __init__(self, model: torch.nn.Module):
        if not supports(model):
            raise ValueError("LeanLlama needs a plain LlamaForCausalLM (default RoPE, SiLU, no biases)")
        cfg = model.config
        self.model = model
        self.n_heads = cfg.num_attention_heads
        self.n_kv = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.eps = cfg.rms_norm_eps
        self.scale = self.head_dim**-0.5
        base = cfg.rope_parameters["rope_theta"]
        dim = self.head_dim
        # Exactly transformers' default RoPE inverse frequencies (float32).
        self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
        m = model.model
        self.embed = m.embed_tokens.weight
        self.final_norm = m.norm.weight
        self.head = model.lm_head.weight
        self.layers = [
            (
                layer.input_layernorm.weight,
                layer.self_attn.q_proj.weight,
                layer.self_attn.k_proj.weight,
                layer.self_attn.v_proj.weight,
                layer.self_attn.o_proj.weight,
                layer.post_attention_layernorm.weight,
                layer.mlp.gate_proj.weight,
                layer.mlp.up_proj.weight,
                layer.mlp.down_proj.weight,
            )
            for layer in m.layers
        ]

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return weight * x.to(dtype)

    @staticmethod
    def _rotate_half(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    @torch.no_grad()
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor | None,
                cache, logits_to_keep: int = 0) -> torch.Tensor:
        """Feed (B, n) tokens at `positions` (B, n); `valid` (B, W+n) marks real cache columns (None: no padding).

        Appends each layer's keys/values to `cache.layers[i]` (a transformers DynamicCache) and returns
        logits (B, n or logits_to_keep, vocab).
        """
        bsz, n = input_ids.shape
        x = F.embedding(input_ids, self.embed)
        dtype = x.dtype
        freqs = positions[..., None].float() * self.inv_freq.to(x.device)  # (B, n, dim/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos().to(dtype)[:, None]  # (B, 1, n, dim)
        sin = emb.sin().to(dtype)[:, None]
        past = cache.layers[0].keys.shape[2] if len(cache.layers) and cache.layers[0].is_initialized else 0
        total = past + n
        mask = None
        if valid is not None or (n > 1 and past > 0):
            # Boolean (B, 1, n, W+n): a real column, and not in the future of query i (at column past + i).
            cols = torch.arange(total, device=x.device)
            causal = cols[None, :] <= (past + torch.arange(n, device=x.device))[:, None]  # (n, W+n)
            mask = causal[None, None] if valid is None else (causal[None] & valid[:, None, :].bool())[:, None]
        is_causal = mask is None and n > 1
        groups = self.n_heads // self.n_kv
        for i, (ln1, wq, wk, wv, wo, ln2, wg, wu, wd) in enumerate(self.layers):
            h = self._norm(x, ln1)
            q = F.linear(h, wq).view(bsz, n, self.n_heads, self.head_dim).transpose(1, 2)
            k = F.linear(h, wk).view(bsz, n, self.n_kv, self.head_dim).transpose(1, 2)
            v = F.linear(h, wv).view(bsz, n, self.n_kv, self.head_dim).transpose(1, 2)
            q = q * cos + self._rotate_half(q) * sin
            k = k * cos + self._rotate_half(k) * sin
            k, v = cache.layers[i].update(k, v) if i < len(cache.layers) else cache.update(k, v, i)
            if groups > 1 and mask is None:
                a = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=self.scale, enable_gqa=True)
            else:
                if groups > 1:
                    k = k[:, :, None].expand(bsz, self.n_kv, groups, total, self.head_dim).reshape(bsz, self.n_heads, total, self.head_dim)
                    v = v[:, :, None].expand(bsz, self.n_kv, groups, total, self.head_dim).reshape(bsz, self.n_heads, total, self.head_dim)
                a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=self.scale)
            x = x + F.linear(a.transpose(1, 2).reshape(bsz, n, -1), wo)
            h = self._norm(x, ln2)
            x = x + F.linear(F.silu(F.linear(h, wg)) * F.linear(h, wu), wd)
        if logits_to_keep:
            x = x[:, -logits_to_keep:]
        return F.linear(self._norm(x, self.final_norm), self.head)
