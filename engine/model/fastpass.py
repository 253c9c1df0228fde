"""The fast decode pass: fused projections over the static KV buffers, eager; on the CPU (the default there) each
decoder layer of a small pass is one call into SpecLab's native kernels (engine/model/cpukernels.py).

Why: at batch 1 a decode pass of SmolLM2-135M is ~1,200 small operations (30 layers x about 40),
each dispatched from Python; measured on the 2-core build CPU the eager lean pass reached 16-19% of
the probed copy bandwidth (issue 31). What removes most of that:
- one QKV projection and one gate-up projection per layer: the weights concatenated once per model (`fuse`,
  kept on the model for every later run), the model's own q/k/v and gate/up parameters rebound to row views
  of them, so nothing is stored twice and transformers' forward still reads the same values; in bfloat16 on
  the CPU the matrices are also prepacked in oneDNN's layout (`packed`);
- per layer only what differs per layer: the RoPE tables (`rope_tables`) and the attention bias
  (`attention_bias`) are made once per pass, RoPE runs over the q and k heads together, the norm is
  F.rms_norm (`norm`);
- on the CPU the eager pass's buffers are float32 even for a bfloat16 model (StaticRaggedCache.prefill), so
  `small_attend` reads keys and values in float32 without converting the window in every layer, and it
  attends over exactly the live columns;
- the native kernels: one call per layer for passes of up to cpukernels.LAYER_TOKENS tokens (a one-token pass reads
  the weights at about the probed bandwidth: docs/measurements.md, "Passes on the CPU").

`torch.compile` of this pass was removed in issue 31: on the CPU it ran at about a third of the
native pass's speed (docs/measurements.md, "Passes on the CPU") and it was never run on a GPU, where CUDA graphs
(cuda_graphs="auto", engine/model/graphs.py) are the measured way to remove the per-op overhead.

The decoder layer is engine/model/layer.py's `decoder_layer`, the lean forward's own (engine/model/fastllama.py),
here over the static buffers (`buffer_store`); `fuse` prepares the fused weights every Python pass reads.

Numerics: the same ops in the same order and dtype as engine/model/fastllama.py, except attention's float32
score arithmetic in a small CPU pass (`small_attend`) (a bias added instead of a masked fill, the scale applied inside the product): a fused
projection computes the same dot products as the three separate ones, keys and values are rounded to the
model's dtype before they are stored. Float32 greedy decoding gives the same tokens as plain decoding and
transformers' generate() (tests/engine/test_fastpass.py on a tiny Llama); in bfloat16 the last bits of
the scores may round differently, so greedy tokens can differ from the eager path's.

Which pass runs is the backend's choice (engine/model/backend.py): "fused" runs this pass in torch ops, "native"
(the CPU's default) with the native kernels.
"""

from __future__ import annotations

import torch

from engine.model import cpukernels
from engine.model.layer import buffer_store, decoder_layer, norm, small_pass
from engine.model.pass_masks import attention_bias, rope_lookup, rope_tables


def fuse(lean) -> list[tuple]:
    """Per layer (ln1, wqkv, wo, ln2, wgu, wd), built once per model and kept on it (`_shared`).

    For a LeanLlama over a transformers model the model's q/k/v and gate/up weights become row views of the
    concatenations (no second copy); a body-only LeanLlama (the EAGLE head) keeps its own, one layer.
    A later LeanLlama over the same model (one per decode run) reuses them, and `packed`'s copies."""
    fused = getattr(lean, "_fused", None)
    if fused is not None:
        return fused
    shared = _shared(lean)
    if shared is not None:
        lean.layers, lean._fused = shared["views"], shared["fused"]
        lean._packed, lean._packed_head = shared.get("packed"), shared.get("packed_head", (None, None))
        lean._native, lean._native_head = shared.get("native"), shared.get("native_head", (None, None))
        return lean._fused
    fused, views = [], []
    for ln1, wq, wk, wv, wo, ln2, wg, wu, wd in lean.layers:
        wqkv = torch.cat([wq, wk, wv]).contiguous()
        wgu = torch.cat([wg, wu]).contiguous()
        fused.append((ln1, wqkv, wo, ln2, wgu, wd))
        nq, nk = wq.shape[0], wk.shape[0]
        views.append((ln1, wqkv[:nq], wqkv[nq : nq + nk], wqkv[nq + nk :], wo, ln2, wgu[: wg.shape[0]], wgu[wg.shape[0] :], wd))
    model = getattr(lean, "model", None)
    if model is not None:
        with torch.no_grad():
            for layer, (_, q, k, v, _, _, g, u, _) in zip(model.model.layers, views):
                attn, mlp = layer.self_attn, layer.mlp
                attn.q_proj.weight.data, attn.k_proj.weight.data, attn.v_proj.weight.data = q, k, v
                mlp.gate_proj.weight.data, mlp.up_proj.weight.data = g, u
        lean.layers = views  # the lean forward reads the same storage
        model._speclab_fused = {"fused": fused, "views": views}
    lean._fused = fused
    return fused


