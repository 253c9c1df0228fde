"""A lean forward pass for Llama-architecture models (gpt-fast style), over the same weights and cache.

Why: at batch 1 a decode step of a small model is mostly Python. transformers' generic forward builds
masks, rotary tables, output records and kwargs plumbing on every call; for the 16.8M-parameter draft
that overhead is most of its step time, and every millisecond of draft time is paid k times per
speculative step (c, the draft/target cost ratio in Leviathan's speedup formula). This module runs the
same arithmetic as `LlamaForCausalLM.forward` (RMSNorm in float32, default RoPE, SDPA attention,
SwiGLU MLP, tied or untied head) with one Python call per op and nothing else.

It reads the weights of an existing transformers model (the q/k/v and gate/up matrices concatenated once per
model beside it, engine/model/prepared.py; transformers' own parameters stay as loaded) and runs
engine/model/layer.py's `decoder_layer` over the same
`DynamicCache` layers `RaggedCache` manages, so roll-back, row selection and the FLOP accounting are
unchanged. `supports(model)` says whether a model qualifies: plain Llama (SmolLM2, TinyLlama, the
distilled draft); anything else (biases, scaled RoPE, other architectures) keeps the transformers path.

Numerics: the same ops in the same order and dtype as transformers; float32 logits agree with
transformers' to ~1e-5 (a test checks it), not bit for bit (SDPA may pick another kernel for the mask).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.model.layer import cache_store, decoder_layer
from engine.model.pass_masks import rope_tables
from engine.model.prepared import PreparedWeights, prepared


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
        Each layer is the tuple of its 9 weights (ln1, q, k, v, o, ln2, gate, up, down), prepared once for the
        passes (engine/model/prepared.py; engine/model/layer.py, `decoder_layer`). The EAGLE
        head's runner (engine/drafters/eagle.py) is one such layer."""
        lean = cls.__new__(cls)
        lean._init_body(layers, n_heads=n_heads, n_kv=n_kv, head_dim=head_dim, eps=eps, rope_theta=rope_theta)
        lean.model = lean.embed = lean.final_norm = lean.head = None
        return lean

    def _init_body(self, layers, *, n_heads: int, n_kv: int, head_dim: int, eps: float, rope_theta: float) -> None:
        self.n_heads, self.n_kv, self.head_dim = n_heads, n_kv, head_dim
        self.eps = eps
        self.scale = head_dim**-0.5
        # Exactly transformers' default RoPE inverse frequencies (float32).
        self.inv_freq = 1.0 / (rope_theta ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
        self.layers = [tuple(weights) for weights in layers]  # the model's own tensors, as loaded
        self._weights: PreparedWeights | None = None

    def prepared(self) -> PreparedWeights:
        """The model's prepared weights (engine/model/prepared.py), looked up once per LeanLlama."""
        if self._weights is None:
            self._weights = prepared(self)
        return self._weights

    def restrict_head(self, rows: torch.Tensor) -> None:
        """Score only these vocabulary rows (FR-Spec's frequency-ranked draft vocabulary): logits come back
        over `rows`, in that order. A draft's output head is most of its step on a CPU; the caller maps
        the winning local index back to a token id."""
        self.head = self.prepared().restricted_head(self.model.lm_head.weight, rows)  # made once per model and rows

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
        cos, sin = rope_tables(positions, self.inv_freq.to(x.device), x.dtype)  # (B, n, 1, dim)
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
        dims = (self.n_heads, self.n_kv, self.head_dim, self.eps, self.scale)
        for i, weights in enumerate(
            self.prepared().layers("concat")
        ):  # DynamicCache(config=...) holds one (lazily initialised) layer per block
            x = decoder_layer(x, cos, sin, cache_store(cache.layers[i], past), mask, weights, *dims, is_causal=is_causal)
            if i in collect:
                into[i] = x
        return x
