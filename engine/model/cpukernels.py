"""SpecLab's native CPU kernels (engine/model/cpu_kernels.c): built once per machine, loaded with ctypes.

The small matrix products of a decode or verify pass (a few tokens times every weight matrix) are where a
CPU decode pass spends most of its time; oneDNN's linear reads the weights at well under the machine's copy
bandwidth for one token, these kernels at about that bandwidth (docs/measurements.md, "Passes on the CPU"; how
they got there: docs/journal.md, "SpecLab's native kernels"). `Packed` holds one weight matrix in the kernels'
layout and multiplies it with up to `max_tokens` token vectors natively, more through its fallback (the
oneDNN-prepacked or plain matrix, whichever the pass had before), both through engine/model/layer.py's `linear`.

Building: `gcc -O3 -march=native -fopenmp -shared` into $SPECLAB_CACHE/kernels/, keyed by the source, the
compiler and this CPU's flags, so a restarted app loads the library in milliseconds. No compiler or no AVX-512:
`why_not()` says why, and the CPU's default backend is "fused" instead of "native" (engine/model/backend.py, the
one module that decides whether the kernels are used; nothing else calls this module's operations directly).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import mmap
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import torch

from engine.formats import cache_dir
from engine.model import cpu_abi

SOURCE = Path(__file__).with_name("cpu_kernels.c")
FLAGS = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC"]
# Tokens per pass (batch x new tokens) the native kernels take; oneDNN's prepacked GEMM beyond: with weights cold
# the native products measured faster than oneDNN's up to 48 tokens (the layer matrices and the output head), the
# layer matrices slower at 96 (docs/journal.md, "the pass past 8 tokens, trees back in the race").
LAYER_TOKENS = 48  # a layer matrix, and the native decoder layer (its attention too): up to this many tokens
HEAD_TOKENS = 48  # the output head (49152 rows)

_lock = threading.Lock()
_state: dict = {}


def _cpu_key() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    lines = [line for line in text.splitlines() if line.startswith(("flags", "model name"))]
    return "\n".join(sorted(set(lines)))


def _build(compiler: str) -> Path:
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    key = hashlib.sha256("\0".join([SOURCE.read_text(), " ".join(FLAGS), version, _cpu_key()]).encode()).hexdigest()[:16]
    folder = cache_dir() / "kernels"
    target = folder / f"speclab-cpu-{key}.so"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:  # built aside, then renamed: two apps may start at once
        out = Path(tmp) / target.name
        done = subprocess.run([compiler, *FLAGS, str(SOURCE), "-o", str(out)], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["no message"])[0]
            raise OSError(f"the compiler failed: {first}")
        os.replace(out, target)
    return target


def _load():
    compiler = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        return None, "no C compiler (gcc) on this machine"
    try:
        lib = cpu_abi.bind(ctypes.CDLL(str(_build(compiler))))  # every function typed from cpu_abi.SIGNATURES
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"the native kernels did not build: {exc}"
    except AttributeError as exc:  # a function of the table the library does not export
        return None, f"the native kernels lack a function: {exc}"
    return lib, None


# What makes the native pass, besides the kernels: the Python that lays out their weights and drives them (the pass,
# its route, and the static cache that chooses the route and decides the pass's padding and mask).
PASS_SOURCES = ("cpukernels.py", "prepared.py", "passes.py", "fastpass.py", "static_cache.py", "layer.py", "pass_masks.py")


@functools.lru_cache(maxsize=1)
def fingerprint() -> str:
    """A short hash of the native pass's source (the kernels and PASS_SOURCES): measurements of the native pass (pass
    curves) are keyed by it, so a change to how the pass runs measures its curve again. The kernels' source alone
    misses changes around them (where the packed weights live, which route a pass takes), after which a stored curve
    keeps a knee the pass no longer has and goodput cuts its trees to fit it (docs/journal.md, "Code history moved out of engine/")."""
    digest = hashlib.sha256(SOURCE.read_bytes())
    for name in PASS_SOURCES:
        digest.update(SOURCE.with_name(name).read_bytes())
    return digest.hexdigest()[:8]


def library():
    """The loaded library, or None (`why_not` says why); built or loaded once per process."""
    with _lock:
        if "lib" not in _state:
            _state["lib"], _state["why"] = _load()
        return _state["lib"]


def why_not() -> str | None:
    """None when the kernels are loaded, else one line saying why not."""
    return None if library() is not None else _state["why"]


def available() -> bool:
    return library() is not None


def supports(w: torch.Tensor) -> bool:
    """Whether `w` (N x K) can be packed: a CPU matrix in bfloat16 (K even) or float32."""
    if w.device.type != "cpu" or w.dim() != 2:
        return False
    return w.dtype == torch.float32 or (w.dtype == torch.bfloat16 and w.shape[1] % 2 == 0)


HUGE_PAGE = 2 << 20  # a transparent huge page on x86-64 Linux: a `weight_memory` block starts at a multiple of it


def packed_bytes(n: int, k: int, dtype: torch.dtype) -> int:
    """Bytes `Packed` takes of a block for an N x K matrix: N rounded up to 16 rows, the whole rounded up to a page."""
    size = -(-n // 16) * 16 * k * dtype.itemsize
    return -(-size // mmap.PAGESIZE) * mmap.PAGESIZE


def weight_memory(nbytes: int) -> torch.Tensor:
    """`nbytes` of fresh memory (a uint8 tensor) for packed matrices that every pass streams: an anonymous mapping of
    its own, its start aligned to HUGE_PAGE, transparent huge pages asked for (MADV_HUGEPAGE, where the OS has it)
    before a page of it is touched. Why not torch.empty per matrix: where each copy landed then depended on what
    the process had freed before (holes the weights' loading left in the heap), and the layers packed there ran
    slower, every pass; in huge pages every layer ran as fast as the best placed (docs/engine.md, "Prepared
    weights"). At most one huge page more than asked for is ever touched; the mapping goes with the tensor."""
    size = -(-max(nbytes, 1) // HUGE_PAGE) * HUGE_PAGE
    if not hasattr(mmap, "MAP_PRIVATE"):  # not a POSIX system: the allocator's memory, aligned all the same
        block = torch.empty(size + HUGE_PAGE, dtype=torch.uint8)
        start = -block.data_ptr() % HUGE_PAGE
        return block[start : start + nbytes]
    mapping = mmap.mmap(-1, size + HUGE_PAGE, flags=mmap.MAP_PRIVATE)  # private: not shared memory, nor with a child
    block = torch.frombuffer(mapping, dtype=torch.uint8)  # holds the mapping
    start = -block.data_ptr() % HUGE_PAGE
    if hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            mapping.madvise(mmap.MADV_HUGEPAGE, start, size)
        except OSError:  # a kernel without transparent huge pages: the same memory in small pages
            pass
    return block[start : start + nbytes]


class Packed:
    """One weight matrix W (N x K) in the kernels' layout; engine/model/layer.py's `linear(x, packed)` is F.linear(x, W)
    for x (..., K).

    Up to `max_tokens` rows of x natively (`native`; engine/model/prepared.py packs for any number); more, or an x the
    kernels do not take, through `fallback`, which `linear` multiplies by: the plain W, a oneDNN-prepacked matrix, or a
    tuple of W's row blocks (a model's own q, k and v matrices), whose products are concatenated. The packed
    copy is N rounded up to 16 rows, in its own memory or, given `memory`, in that uint8 tensor of at least
    `packed_bytes` (a slice of a `weight_memory` block that holds a model's matrices, engine/model/prepared.py)."""

    def __init__(
        self, w: torch.Tensor, fallback: torch.Tensor | None = None, max_tokens: int = LAYER_TOKENS, memory: torch.Tensor | None = None
    ):
        lib = library()
        if lib is None or not supports(w):
            raise ValueError(f"cannot pack a {tuple(w.shape)} {w.dtype} matrix on {w.device}: {why_not() or 'unsupported'}")
        self.n, self.k = w.shape
        self.dtype = w.dtype
        self.max_tokens = max_tokens
        self.fallback = w if fallback is None else fallback
        w = w.contiguous()
        size = -(-self.n // 16) * 16 * self.k
        if memory is None:
            self.data = torch.empty(size, dtype=w.dtype)
        elif memory.dtype != torch.uint8 or memory.numel() < packed_bytes(self.n, self.k, w.dtype) or memory.data_ptr() % 64:
            need = packed_bytes(self.n, self.k, w.dtype)
            raise ValueError(f"a packed {tuple(w.shape)} {w.dtype} matrix needs uint8 memory of {need} bytes at a 64-byte address")
        else:
            self.data = memory[: size * w.element_size()].view(w.dtype)
        pack = lib.pack_bf16 if w.dtype == torch.bfloat16 else lib.pack_f32
        pack(w.data_ptr(), self.data.data_ptr(), self.k, self.n)
        self._gemm = lib.gemm_bf16 if w.dtype == torch.bfloat16 else lib.gemm_f32
        self.checked: tuple | None = None  # cpu_abi.check_layer's verdict on the layer this matrix is the QKV of

    def native(self, x: torch.Tensor) -> torch.Tensor | None:
        """F.linear(x, W) natively, or None where the kernels do not take x (more than `max_tokens` rows, another
        dtype or device): engine/model/layer.py's `linear` then multiplies by `fallback`."""
        m = x.numel() // self.k if self.k else 0
        if m == 0 or m > self.max_tokens or x.dtype != self.dtype or x.device.type != "cpu":
            return None
        x = x.contiguous()
        y = torch.empty(*x.shape[:-1], self.n, dtype=self.dtype)
        self._gemm(x.data_ptr(), self.data.data_ptr(), y.data_ptr(), m, self.k, self.n, torch.get_num_threads())
        return y


MAX_HEAD_DIM = cpu_abi.MAX_HEAD_DIM  # the layer kernel keeps one head's vectors on the stack (cpu_kernels.c)


def layer_ready(x: torch.Tensor, weights: tuple, k_buf: torch.Tensor, head_dim: int) -> bool:
    """Whether `layer` can run this pass: the native matrices, at most LAYER_TOKENS tokens (and at most what
    each matrix was packed to take) in x's dtype, and buffers in float32 or x's dtype."""
    ln1, wqkv, wo, ln2, wgu, wd = weights
    packed = all(isinstance(w, Packed) for w in (wqkv, wo, wgu, wd))
    return (
        packed
        and ln1.dtype == ln2.dtype == x.dtype  # the kernel reads the norms' weights in x's dtype
        and x.shape[0] * x.shape[1] <= min([LAYER_TOKENS] + [w.max_tokens for w in (wqkv, wo, wgu, wd)])
        and x.dtype == wqkv.dtype
        and k_buf.dtype in (torch.float32, x.dtype)
        and k_buf.is_contiguous()
        and head_dim <= MAX_HEAD_DIM
    )


def layer(
    x,
    cos,
    sin,
    k_buf,
    v_buf,
    col0: int,
    window: int,
    bias,
    weights: tuple,
    n_heads: int,
    n_kv: int,
    head_dim: int,
    eps: float,
    scale: float,
):
    """One decoder layer of a small pass in one native call, x (B, n, H) updated in place (cpu_kernels.c,
    layer_forward): layer.decoder_layer's arithmetic with `attention`'s float32 attention. cos, sin:
    pass_masks.rope_tables; bias: pass_masks.attention_bias; the new keys and values go to buffer columns
    col0 .. col0 + n - 1; attention reads columns 0 .. window - 1. `layer_ready` must hold; what else the kernel
    needs of its arguments is checked first (cpu_abi.check_layer: a one-line ValueError or TypeError, no crash)."""
    cos, sin, bias, bsz, n, hidden = cpu_abi.check_layer(x, cos, sin, k_buf, v_buf, col0, window, bias, weights, n_heads, n_kv, head_dim)
    ln1, wqkv, wo, ln2, wgu, wd = weights
    (_state.get("lib") or library()).layer_forward(  # loaded already: its matrices were packed by it
        x.data_ptr(),
        bsz,
        n,
        hidden,
        int(x.dtype == torch.bfloat16),
        cos.data_ptr(),
        sin.data_ptr(),
        k_buf.data_ptr(),
        v_buf.data_ptr(),
        int(k_buf.dtype == torch.bfloat16),
        k_buf.shape[2],
        col0,
        window,
        bias.data_ptr(),
        ln1.data_ptr(),
        wqkv.data.data_ptr(),
        wo.data.data_ptr(),
        ln2.data_ptr(),
        wgu.data.data_ptr(),
        wd.data.data_ptr(),
        n_heads,
        n_kv,
        head_dim,
        wd.k,
        eps,
        scale,
        torch.get_num_threads(),
    )
    return x


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor | None:
    """layer.small_attend natively (cpu_kernels.c, attention: each key and value column read once per row and kv head
    for all its queries, an online softmax in float32): q (B, n, H, d) in bfloat16 or float32, its rows contiguous
    (a slice of the heads is fine); k, v (B, kv, window, d) views of (rows, kv, capacity, d) buffers, in float32 or
    q's dtype; bias: pass_masks.attention_bias. Returns (B, n, H * d) in q's dtype, or None where the kernels are
    unavailable or the tensors are of another kind (the caller then uses torch)."""
    lib = library()
    if lib is None or q.dim() != 4 or k.dim() != 4 or q.device.type != "cpu" or q.dtype not in (torch.bfloat16, torch.float32):
        return None
    bsz, n, n_heads, d = q.shape
    _, n_kv, window, _ = k.shape
    cap = k.stride(1) // d if d else 0
    rows_ok = q.stride(3) == 1 and q.stride(2) == d and q.stride(0) == n * q.stride(1)
    kv_ok = all(t.stride()[1:] == (cap * d, d, 1) and t.stride(0) == n_kv * cap * d for t in (k, v)) and v.shape == k.shape
    bias = bias.contiguous()
    if (
        not rows_ok
        or not kv_ok
        or k.dtype not in (torch.float32, q.dtype)
        or v.dtype != k.dtype
        or bias.dtype != torch.float32
        or bias.numel() != bsz * n_heads * n * window
        or not 0 < d <= MAX_HEAD_DIM
        or n_kv == 0
        or n_heads % n_kv
        or window > cap
    ):
        return None
    out = torch.empty(bsz, n, n_heads * d, dtype=q.dtype)
    if out.numel():
        bf, kvbf = int(q.dtype == torch.bfloat16), int(k.dtype == torch.bfloat16)
        args = (q.data_ptr(), q.stride(1), bf, k.data_ptr(), v.data_ptr(), kvbf, cap, bias.data_ptr(), window, bsz, n)
        lib.attention(*args, n_heads, n_kv, d, scale, out.data_ptr(), torch.get_num_threads())
    return out


def _logit_rows(logits: torch.Tensor):
    """(library, contiguous logits, rows, bf flag) for a native call over the last dimension of CPU logits in
    bfloat16 or float32; None where the kernels are unavailable or the tensor is of another kind (torch's way)."""
    if logits.device.type != "cpu" or logits.dtype not in (torch.bfloat16, torch.float32) or logits.dim() == 0 or logits.shape[-1] == 0:
        return None
    lib = library()
    if lib is None:
        return None
    x = logits.contiguous()
    return lib, x, x.numel() // x.shape[-1], int(x.dtype == torch.bfloat16)


def logit_stats(logits: torch.Tensor, top: bool = False) -> tuple[torch.Tensor, ...] | None:
    """(argmax (...,) long, log-sum-exp (...,) float32) over the last dimension of CPU logits in bfloat16 or
    float32, natively in one call (cpu_kernels.c, logit_stats): the first maximum as max(dim).indices, and
    torch.logsumexp(logits.float(), -1) to within float32 rounding; with `top` also the maximum itself (...,) float32,
    exactly the logit at the argmax as logits.gather(...).float() reads it. None where the kernels are unavailable
    or the tensor is of another kind: the caller then uses torch (engine/sampling.py, greedy_stats)."""
    native = _logit_rows(logits)
    if native is None:
        return None
    lib, x, rows, bf = native
    ids = torch.empty(x.shape[:-1], dtype=torch.long)
    logz = torch.empty(x.shape[:-1], dtype=torch.float32)
    best = torch.empty(x.shape[:-1], dtype=torch.float32) if top else None
    if rows:
        at = best.data_ptr() if top else None  # NULL: the kernel writes no maximum
        lib.logit_stats(x.data_ptr(), rows, x.shape[-1], bf, ids.data_ptr(), logz.data_ptr(), at, torch.get_num_threads())
    return (ids, logz, best) if top else (ids, logz)


TOPK_MAX = 64  # topk_logq's list lives on the stack


def topk_logq(logits: torch.Tensor, k: int, temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(log q (..., k) float32, ids (..., k) long): `torch.log_softmax(logits.float() / temperature, -1).topk(k)`
    natively in one call (cpu_kernels.c, topk_logq), best first, ties to the lower index; log q to within float32
    rounding. None where the kernels are unavailable, the tensor is of another kind or k is out of 1..TOPK_MAX:
    the caller uses torch (engine/drafters/tree.py, TreeBuilder._children). The logits must hold no NaN."""
    native = _logit_rows(logits) if logits.dim() and 1 <= k <= min(TOPK_MAX, logits.shape[-1]) and temperature > 0 else None
    if native is None:
        return None
    lib, x, rows, bf = native
    ids = torch.empty(*x.shape[:-1], k, dtype=torch.long)
    logq = torch.empty(*x.shape[:-1], k, dtype=torch.float32)
    if rows:
        lib.topk_logq(x.data_ptr(), rows, x.shape[-1], bf, k, 1.0 / temperature, ids.data_ptr(), logq.data_ptr(), torch.get_num_threads())
    return logq, ids


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor | None:
    """engine/model/layer.norm (weight * F.rms_norm(x.float()).to(x.dtype)) in one native call, the
    arithmetic the layer kernel uses for its own norms (float32 sum of squares in another order; the
    normalised value rounded to x's dtype, then the rounded product). None where the kernels are unavailable
    or the tensors are of another kind: the caller uses torch's four ops (several times slower over one row)."""
    if x.device.type != "cpu" or x.dtype not in (torch.bfloat16, torch.float32) or weight.dtype != x.dtype or x.shape[-1] != weight.numel():
        return None
    lib = library()
    if lib is None:
        return None
    x, weight = x.contiguous(), weight.contiguous()
    out = torch.empty_like(x)
    rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
    if rows:
        lib.rms_norm(x.data_ptr(), weight.data_ptr(), out.data_ptr(), rows, x.shape[-1], eps, int(x.dtype == torch.bfloat16))
    return out