def _shared(lean) -> dict | None:
    """The model's fused weights from an earlier LeanLlama, if its q and gate weights still are views of them."""
    shared = getattr(getattr(lean, "model", None), "_speclab_fused", None)
    if shared is None or len(shared["fused"]) != len(lean.layers):
        return None
    for (_, wqkv, _, _, wgu, _), layer in zip(shared["fused"], lean.layers):
        if layer[1].data_ptr() != wqkv.data_ptr() or layer[6].data_ptr() != wgu.data_ptr():  # wq, wg
            return None
    return shared


def _keep(lean, name: str, value) -> None:
    """Store `value` on the lean model and, over a transformers model, for later LeanLlamas (`fuse`)."""
    setattr(lean, "_" + name, value)
    shared = getattr(getattr(lean, "model", None), "_speclab_fused", None)
    if shared is not None and shared["fused"] is getattr(lean, "_fused", None):
        shared[name] = value


def _onednn(w: torch.Tensor) -> bool:
    return w.device.type == "cpu" and w.dtype == torch.bfloat16 and torch.backends.mkldnn.is_available()


def packed(lean, native: bool = False) -> list[tuple]:
    """`fuse`'s layers with their four matrices prepacked in oneDNN's blocked layout (a CPU in bfloat16), else
    `fuse`'s own: a one-token GEMV streams the weights about twice as fast prepacked as through F.linear, with the
    same output bit for bit (docs/journal.md, "2026-12-01, evening · AMD EPYC, shared: the fused fast pass (issue
    31)"). It costs a second copy of the matrices (the plain ones stay for the prefill and transformers' forward).
    `native`: each matrix also in the native kernels' layout (cpukernels.Packed, a third copy), used for
    passes of up to cpukernels.LAYER_TOKENS tokens, the oneDNN copy beyond; as `packed` where the kernels
    are unavailable."""
    if native and not cpukernels.available():
        native = False
    name = "native" if native else "packed"
    cached = getattr(lean, "_" + name, None)
    if cached is not None:
        return cached
    layers = fuse(lean)
    if _onednn(layers[0][1]):
        layers = packed(lean) if native else [(ln1, _pack(a), _pack(b), ln2, _pack(c), _pack(d)) for ln1, a, b, ln2, c, d in layers]
    if native:  # plain matrices packed natively, the oneDNN (or plain) ones kept for larger passes
        layers = [
            (p[0], _native(p[1], q[1]), _native(p[2], q[2]), p[3], _native(p[4], q[4]), _native(p[5], q[5]))
            for p, q in zip(fuse(lean), layers)
        ]
    _keep(lean, name, layers)
    return layers


