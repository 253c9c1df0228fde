"""Will a model pair fit this GPU? An estimate from the models' config.json, before any weight is loaded.

Loading a pair that does not fit fails late (after a long download, mid-way through moving weights) and
can leave the GPU fragmented for everyone else on a shared server. So the app estimates first and
refuses in one line when the estimate exceeds the free memory `torch.cuda.mem_get_info` reports.

The estimate is a model of memory, not a measurement:
- weights: the parameter count a Llama/Qwen2-style config implies (embedding, head unless tied, per layer
  the q/k/v/o projections with Qwen2's biases, the gated MLP and two norms) x bytes per parameter;
- KV cache: 2 (keys, values) x layers x KV heads x head dim x tokens x batch x bytes, for the context the
  check is asked about (the static KV buffers of engine/model/static_cache.py are this size);
- activations: the widest transient of one pass over that context (the MLP's gate and up halves and the
  residual stream) plus float32 logits over the vocabulary for one position per row;
- prepared weights: on a GPU the lean layer's backends (torch, cuda_graphs) keep q/k/v and gate/up concatenated
  beside the model's own matrices (engine/model/prepared.py, "concat"), a second copy of ~60% of a layer's weights;
  a model the lean layer does not cover (Qwen2's biases, scaled RoPE) runs transformers' forward and has none;
- OVERHEAD_BYTES for the CUDA context, library workspaces and allocator slack (a rough allowance).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

GIB = 1024**3
OVERHEAD_BYTES = 1 * GIB  # CUDA context (~0.3-0.5 GiB), cuBLAS/attention workspaces, allocator slack


def params_from_config(cfg: dict) -> int:
    """Parameters of a decoder-only Llama/Qwen2-style model from its config.json."""
    try:
        hidden, layers, vocab = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"]), int(cfg["vocab_size"])
        inter, heads = int(cfg["intermediate_size"]), int(cfg["num_attention_heads"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"config.json lacks a size field the memory estimate needs ({exc})") from None
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    q, kv = heads * head_dim, kv_heads * head_dim
    attention = hidden * q + 2 * hidden * kv + q * hidden
    if cfg.get("model_type") == "qwen2":  # q/k/v projections carry biases
        attention += q + 2 * kv
    per_layer = attention + 3 * hidden * inter + 2 * hidden
    embed = vocab * hidden
    head = 0 if cfg.get("tie_word_embeddings", False) else vocab * hidden
    return embed + head + layers * per_layer + hidden


def lean_layer(cfg: dict) -> bool:
    """Whether the lean decoder layer runs this config (engine/model/fastllama.py's `supports`, read from config.json)."""
    ropes = [cfg.get(key) or {} for key in ("rope_parameters", "rope_scaling")]  # transformers 5's name, config.json's older one
    return (
        cfg.get("model_type") == "llama"
        and all((rope.get("rope_type") or rope.get("type") or "default") == "default" for rope in ropes)
        and not cfg.get("attention_bias")
        and not cfg.get("mlp_bias")
        and cfg.get("hidden_act", "silu") == "silu"
    )


def prepared_params(cfg: dict) -> int:
    """Parameters in the prepared copy a GPU backend keeps beside the weights: per layer q/k/v and gate/up concatenated."""
    if not lean_layer(cfg):
        return 0
    hidden, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    per_layer = hidden * (heads + 2 * kv_heads) * head_dim + 2 * hidden * int(cfg["intermediate_size"])
    return int(cfg["num_hidden_layers"]) * per_layer


def kv_cache_bytes(cfg: dict, tokens: int, batch: int, dtype_bytes: int) -> int:
    heads = int(cfg["num_attention_heads"])
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads)
    return 2 * int(cfg["num_hidden_layers"]) * kv_heads * head_dim * tokens * batch * dtype_bytes


def activation_bytes(cfg: dict, tokens: int, batch: int, dtype_bytes: int) -> int:
    hidden, inter, vocab = int(cfg["hidden_size"]), int(cfg["intermediate_size"]), int(cfg["vocab_size"])
    return batch * tokens * (2 * inter + 2 * hidden) * dtype_bytes + batch * vocab * 4


@dataclass(frozen=True)
class Need:
    weights: int
    kv_cache: int
    activations: int
    prepared: int = 0  # the GPU backends' concatenated copy (engine/model/prepared.py)

    @property
    def total(self) -> int:
        return self.weights + self.prepared + self.kv_cache + self.activations + OVERHEAD_BYTES


def estimate(configs: list[dict], dtype: torch.dtype, tokens: int, batch: int = 1) -> Need:
    """Memory for the models of `configs` (target and draft) in `dtype`, over `tokens` of context per row."""
    if tokens < 1 or batch < 1:
        raise ValueError(f"tokens and batch must be >= 1; got {tokens}, {batch}")
    size = torch.empty((), dtype=dtype).element_size()
    return Need(
        weights=sum(params_from_config(c) for c in configs) * size,
        prepared=sum(prepared_params(c) for c in configs) * size,
        kv_cache=sum(kv_cache_bytes(c, tokens, batch, size) for c in configs),
        activations=max(activation_bytes(c, tokens, batch, size) for c in configs),
    )


def free_bytes(device: torch.device | str = "cuda") -> int | None:
    """Free memory on a CUDA device (None where there is no CUDA: the check does not apply)."""
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    free, _total = torch.cuda.mem_get_info(device)
    return int(free)


def refusal(label: str, need: Need, free: int | None, dtype: torch.dtype, tokens: int) -> str | None:
    """One line saying why `label` will not be loaded, or None when it fits (or there is no GPU to check)."""
    if free is None or need.total <= free:
        return None
    dtype_name = str(dtype).replace("torch.", "")
    return (
        f"The model pair '{label}' needs about {need.total / GIB:.1f} GiB of GPU memory "
        f"(weights {(need.weights + need.prepared) / GIB:.1f} GiB in {dtype_name} with their prepared copy, plus KV cache and "
        f"activations for a "
        f"{tokens}-token sequence); this GPU has {free / GIB:.1f} GiB free. Choose a smaller pair or a GPU with more memory."
    )
