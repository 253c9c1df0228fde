"""The fast decode pass: fused projections over the static KV buffers, compiled once per shape bucket.

Why: at batch 1 a decode pass of SmolLM2-135M is ~1,200 small operations (30 layers x about 40),
each dispatched from Python; measured on the 2-core build CPU the eager lean pass reached 16-19% of
the probed copy bandwidth (issue 31). Three steps remove most of that:
- one QKV projection and one gate-up projection per layer: the weights concatenated once at load (`fuse`),
  the model's own q/k/v and gate/up parameters rebound to row views of them, so nothing is stored twice
  and transformers' forward still reads the same values;
- static shapes: keys/values written into the preallocated buffers (engine/model/static_cache.py) and
  attention over a bucketed window with a boolean mask, so one compiled program serves every pass of a
  bucket;
- `torch.compile` (Inductor) of the whole pass (all layers in one graph; RMSNorm, residual adds, RoPE and
  SiLU x up fused into a few C++/Triton loops). On CUDA with mode="reduce-overhead" it replays as a CUDA
  graph. Compiled programs live in Inductor's on-disk cache (TORCHINDUCTOR_CACHE_DIR, set under the
  SpecLab cache folder by `configure_compile_cache`), so a restarted process loads them instead of
  compiling again.

Numerics: the same ops in the same order and dtype as engine/model/fastllama.py; a fused projection
computes the same dot products as the three separate ones. Compiled float32 output agrees with the eager
pass to ~1e-5 and greedy decoding gives the same tokens (tests/engine/test_fastpass.py on a tiny Llama).

`SPECLAB_FAST`: "0" off, "eager" (fused, not compiled; the default on the CPU), "1" (fused and compiled).
See `fast_mode`.
"""

from __future__ import annotations

import functools
import os
import time

import torch
import torch.nn.functional as F

from engine.model.fastllama import attend, rms_norm, rotate_half

FAST_MODES = ("off", "eager", "compiled")


def _torch_default_dir() -> str | None:
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:
        return None
    return os.path.abspath(default_cache_dir())


_TORCH_DEFAULT_DIR = _torch_default_dir()


def fast_mode(device=None) -> str:
    """SPECLAB_FAST: "0"/"off" -> off; "eager" -> fused eager; "1"/"on"/"compiled" -> fused and compiled.

    Unset: "eager" on the CPU (the default since it was measured faster there and is exact in float32:
    docs/measurements.md, "the fast decode pass"), "off" on other devices (`device`: where the pass runs;
    None counts as the CPU). The fused eager pass was never run on a GPU: there CUDA graphs
    (cuda_graphs="auto") are the measured way to remove the per-op overhead."""
    value = os.environ.get("SPECLAB_FAST", "").strip().lower()
    if value == "":
        on_cpu = device is None or torch.device(device).type == "cpu"
        return "eager" if on_cpu else "off"
    if value in ("0", "off"):
        return "off"
    if value == "eager":
        return "eager"
    if value in ("1", "on", "compiled"):
        return "compiled"
    raise ValueError(f"SPECLAB_FAST must be 0, eager or 1; got {value!r}")


def configure_compile_cache() -> str:
    """Point Inductor's on-disk cache at $SPECLAB_CACHE/inductor (unless TORCHINDUCTOR_CACHE_DIR is set)."""
    from engine.model.pair import cache_dir

    path = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not path or path == _TORCH_DEFAULT_DIR:  # unset, or set to its default by torch itself
        path = str(cache_dir() / "inductor")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
    import torch._dynamo
    import torch._inductor.config as inductor

    inductor.fx_graph_cache = True
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    torch._dynamo.config.accumulated_recompile_limit = max(torch._dynamo.config.accumulated_recompile_limit, 512)
    return path


def fuse(lean) -> list[tuple]:
    """Per layer (ln1, wqkv, wo, ln2, wgu, wd), built once per LeanLlama and kept on it.

    For a LeanLlama over a transformers model the model's q/k/v and gate/up weights become row views of the
    concatenations (no second copy); a body-only LeanLlama (the EAGLE head) keeps its own, one layer."""
    fused = getattr(lean, "_fused", None)
    if fused is not None:
        return fused
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
    lean._fused = fused
    return fused


def linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """F.linear, or oneDNN's linear where `w` was prepacked (`packed`): the same bfloat16 output, bit for bit."""
    if w.is_mkldnn:
        return torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], "")
    return F.linear(x, w)


