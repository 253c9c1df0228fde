"""The one Python decoder layer of SpecLab's own Llama passes, and the pieces it is made of.

`decoder_layer` is a Llama decoder layer (RMSNorm, one fused QKV product, RoPE, attention, one output product
into the residual, RMSNorm, one fused gate-up product, SwiGLU, the down product into the residual) over the
prepared weights (engine/model/prepared.py: ln1, wqkv, wo, ln2, wgu, wd). What differs between the passes
that run it is a parameter, not another copy of the layer:
- where the new keys and values go and what attention reads (`store`): the dynamic cache's layer, grown by
  concatenation (`cache_store`: the "torch" backend, engine/model/fastllama.py), or the static buffers, written
  at their columns and read over a window (`buffer_store`: "fused", the Python layers of "native", and
  "cuda_graphs", engine/model/fastpass.py and engine/model/static_cache.py);
- how attention is computed (`mask`): a boolean mask (or None) goes to SDPA (`attend`); the float bias a small
  CPU pass makes once (pass_masks.attention_bias) goes to `small_attend`, which reads the buffers in float32.
The native C layer (engine/model/cpu_kernels.c, layer_forward) computes the same arithmetic in one call; transformers'
own layer stays the exactness oracle (the "transformers" backend).

Numerics: the arithmetic of transformers' LlamaDecoderLayer in the model's dtype (RMSNorm in float32, default RoPE),
with the three q/k/v products and the two gate/up products each done as one product over the concatenated matrix
(the same dot products); keys and values are rounded to the model's dtype before they are stored.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.model import cpukernels
from engine.model.pass_masks import SMALL_ATTEND_QUERIES, rope


def attend(q, k, v, mask, is_causal: bool, scale: float):
    """Scaled dot-product attention of q (B, H, n, d) over k, v (B, H_kv, T, d) with grouped-query heads.
    SDPA's own GQA path (`enable_gqa`) without a mask, and with a mask on the CPU, whose flash kernel
    takes both: the same output bit for bit as expanding the kv heads (a test checks it), and the
    expansion copies every layer's keys and values (docs/journal.md, "Code history moved out of engine/"). Elsewhere a mask gets the kv
    heads expanded to H: CUDA's fused kernels may not take `enable_gqa` with a mask and would silently drop to
    the math kernel (transformers checks the same, huggingface/transformers#39412)."""
    bsz, n_heads, _, head_dim = q.shape
    n_kv, total = k.shape[1], k.shape[2]
    groups = n_heads // n_kv
    if groups > 1 and (mask is None or q.device.type == "cpu"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale, enable_gqa=True)
    if groups > 1:
        k = k[:, :, None].expand(bsz, n_kv, groups, total, head_dim).reshape(bsz, n_heads, total, head_dim)
        v = v[:, :, None].expand(bsz, n_kv, groups, total, head_dim).reshape(bsz, n_heads, total, head_dim)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale)


def norm(x: torch.Tensor, weight: torch.Tensor, eps: float, native: bool = False) -> torch.Tensor:
    """LlamaRMSNorm: normalise in float32, scale in the model's dtype. F.rms_norm over the float32 copy is the
    arithmetic of transformers' own norm, bit for bit (tests/engine/test_fastpass.py). `native` (a pass whose layers
    hold natively packed matrices): one kernel call where it takes the tensors (cpukernels.rms_norm, the layer
    kernel's own norm arithmetic), else the same four ops."""
    out = cpukernels.rms_norm(x, weight, eps) if native else None
    return weight * F.rms_norm(x.float(), weight.shape, eps=eps).to(x.dtype) if out is None else out