def _pack(w: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(w, batch_size=1)


def _native(w: torch.Tensor, fallback: torch.Tensor, max_tokens: int | None = None):
    max_tokens = cpukernels.LAYER_TOKENS if max_tokens is None else max_tokens
    return cpukernels.Packed(w, fallback, max_tokens) if cpukernels.supports(w) else fallback


def packed_head(lean, head: torch.Tensor, native: bool = False):
    """The output head prepacked as `packed` does (kept per head tensor: a draft may restrict its head);
    `native`: in the native layout too, natively for up to cpukernels.HEAD_TOKENS tokens."""
    native = native and cpukernels.available()
    name = "native_head" if native else "packed_head"
    key, value = getattr(lean, "_" + name, (None, None))
    if key is head:
        return value
    value = packed_head(lean, head) if native else (_pack(head) if _onednn(head) else head)
    if native:
        value = _native(head, value, cpukernels.HEAD_TOKENS)
    _keep(lean, name, (head, value))
    return value


def norm_out(x: torch.Tensor, weight: torch.Tensor, eps: float, layers) -> torch.Tensor:
    """A pass's final `norm`; in the native pass (its layers hold natively packed matrices) one kernel call
    (cpukernels.rms_norm, the layer kernel's own norm arithmetic), else torch's."""
    out = cpukernels.rms_norm(x, weight, eps) if isinstance(layers[0][1], cpukernels.Packed) else None
    return norm(x, weight, eps) if out is None else out


def fast_body(x, positions, mask, cols, inv_freq, k_bufs, v_bufs, layers, window: int, dims: tuple, collect=(), into=None):
    """All decoder layers over the buffers; returns the last layer's output: one native call per layer where
    `cpukernels.layer_ready`, else engine/model/layer.py's `decoder_layer` over the buffers. The outputs of the
    layers in `collect` are appended to the list `into` (EAGLE-3 fusion). What every layer shares is made here
    once: the RoPE tables and the attention bias."""
    native = cpukernels.layer_ready(x, layers[0], k_bufs[0], dims[2])
    n_heads, n_kv = dims[0], dims[1]
    cos, sin = rope_lookup(positions, inv_freq, x.dtype) if native else rope_tables(positions, inv_freq, x.dtype)
    if (native or small_pass(x)) and mask.dtype == torch.bool:  # else `pass_bias` made the bias already
        mask = attention_bias(mask, n_kv, n_heads // n_kv)
    if native:  # one native call per layer, x updated in place (engine/model/cpukernels.py); the bias made contiguous once
        # cols are the window's last n columns (StaticRaggedCache._fast)
        x, col0, mask = x.contiguous().clone(), window - x.shape[1], mask.contiguous()
    for i, (weights, k_buf, v_buf) in enumerate(zip(layers, k_bufs, v_bufs)):
        if native:
            cpukernels.layer(x, cos, sin, k_buf, v_buf, col0, window, mask, weights, *dims)
        else:
            x = decoder_layer(x, cos, sin, buffer_store(k_buf, v_buf, cols, window), mask, weights, *dims)
        if i in collect:
            into.append(x.clone() if native else x)
    return x


def fast_llama_pass(x, positions, mask, cols, inv_freq, k_bufs, v_bufs, layers, final_norm, window: int, keep: int, dims: tuple):
    """A Llama's padded decode/verify pass without collected layers: the final-normed states of the kept positions."""
    eps = dims[3]
    x = fast_body(x, positions, mask, cols, inv_freq, k_bufs, v_bufs, layers, window, dims)
    if keep:
        x = x[:, -keep:]
    return norm_out(x, final_norm, eps, layers)


def fast_hidden_pass(
    x, positions, mask, cols, inv_freq, k_bufs, v_bufs, layers, final_norm, window: int, keep: int, dims: tuple, collect=()
):
    """As `fast_llama_pass` with the final hidden states of all positions too (EAGLE's features); with
    `collect` (layer indices, EAGLE-3) those layers' outputs come first: (B, n, H * (len(collect) + 1))."""
    eps = dims[3]
    collected: list[torch.Tensor] = []
    x = fast_body(x, positions, mask, cols, inv_freq, k_bufs, v_bufs, layers, window, dims, collect, collected)
    final = norm_out(x, final_norm, eps, layers)
    hidden = torch.cat(collected + [final], dim=-1) if collect else final
    return (final[:, -keep:] if keep else final), hidden


class FastRunner:
    """Runs a StaticPass's fused passes eagerly, in the interface of engine/model/graphs.py's GraphRunner (which
    the static caches of the other modes use), so the decode loop and the trace treat every cache alike: no
    graphs, no capture time, every pass counted as an eager one."""

    def __init__(self, device: torch.device):
        self.device = torch.device(device)
        self.fallback: str | None = None
        self.reset()

    def reset(self) -> None:
        self.captured = self.replays = self.eager_passes = 0
        self.capture_ms_total = 0.0
        self.graphs: dict = {}  # no CUDA graphs of its own (graph_meta counts GraphRunner's)

    def take_capture_ms(self) -> float:
        return 0.0

    def capture_pending(self) -> int:
        """GraphRunner's hook after a warm-up pass: nothing is ever queued here."""
        return 0

    def run(self, key, fn, args: tuple, kwargs: dict):
        """fn(*args, **kwargs); `key` (the pass's shape) is GraphRunner's and unused here."""
        self.eager_passes += 1
        return fn(*args, **kwargs)
