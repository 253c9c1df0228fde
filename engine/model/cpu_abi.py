"""The typed boundary between Python and SpecLab's native kernels (engine/model/cpu_kernels.c).

`SIGNATURES` is the one table of the library's exported functions: each argument's name (the C prototype's) and
ctypes type, in order. `bind` sets every foreign function's `argtypes` and `restype` from it, so ctypes converts
and type-checks each value, and wraps each one in a `NativeFunction`, which also refuses a wrong number of
arguments (ctypes passes surplus ones through unconverted, and a missing one would read garbage) and turns
ctypes' "argument 3: TypeError: wrong type" into a one-line TypeError that names the function and the argument.

What a pointer points at ctypes cannot see: engine/model/cpukernels.py checks each tensor before its address
crosses (dtype, device, contiguity, and the element count the kernel will read or write where that is cheap)
and raises a one-line ValueError instead of letting the kernel misread memory. tests/engine/test_cpukernels.py
checks this table against the C source's prototypes and the built library's exported symbols.
"""

from __future__ import annotations

import ctypes
import re

import torch

PTR, INT, INT64, FLOAT = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_float

_PACK = (("w", PTR), ("wp", PTR), ("K", INT), ("N", INT))
_GEMM = (("x", PTR), ("wp", PTR), ("y", PTR), ("M", INT), ("K", INT), ("N", INT), ("nthreads", INT))

# name -> ((argument, ctypes type), ...) in the C prototype's order; every function returns void (restype None).
SIGNATURES: dict[str, tuple[tuple[str, type], ...]] = {
    "pack_bf16": _PACK,
    "pack_f32": _PACK,
    "gemm_bf16": _GEMM,
    "gemm_f32": _GEMM,
    "layer_forward": (
        *(("x", PTR), ("B", INT), ("n", INT), ("H", INT), ("bf", INT)),
        *(("cos", PTR), ("sin", PTR), ("kbuf", PTR), ("vbuf", PTR), ("kvbf", INT), ("cap", INT), ("col0", INT), ("window", INT)),
        ("bias", PTR),
        *(("ln1", PTR), ("wqkv", PTR), ("wo", PTR), ("ln2", PTR), ("wgu", PTR), ("wd", PTR)),
        *(("n_heads", INT), ("n_kv", INT), ("d", INT), ("inter", INT), ("eps", FLOAT), ("scale", FLOAT), ("nthreads", INT)),
    ),
    "attention": (
        *(("q", PTR), ("qstride", INT64), ("bf", INT), ("k", PTR), ("v", PTR), ("kvbf", INT), ("cap", INT), ("bias", PTR)),
        *(("window", INT), ("B", INT), ("n", INT), ("n_heads", INT), ("n_kv", INT), ("d", INT), ("scale", FLOAT), ("out", PTR)),
        ("nthreads", INT),
    ),
    "logit_stats": (("x", PTR), ("rows", INT), ("V", INT64), ("bf", INT), ("ids", PTR), ("logz", PTR), ("top", PTR), ("nthreads", INT)),
    "topk_logq": (
        *(("x", PTR), ("rows", INT), ("V", INT64), ("bf", INT), ("k", INT)),
        *(("inv_t", FLOAT), ("ids", PTR), ("logq", PTR), ("nthreads", INT)),
    ),
    "rms_norm": (("x", PTR), ("w", PTR), ("out", PTR), ("M", INT), ("H", INT), ("eps", FLOAT), ("bf", INT)),
}

_CTYPE_NAMES = {PTR: "an address (int)", INT: "an int", INT64: "an int", FLOAT: "a float"}


class NativeFunction:
    """One exported function, called with exactly its table row's arguments, in order."""

    __slots__ = ("name", "args", "_fn")

    def __init__(self, cdll, name: str):
        fn = getattr(cdll, name)  # AttributeError where the library lacks it
        fn.argtypes = [ctype for _, ctype in SIGNATURES[name]]
        fn.restype = None
        self.name, self.args, self._fn = name, SIGNATURES[name], fn

    def __call__(self, *values):
        if len(values) != len(self.args):
            names = ", ".join(arg for arg, _ in self.args)
            raise TypeError(f"{self.name} takes {len(self.args)} arguments ({names}); got {len(values)}")
        try:
            return self._fn(*values)
        except ctypes.ArgumentError as exc:
            raise TypeError(self._wrong_type(exc, values)) from None

    def _wrong_type(self, exc: ctypes.ArgumentError, values: tuple) -> str:
        found = re.match(r"argument (\d+)", str(exc))
        if found is None:
            return f"{self.name}: {exc}"
        i = int(found.group(1)) - 1
        arg, ctype = self.args[i]
        return f"{self.name}: argument {i + 1} ({arg}) must be {_CTYPE_NAMES[ctype]}; got {type(values[i]).__name__} {values[i]!r:.60}"

    def __repr__(self) -> str:
        return f"NativeFunction({self.name}: {len(self.args)} arguments)"


