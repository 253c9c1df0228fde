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
unchanged. engine/model/passes.py's `Pass` is the pass itself (over the dynamic cache: `Pass.over_cache`);
this module holds what it reads of the model. `supports(model)` says whether a model qualifies: plain Llama (SmolLM2, TinyLlama, the
distilled draft); anything else (biases, scaled RoPE, other architectures) keeps the transformers path.

Numerics: the same ops in the same order and dtype as transformers; float32 logits agree with
transformers' to ~1e-5 (a test checks it), not bit for bit (SDPA may pick another kernel for the mask).
"""

from __future__ import annotations

import torch

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


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LeanLlama:
    """Holds references to a Llama model's parameters and its dimensions; engine/model/passes.py's `Pass` runs them."""

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
        """Decoder layers only, no embedding, final norm or head: a `Pass` runs them over input embeddings.
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

    def prepared(self) -> PreparedWeights:
        """The model's prepared weights (engine/model/prepared.py), looked up in their registry (nothing is kept on
        this object: a runner's LeanLlama is shared by every run of its pair)."""
        return prepared(self)

    def restrict_head(self, rows: torch.Tensor) -> None:
        """Score only these vocabulary rows (FR-Spec's frequency-ranked draft vocabulary): logits come back
        over `rows`, in that order. A draft's output head is most of its step on a CPU; the caller maps
        the winning local index back to a token id."""
        self.head = self.prepared().restricted_head(self.model.lm_head.weight, rows)  # made once per model and rows