def linear(x: torch.Tensor, w, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x @ w.T (+ bias) for every form a prepared matrix takes (engine/model/prepared.py): a plain tensor (F.linear);
    a oneDNN-prepacked one (the "fused" backend's form in bfloat16 on a CPU: oneDNN's linear, the same bfloat16 output
    bit for bit); a cpukernels.Packed (the "native" backend's form: the native kernel where it takes x, else its
    fallback); a tuple of a matrix's row blocks (a model's own q, k and v: one product each, concatenated)."""
    if isinstance(w, cpukernels.Packed):
        y = w.native(x)
        y = linear(x, w.fallback) if y is None else y
    elif isinstance(w, tuple):
        y = torch.cat([F.linear(x, part) for part in w], dim=-1)
    elif w.is_mkldnn:
        y = torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], "")
    else:
        return F.linear(x, w, bias)
    if bias is None:
        return y
    return y.add_(bias) if bias.dtype == y.dtype else y + bias  # y is this call's own: the sum in place


def small_pass(x) -> bool:
    """Whether a pass is small enough for `small_attend` (a CPU pass of at most SMALL_ATTEND_QUERIES tokens per row)."""
    return x.device.type == "cpu" and x.shape[1] <= SMALL_ATTEND_QUERIES


def small_attend(q, k, v, bias, scale: float, native: bool = False):
    """Attention of a few queries (a decode or verify pass) in float32: each kv head's query group as one
    (groups x n, window) score matrix, plus the pass's bias (`attention_bias`), softmax, times v.
    q: (B, n, H, d) in the model's dtype; k, v: (B, kv, window, d) views of the buffers (float32, or the model's
    dtype on the native route); returns (B, n, H * d) in q's dtype. `native` (a pass whose layers hold natively packed
    matrices): one kernel call (cpukernels.attention, the layer kernel's own attention), which reads each key and value
    once for all the queries of a kv head. Else by hand in torch: on the CPU SDPA's flash kernel costs several times
    this for one query over a few hundred columns (docs/journal.md, "Code history moved out of engine/")."""
    out = cpukernels.attention(q, k, v, bias, scale) if native else None
    if out is not None:
        return out
    k, v = k.float(), v.float()  # no copy of float32 buffers
    bsz, n, n_heads, d = q.shape
    n_kv, window = k.shape[1], k.shape[2]
    groups = n_heads // n_kv
    qg = torch.empty(bsz, n_kv, groups, n, d, dtype=torch.float32, device=q.device)
    qg.copy_(q.unflatten(2, (n_kv, groups)).permute(0, 2, 3, 1, 4))  # heads j*groups.. share kv head j
    scores = torch.baddbmm(bias, qg.view(bsz * n_kv, groups * n, d), k.reshape(bsz * n_kv, window, d).transpose(1, 2), alpha=scale)
    out = torch.bmm(scores.softmax(-1), v.reshape(bsz * n_kv, window, d))  # (B * kv, groups * n, d)
    a = torch.empty(bsz, n, n_kv, groups, d, dtype=q.dtype, device=q.device)
    return a.copy_(out.view(bsz, n_kv, groups, n, d).permute(0, 3, 1, 2, 4)).view(bsz, n, n_heads * d)


def cache_store(layer, past: int):
    """`decoder_layer`'s store over one layer of a transformers DynamicCache (RaggedCache's): the new keys and values
    (B, kv, n, d) appended to the layer's `past` columns; attention reads all of them."""

    def store(k, v):
        if past:
            k, v = torch.cat([layer.keys, k], dim=2), torch.cat([layer.values, v], dim=2)
        if not layer.is_initialized:
            layer.lazy_initialization(k, v)
        layer.keys, layer.values = k, v
        return k, v

    return store


def buffer_store(k_buf, v_buf, cols, window: int):
    """`decoder_layer`'s store over one layer's static buffers (rows, kv, capacity, d): the new keys and values
    written at columns `cols` of the first B rows (rounded to the model's dtype first, so float32 buffers under a
    bfloat16 model hold the same values); attention reads the first `window` columns."""

    def store(k, v):
        bsz = k.shape[0]
        k_buf[:bsz].index_copy_(2, cols, k.to(k_buf.dtype))
        v_buf[:bsz].index_copy_(2, cols, v.to(v_buf.dtype))
        return k_buf[:bsz, :, :window], v_buf[:bsz, :, :window]

    return store


def decoder_layer(x, cos, sin, store, mask, weights, n_heads: int, n_kv: int, head_dim: int, eps: float, scale: float, is_causal=False):
    """One decoder layer over x (B, n, hidden); returns its output. cos, sin: pass_masks.rope_tables (or
    rope_lookup); store: `cache_store` or `buffer_store`; mask: None or a boolean (B, 1, n, T) mask (SDPA, with
    `is_causal` when None), or `small_attend`'s float bias over the buffers' keys and values; weights: (ln1, wqkv,
    wo, ln2, wgu, wd), the matrices plain, oneDNN-prepacked or cpukernels.Packed (`linear`)."""
    ln1, wqkv, wo, ln2, wgu, wd = weights
    bsz, n, _ = x.shape
    qkv = linear(norm(x, ln1, eps), wqkv).view(bsz, n, n_heads + 2 * n_kv, head_dim)
    qk = rope(qkv[:, :, : n_heads + n_kv], cos, sin)  # (B, n, H + kv, d): q and k heads together
    k, v = store(qk[:, :, n_heads:].transpose(1, 2), qkv[:, :, n_heads + n_kv :].transpose(1, 2))  # (B, kv, T, d)
    if mask is not None and mask.dtype != torch.bool:  # a small CPU pass's bias over the buffers
        a = small_attend(qk[:, :, :n_heads], k, v, mask, scale, native=isinstance(wqkv, cpukernels.Packed))
    else:
        q = qk[:, :, :n_heads].transpose(1, 2)  # (B, H, n, d)
        a = attend(q, k.to(x.dtype), v.to(x.dtype), mask, is_causal, scale).transpose(1, 2).reshape(bsz, n, -1)
    x = x + linear(a, wo)
    gate, up = linear(norm(x, ln2, eps), wgu).chunk(2, dim=-1)
    return x + linear(F.silu(gate) * up, wd)
