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


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """LlamaRMSNorm: normalise in float32, scale in the model's dtype."""
    dtype = x.dtype
    x = x.to(torch.float32)
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x.to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def attend(q, k, v, mask, is_causal: bool, scale: float):
    """Scaled dot-product attention of q (B, H, n, d) over k, v (B, H_kv, T, d) with grouped-query heads.
    SDPA's own GQA path (`enable_gqa`) without a mask, and with a mask on the CPU, whose flash kernel
    takes both: the same output bit for bit as expanding the kv heads (a test checks it), and the
    expansion copies every layer's keys and values, ~0.07 ms per tensor at 250 columns, ~4 ms per
    SmolLM2 verify pass on the 2-core build CPU (measured 2026-12-01). Elsewhere a mask gets the kv heads
    expanded to H: CUDA's fused kernels may not take `enable_gqa` with a mask and would silently drop to
    the math kernel (transformers checks the same, huggingface/transformers#39412).
    Shared by the lean forward and the static KV buffers (engine/model/static_cache.py)."""
    bsz, n_heads, _, head_dim = q.shape
    n_kv, total = k.shape[1], k.shape[2]
    groups = n_heads // n_kv
    if groups > 1 and (mask is None or q.device.type == "cpu"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale, enable_gqa=True)
    if groups > 1:
        k = k[:, :, None].expand(bsz, n_kv, groups, total, head_dim).reshape(bsz, n_heads, total, head_dim)
        v = v[:, :, None].expand(bsz, n_kv, groups, total, head_dim).reshape(bsz, n_heads, total, head_dim)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale)


def project_qkv(x, cos, sin, ln1, wq, wk, wv, n_heads: int, n_kv: int, head_dim: int, eps: float):
    """The layer's normed q/k/v projections with RoPE applied: q (B, H, n, d), k and v (B, H_kv, n, d).
    Shared by `_layer` and the static KV buffers' layer (engine/model/static_cache.py)."""
    bsz, n, _ = x.shape
    h = rms_norm(x, ln1, eps)
    q = F.linear(h, wq).view(bsz, n, n_heads, head_dim).transpose(1, 2)
    k = F.linear(h, wk).view(bsz, n, n_kv, head_dim).transpose(1, 2)
    v = F.linear(h, wv).view(bsz, n, n_kv, head_dim).transpose(1, 2)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v


def finish_layer(x, a, wo, ln2, wg, wu, wd, eps: float):
    """Attention output a (B, H, n, d) through wo into the residual, then the SwiGLU MLP's residual."""
    bsz, n, _ = x.shape
    x = x + F.linear(a.transpose(1, 2).reshape(bsz, n, -1), wo)
    h = rms_norm(x, ln2, eps)
    return x + F.linear(F.silu(F.linear(h, wg)) * F.linear(h, wu), wd)


def _layer(
    x,
    cos,
    sin,
    past_k,
    past_v,
    mask,
    is_causal: bool,
    ln1,
    wq,
    wk,
    wv,
    wo,
    ln2,
    wg,
    wu,
    wd,
    n_heads: int,
    n_kv: int,
    head_dim: int,
    eps: float,
    scale: float,
):
    """One decoder layer; returns the new hidden states and this layer's keys/values including the new ones."""
    q, k, v = project_qkv(x, cos, sin, ln1, wq, wk, wv, n_heads, n_kv, head_dim, eps)
    if past_k is not None:
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
    a = attend(q, k, v, mask, is_causal, scale)  # (bsz, n_heads, n, head_dim)
    return finish_layer(x, a, wo, ln2, wg, wu, wd, eps), k, v