class Library:
    """The loaded library: one `NativeFunction` attribute per row of `SIGNATURES`; `cdll` is the raw ctypes handle."""

    def __init__(self, cdll):
        self.cdll = cdll
        for name in SIGNATURES:
            setattr(self, name, NativeFunction(cdll, name))


def bind(cdll) -> Library:
    """Every function of `SIGNATURES` typed on `cdll` (ctypes.CDLL) and wrapped; AttributeError names one it lacks."""
    return Library(cdll)


MAX_HEAD_DIM = 256  # layer_forward keeps one head's vectors on the stack (cpu_kernels.c's MAX_HEAD_DIM)
_ACTIVATIONS = (torch.bfloat16, torch.float32)
_last_pass: list = [None]  # the arguments every layer of a pass shares, as last checked (`_check_pass`)


def _describe(t) -> str:
    return f"{tuple(t.shape)} {t.dtype} on {t.device}{'' if t.is_contiguous() else ', not contiguous'}"


def check_layer(x, cos, sin, k_buf, v_buf, col0: int, window: int, bias, weights: tuple, n_heads: int, n_kv: int, d: int) -> tuple:
    """What layer_forward reads and writes, checked before the call: a one-line ValueError where it would misread a
    tensor or reach outside one, a TypeError where an argument is no tensor (or no packed matrix). Returns (cos, sin,
    bias, B, n, H): the tables contiguous, x's shape. weights: (ln1, wqkv, wo, ln2, wgu, wd), the four matrices
    packed (engine/model/cpukernels.Packed: N x K as `n`, `k`, `dtype`).

    Cheap on the hot path (a microsecond or two against a call of hundreds; docs/engine.md, "Native kernels"): what
    every layer of a pass shares (x, updated in place, the RoPE tables, the bias) is checked once per pass, a
    layer's weights once (the verdict kept on its packed QKV matrix), only the layer's own KV buffers at every call."""
    try:
        cos, sin, bias = cos.contiguous(), sin.contiguous(), bias.contiguous()
        last = _last_pass[0]
        if (
            last is None
            or last[0] is not x
            or last[1] is not cos
            or last[2] is not sin
            or last[3] is not bias
            or last[4] != col0
            or last[5] != window
            or last[6] != n_heads
            or last[7] != n_kv
            or last[8] != d
        ):
            last = _last_pass[0] = _check_pass(x, cos, sin, bias, col0, window, n_heads, n_kv, d)
        bsz, n, hidden, dt = last[9:]
        ln1, wqkv, wo, ln2, wgu, wd = weights
        fits = wqkv.checked
        if fits is None or fits[0] is not ln1 or fits[1] is not wo or fits[2] is not ln2 or fits[3] is not wgu or fits[4] is not wd:
            fits = wqkv.checked = _check_weights(weights)
        if fits[5:] != (hidden, (n_heads + 2 * n_kv) * d, n_heads * d, dt):
            got = f"H={fits[5]}, {fits[6]} qkv rows, {fits[7]} attention columns, {fits[8]}"
            raise ValueError(f"layer_forward: the weights ({got}) do not fit x's H={hidden} in {dt} with {n_heads}+{n_kv} heads of {d}")
        _check_buffers(k_buf, v_buf, bsz, n, n_kv, d, col0, window, dt)
    except AttributeError as exc:  # an argument that is not a tensor, or a matrix that is not packed
        raise TypeError(f"layer_forward: the tensors must be torch.Tensors and the four matrices cpukernels.Packed ({exc})") from None
    return cos, sin, bias, bsz, n, hidden