def packed(lean) -> list[tuple]:
    """`fuse`'s layers with their four matrices prepacked in oneDNN's blocked layout (a CPU in bfloat16), else
    `fuse`'s own. Measured on the 2-core build CPU (one thread, 2026-12-01): a one-token GEMV over the fused
    gate-up weight took 83 us prepacked against 195 us with F.linear, the output head 4.4 ms against 7.8 ms;
    the output is bit-identical. It costs a second copy of the matrices (the plain ones stay for the prefill
    and transformers' forward). Not for the compiled pass (Inductor takes plain tensors)."""
    cached = getattr(lean, "_packed", None)
    if cached is not None:
        return cached
    layers = fuse(lean)
    w = layers[0][1]
    if w.device.type == "cpu" and w.dtype == torch.bfloat16 and torch.backends.mkldnn.is_available():
        pack = functools.partial(torch.ops.mkldnn._reorder_linear_weight, batch_size=1)
        layers = [(ln1, pack(wqkv), pack(wo), ln2, pack(wgu), pack(wd)) for ln1, wqkv, wo, ln2, wgu, wd in layers]
    lean._packed = layers
    return layers


def packed_head(lean, head: torch.Tensor) -> torch.Tensor:
    """The output head prepacked as `packed` does (kept per head tensor: a draft may restrict its head)."""
    key, value = getattr(lean, "_packed_head", (None, None))
    if key is head:
        return value
    value = head
    if head.device.type == "cpu" and head.dtype == torch.bfloat16 and torch.backends.mkldnn.is_available():
        value = torch.ops.mkldnn._reorder_linear_weight(head, batch_size=1)
    lean._packed_head = (head, value)
    return value


def small_attend(q, k, v, mask, scale: float):
    """Attention of a few queries (a decode or verify pass) over a bucketed window, by hand: each kv head's
    query group as one (groups x n, window) score matrix, in float32, masked, softmax, times v. On the CPU
    SDPA's flash kernel costs ~3x this for one query over 256 columns (97 against 308 us, one thread)."""
    bsz, n_heads, n, d = q.shape
    n_kv, window = k.shape[1], k.shape[2]
    groups = n_heads // n_kv
    qg = q.reshape(bsz, n_kv, groups * n, d).float()  # heads j*groups..(j+1)*groups-1 share kv head j
    scores = (qg @ k.float().transpose(-1, -2)) * scale  # (B, kv, groups*n, window)
    if mask is not None:
        allowed = mask[:, :, None].expand(bsz, 1, groups, n, window).reshape(bsz, 1, groups * n, window)
        scores = scores.masked_fill(~allowed, float("-inf"))
    out = scores.softmax(-1) @ v.float()  # (B, kv, groups*n, d)
    return out.to(q.dtype).reshape(bsz, n_heads, n, d)


SMALL_ATTEND_QUERIES = 16  # at most this many new tokens per row: `small_attend` (CPU), else SDPA


def fast_layer(
    x, cos, sin, k_buf, v_buf, cols, mask, window: int, weights, n_heads: int, n_kv: int, head_dim: int, eps: float, scale: float
):
    """static_cache.static_layer with one QKV and one gate-up projection: the same arithmetic."""
    ln1, wqkv, wo, ln2, wgu, wd = weights
    bsz, n, _ = x.shape
    h = rms_norm(x, ln1, eps)
    q, k, v = linear(h, wqkv).split([n_heads * head_dim, n_kv * head_dim, n_kv * head_dim], dim=-1)
    q = q.reshape(bsz, n, n_heads, head_dim).transpose(1, 2)
    k = k.reshape(bsz, n, n_kv, head_dim).transpose(1, 2)
    v = v.reshape(bsz, n, n_kv, head_dim).transpose(1, 2)
    q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    k_buf[:bsz].index_copy_(2, cols, k)
    v_buf[:bsz].index_copy_(2, cols, v)
    k, v = k_buf[:bsz, :, :window], v_buf[:bsz, :, :window]
    if x.device.type == "cpu" and n <= SMALL_ATTEND_QUERIES:
        a = small_attend(q, k, v, mask, scale)
    else:
        a = attend(q, k, v, mask, False, scale)  # (bsz, H, n, d)
    x = x + linear(a.transpose(1, 2).reshape(bsz, n, -1), wo)
    gate, up = linear(rms_norm(x, ln2, eps), wgu).chunk(2, dim=-1)
    return x + linear(F.silu(gate) * up, wd)


def fast_body(x, positions, mask, cols, inv_freq, k_bufs, v_bufs, layers, window: int, dims: tuple, layer=None, collect=(), into=None):
    """All decoder layers over the buffers; returns the last layer's output. One graph when the whole pass
    is compiled; `layer`: the compiled decoder layer, called once per layer (SPECLAB_FAST_SCOPE=layer).
    The outputs of the layers in `collect` are appended to the list `into` (EAGLE-3 fusion)."""
    layer = layer or fast_layer
    dtype = x.dtype
    freqs = positions[..., None].float() * inv_freq  # (B, n, dim/2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos().to(dtype)[:, None]
    sin = emb.sin().to(dtype)[:, None]
    for i, (weights, k_buf, v_buf) in enumerate(zip(layers, k_bufs, v_bufs)):
        x = layer(x, cos, sin, k_buf, v_buf, cols, mask, window, weights, *dims)
        if i in collect:
            into.append(x)
    return x