class LeanLlama:
    """Holds references to a Llama model's parameters; `forward` is one decode/verify/prefill pass."""

    def __init__(self, model: torch.nn.Module):
        if not supports(model):
            raise ValueError("LeanLlama needs a plain LlamaForCausalLM (default RoPE, SiLU, no biases)")
        cfg = model.config
        m = model.model
        layers = [
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
        self._init_body(
            layers,
            n_heads=cfg.num_attention_heads,
            n_kv=cfg.num_key_value_heads,
            head_dim=getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
            eps=cfg.rms_norm_eps,
            rope_theta=cfg.rope_parameters["rope_theta"],
        )
        self.model = model
        self.embed = m.embed_tokens.weight
        self.final_norm = m.norm.weight
        self.head = model.lm_head.weight

    @classmethod
    def from_layers(
        cls,
        layers: list[tuple[torch.Tensor, ...]],
        *,
        n_heads: int,
        n_kv: int,
        head_dim: int,
        eps: float,
        rope_theta: float,
    ) -> LeanLlama:
        """Decoder layers only, no embedding, final norm or head: `body` runs them over input embeddings.
        Each layer is the tuple of 9 weights `_layer` takes (ln1, q, k, v, o, ln2, gate, up, down). The EAGLE
        head's runner (engine/drafters/eagle.py) is one such layer."""
        lean = cls.__new__(cls)
        lean._init_body(layers, n_heads=n_heads, n_kv=n_kv, head_dim=head_dim, eps=eps, rope_theta=rope_theta)
        lean.model = lean.embed = lean.final_norm = lean.head = None
        return lean

    def _init_body(self, layers, *, n_heads: int, n_kv: int, head_dim: int, eps: float, rope_theta: float) -> None:
        self.layer_fn = _layer
        self.n_heads, self.n_kv, self.head_dim = n_heads, n_kv, head_dim
        self.eps = eps
        self.scale = head_dim**-0.5
        # Exactly transformers' default RoPE inverse frequencies (float32).
        self.inv_freq = 1.0 / (rope_theta ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
        self.layers = [tuple(weights) for weights in layers]

    def restrict_head(self, rows: torch.Tensor) -> None:
        """Score only these vocabulary rows (FR-Spec's frequency-ranked draft vocabulary): logits come back
        over `rows`, in that order. A draft's output head is most of its step on a CPU; the caller maps
        the winning local index back to a token id."""
        self.head = self.model.lm_head.weight[rows].contiguous()

    @torch.no_grad()
    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        valid: torch.Tensor | None,
        cache,
        logits_to_keep: int = 0,
        return_hidden: bool | tuple[int, ...] = False,
    ):
        """Feed (B, n) tokens at `positions` (B, n); `valid` (B, W+n) marks real cache columns (None: no padding),
        or (B, n, W+n) says which columns each new token attends to (a draft tree's verify pass, engine/decoding/verify_tree.py).

        Appends each layer's keys/values to `cache.layers[i]` (a transformers DynamicCache built with the
        model's config, as RaggedCache builds it) and returns
        logits (B, n or logits_to_keep, vocab); with `return_hidden`, also the final (post-norm) hidden
        states of all n positions (B, n, hidden): the features an EAGLE head drafts from. `return_hidden`
        as a tuple of layer indices (EAGLE-3 fusion) puts those layers' outputs first: (B, n, H * (len + 1)).
        """
        layers = return_hidden if isinstance(return_hidden, tuple) else ()
        collected: dict[int, torch.Tensor] = {}
        x = self.body(F.embedding(input_ids, self.embed), positions, valid, cache, collect=layers, into=collected)
        if return_hidden:
            final = rms_norm(x, self.final_norm, self.eps)  # (B, n, H)
            kept = final[:, -logits_to_keep:] if logits_to_keep else final
            hidden = torch.cat([collected[i] for i in layers] + [final], dim=-1) if layers else final
            return F.linear(kept, self.head), hidden
        if logits_to_keep:
            x = x[:, -logits_to_keep:]
        return F.linear(rms_norm(x, self.final_norm, self.eps), self.head)

    def body(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        valid: torch.Tensor | None,
        cache,
        collect: tuple[int, ...] = (),
        into: dict | None = None,
    ) -> torch.Tensor:
        """The decoder layers over input embeddings x (B, n, H); returns the last layer's output (pre-norm).
        The outputs of the layers in `collect` go into `into` (layer index -> (B, n, H))."""
        bsz, n, _ = x.shape
        dtype = x.dtype
        freqs = positions[..., None].float() * self.inv_freq.to(x.device)  # (B, n, dim/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos().to(dtype)[:, None]  # (B, 1, n, dim)
        sin = emb.sin().to(dtype)[:, None]
        first = cache.layers[0]
        past = first.keys.shape[2] if first.is_initialized and first.keys.dim() == 4 else 0
        total = past + n
        mask = None
        if valid is not None and valid.dim() == 3:  # (B, n, W+n): each query's own columns (tree attention)
            mask = valid[:, None].bool()
        elif valid is not None or (n > 1 and past > 0):
            # Boolean (B, 1, n, W+n): a real column, and not in the future of query i (at column past + i).
            cols = torch.arange(total, device=x.device)
            causal = cols[None, :] <= (past + torch.arange(n, device=x.device))[:, None]  # (n, W+n)
            mask = causal[None, None] if valid is None else (causal[None] & valid[:, None, :].bool())[:, None]
        is_causal = mask is None and n > 1
        for i, weights in enumerate(self.layers):
            layer = cache.layers[i]  # DynamicCache(config=...) holds one (lazily initialised) layer per block
            past_k, past_v = (layer.keys, layer.values) if past else (None, None)
            x, k, v = self.layer_fn(
                x, cos, sin, past_k, past_v, mask, is_causal, *weights, self.n_heads, self.n_kv, self.head_dim, self.eps, self.scale
            )
            if not layer.is_initialized:
                layer.lazy_initialization(k, v)
            layer.keys, layer.values = k, v
            if i in collect:
                into[i] = x
        return x