def _check_buffers(k_buf, v_buf, bsz: int, n: int, n_kv: int, d: int, col0: int, window: int, dt=torch.float32) -> None:
    """The KV buffers: float32, or x's dtype (`dt`: a bfloat16 model's own buffers)."""
    shape = k_buf.shape
    if (
        k_buf.dtype not in (torch.float32, dt)
        or v_buf.dtype != k_buf.dtype
        or not (k_buf.is_cpu and v_buf.is_cpu and k_buf.is_contiguous() and v_buf.is_contiguous())
        or len(shape) != 4
        or v_buf.shape != shape
        or shape[0] < bsz
        or shape[1] != n_kv
        or shape[3] != d
    ):
        want = f"(>= {bsz}, {n_kv}, cap, {d})"
        raise ValueError(
            f"layer_forward: k_buf and v_buf must be contiguous float32{'' if dt == torch.float32 else f' (or {dt})'} CPU {want}; "
            f"got {_describe(k_buf)}, {_describe(v_buf)}"
        )
    if col0 + n > shape[2] or window > shape[2]:
        raise ValueError(f"layer_forward: columns {col0}..{col0 + n - 1} and a window of {window} must fit the buffers' {shape[2]} columns")


def _check_pass(x, cos, sin, bias, col0: int, window: int, n_heads: int, n_kv: int, d: int) -> tuple:
    """`check_layer`'s arguments shared by a pass's layers: (x, cos, sin, bias, col0, window, n_heads, n_kv, d, B, n, H, dtype)."""
    dt = x.dtype
    if dt not in _ACTIVATIONS or x.dim() != 3 or not x.is_cpu or not x.is_contiguous():
        raise ValueError(f"layer_forward: x must be a contiguous (B, n, H) CPU tensor in bfloat16 or float32; got {_describe(x)}")
    bsz, n, hidden = x.shape
    if n_kv <= 0 or n_heads % n_kv or not 0 < d <= MAX_HEAD_DIM or d % 2:
        raise ValueError(f"layer_forward: {n_heads} heads over {n_kv} kv heads of {d} (even, at most {MAX_HEAD_DIM})")
    if col0 < 0 or window <= 0:
        raise ValueError(f"layer_forward: col0 {col0} and window {window} must be >= 0 and > 0")
    if cos.dtype != dt or sin.dtype != dt or cos.numel() != bsz * n * d or sin.numel() != bsz * n * d or not (cos.is_cpu and sin.is_cpu):
        raise ValueError(
            f"layer_forward: cos and sin must be ({bsz * n}, {d}) CPU tables in x's dtype; got {_describe(cos)}, {_describe(sin)}"
        )
    if bias.dtype != torch.float32 or bias.numel() != bsz * n_heads * n * window or not bias.is_cpu:
        want = f"({bsz * n_kv}, {n_heads // n_kv * n}, {window})"
        raise ValueError(f"layer_forward: bias must be a float32 CPU {want} (attention_bias); got {_describe(bias)}")
    return (x, cos, sin, bias, col0, window, n_heads, n_kv, d, bsz, n, hidden, dt)


def _check_weights(weights: tuple) -> tuple:
    """One layer's weights, checked against each other: (ln1, wo, ln2, wgu, wd, H, QKV rows, attention columns, dtype)
    (`check_layer` compares the last four with the call's x and heads)."""
    ln1, wqkv, wo, ln2, wgu, wd = weights
    dt, hidden = wqkv.dtype, wqkv.k
    if not dt == wo.dtype == wgu.dtype == wd.dtype:
        raise ValueError(f"layer_forward: the packed matrices are in {wqkv.dtype}, {wo.dtype}, {wgu.dtype}, {wd.dtype}: one dtype")
    if (wo.n, wgu.k, wgu.n, wd.n) != (hidden, hidden, 2 * wd.k, hidden):
        shapes = ", ".join(f"{w.n}x{w.k}" for w in (wqkv, wo, wgu, wd))
        raise ValueError(f"layer_forward: matrices (N x K) qkv, o, gate-up, down {shapes} are not one layer's")
    if (
        ln1.dtype != dt
        or ln2.dtype != dt
        or ln1.numel() != hidden
        or ln2.numel() != hidden
        or not (ln1.is_contiguous() and ln2.is_contiguous())
    ):
        raise ValueError(
            f"layer_forward: the norms' weights must be contiguous ({hidden},) in {dt}; got {_describe(ln1)}, {_describe(ln2)}"
        )
    return (ln1, wo, ln2, wgu, wd, hidden, wqkv.n, wo.k, dt)