def fast_llama_pass(
    x, positions, mask, cols, inv_freq, k_bufs, v_bufs, layers, final_norm, window: int, keep: int, dims: tuple, layer=None
):
    """A Llama's padded decode/verify pass without collected layers: the final-normed states of the kept positions."""
    eps = dims[3]
    x = fast_body(x, positions, mask, cols, inv_freq, k_bufs, v_bufs, layers, window, dims, layer)
    if keep:
        x = x[:, -keep:]
    return rms_norm(x, final_norm, eps)


def fast_hidden_pass(
    x, positions, mask, cols, inv_freq, k_bufs, v_bufs, layers, final_norm, window: int, keep: int, dims: tuple, collect=(), layer=None
):
    """As `fast_llama_pass` with the final hidden states of all positions too (EAGLE's features); with
    `collect` (layer indices, EAGLE-3) those layers' outputs come first: (B, n, H * (len(collect) + 1))."""
    eps = dims[3]
    collected: list[torch.Tensor] = []
    x = fast_body(x, positions, mask, cols, inv_freq, k_bufs, v_bufs, layers, window, dims, layer, collect, collected)
    final = rms_norm(x, final_norm, eps)
    hidden = torch.cat(collected + [final], dim=-1) if collect else final
    return (final[:, -keep:] if keep else final), hidden


class FastRunner:
    """Runs a StaticPass's padded passes fused, compiled per function (Inductor; reduce-overhead on CUDA).

    Compile time is kept apart (`take_capture_ms`, as GraphRunner's capture time) so the decode loop keeps it
    off the run's clock: the first pass of a new bucket pays it once per process, later processes load the
    compiled code from Inductor's disk cache."""

    _compiled: dict = {}  # (function, device type) -> compiled function, shared by every cache of the process

    def __init__(self, device: torch.device, compiled: bool):
        self.device = torch.device(device)
        self.compiled = compiled
        self.fallback: str | None = None
        self.reset()

    def reset(self) -> None:
        self.seen: set = set()
        self.captured = self.replays = self.eager_passes = 0
        self.capture_ms_total = 0.0
        self.graphs: dict = {}  # no CUDA graphs of its own (graph_meta counts GraphRunner's)
        self._capture_ms = 0.0

    def take_capture_ms(self) -> float:
        ms, self._capture_ms = self._capture_ms, 0.0
        return ms

    def capture_pending(self) -> int:
        """GraphRunner's hook after a warm-up pass; nothing is queued here (a bucket compiles in its first
        call, timed apart by `run`), so there is nothing to capture."""
        return 0

    def function(self, fn):
        if not self.compiled:
            return fn
        key = (fn, self.device.type)
        if key not in FastRunner._compiled:
            configure_compile_cache()
            mode = "reduce-overhead" if self.device.type == "cuda" else None
            FastRunner._compiled[key] = torch.compile(fn, dynamic=False, mode=mode)
        return FastRunner._compiled[key]

    def run(self, key, fn, args: tuple, kwargs: dict):
        """fn(*args, **kwargs), compiled; the first call of each bucket key is timed as compile time.
        SPECLAB_FAST_SCOPE=layer compiles the decoder layer alone (one small graph shared by every layer:
        a fraction of the compile time, one guarded call per layer); "pass" (default) the whole pass."""
        if not self.compiled:
            self.eager_passes += 1
            return fn(*args, **kwargs)
        if os.environ.get("SPECLAB_FAST_SCOPE", "pass") == "layer":
            compiled = functools.partial(fn, layer=self.function(fast_layer))
        else:
            compiled = self.function(fn)
        if key in self.seen:
            self.replays += 1
            out = compiled(*args, **kwargs)
            return out if self.device.type != "cuda" else _clone(out)  # a CUDA graph overwrites its outputs
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        t = time.perf_counter()
        out = compiled(*args, **kwargs)
        if self.device.type == "cuda":
            out = _clone(compiled(*args, **kwargs))  # reduce-overhead records its graph on a later call
            torch.cuda.synchronize(self.device)
        ms = (time.perf_counter() - t) * 1000
        self.seen.add(key)
        self.captured += 1
        self.capture_ms_total += ms
        self._capture_ms += ms
        return out


def _clone(out):
    if isinstance(out, tuple):
        return tuple(_clone(o) for o in out)
    return out.clone() if isinstance(out, torch.Tensor) else out
