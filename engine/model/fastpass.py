"""The fast decode pass: fused projections over the static KV buffers, eager; on the CPU (the default there) each
decoder layer of a small pass is one call into SpecLab's native kernels (engine/model/cpukernels.py).

Why: at batch 1 a decode pass of SmolLM2-135M is ~1,200 small operations (30 layers x about 40),
each dispatched from Python; measured on the 2-core build CPU the eager lean pass reached 16-19% of
the probed copy bandwidth (issue 31). What removes most of that:
- one QKV projection and one gate-up projection per layer, over the model's prepared weights
  (engine/model/prepared.py: made once per model at its first run on a backend and kept beside it, never in
  place of transformers' own parameters, which its forward, the exactness oracle, keeps reading): on "native"
  all four matrices in the kernels' layout, for passes of every size; on "fused" in bfloat16 on the CPU all four
  prepacked for oneDNN; at most one extra copy of a matrix per backend;
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
here over the static buffers (`buffer_store`); engine/model/prepared.py prepares the weights every pass reads.

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
