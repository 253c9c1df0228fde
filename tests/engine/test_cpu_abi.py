"""The typed boundary of the native kernels (engine/model/cpu_abi.py): its table is the C source's exported
prototypes and the library's exported symbols, no more and no less; a wrong number or type of arguments, and a
tensor the kernel would misread (dtype, contiguity, device, size), raise a one-line TypeError or ValueError
instead of crashing the process."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess

import pytest
import torch
from conftest import no_kernels_reason

from engine.model import cpu_abi, cpukernels
from engine.model.pass_masks import attention_bias

needs_kernels = pytest.mark.skipif(not cpukernels.available(), reason=no_kernels_reason())
C_TYPES = {"int": ctypes.c_int, "int64_t": ctypes.c_int64, "float": ctypes.c_float}


def c_prototypes(source: str) -> dict[str, list[tuple[str, type]]]:
    """Each exported (non-static) function the C source defines: name -> [(argument, its ctypes type), ...]."""
    found = {}
    for match in re.finditer(r"^(?!static\b|typedef\b)([A-Za-z_][\w \t*]*?)\b(\w+)\(([^)]*)\)\s*\{", source, flags=re.M):
        assert match.group(1).strip() == "void", f"{match.group(2)} returns {match.group(1).strip()}: the table says void"
        args = []
        for part in match.group(3).split(","):
            name = re.search(r"(\w+)\s*$", part).group(1)
            base = part.replace("const", "").replace("*", " ").split()[0]
            args.append((name, ctypes.c_void_p if "*" in part else C_TYPES[base]))
        found[match.group(2)] = args
    return found


def test_the_table_is_the_c_sources_exported_prototypes():
    prototypes = c_prototypes(cpukernels.SOURCE.read_text())
    assert len(prototypes) >= 9 and "layer_forward" in prototypes and len(prototypes["layer_forward"]) == 27
    assert {name: list(args) for name, args in cpu_abi.SIGNATURES.items()} == prototypes


def test_the_head_size_limit_is_the_c_sources():
    assert f"#define MAX_HEAD_DIM {cpu_abi.MAX_HEAD_DIM} " in cpukernels.SOURCE.read_text()
    assert cpukernels.MAX_HEAD_DIM == cpu_abi.MAX_HEAD_DIM


def test_the_prototype_reader_sees_a_new_function_and_a_changed_argument():
    source = "static void hidden(int a) {\n}\nvoid f(const float *x, int64_t n,\n       float eps) { /* x */\n}\ntypedef void (*fn)(int);\n"
    assert c_prototypes(source) == {"f": [("x", ctypes.c_void_p), ("n", ctypes.c_int64), ("eps", ctypes.c_float)]}


@needs_kernels
@pytest.mark.skipif(shutil.which("nm") is None, reason="no nm (binutils) to list the library's symbols")
def test_the_table_is_the_librarys_exported_symbols():
    path = cpukernels.library().cdll._name
    listing = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    functions = {line.split()[-1] for line in listing.splitlines() if line.split()[1:2] == ["T"]}
    assert functions == set(cpu_abi.SIGNATURES)


@needs_kernels
def test_every_function_is_typed_from_the_table():
    lib = cpukernels.library()
    for name, args in cpu_abi.SIGNATURES.items():
        fn = getattr(lib.cdll, name)
        assert fn.argtypes == [ctype for _, ctype in args] and fn.restype is None, name
        assert getattr(lib, name).args is args


@needs_kernels
@pytest.mark.parametrize("count", [0, 6, 8])
def test_a_wrong_argument_count_raises(count):
    """ctypes itself would pass a surplus argument through unconverted: the call layer refuses both ways."""
    with pytest.raises(TypeError, match=r"^gemm_f32 takes 7 arguments \(x, wp, y, M, K, N, nthreads\); got " + str(count) + "$"):
        cpukernels.library().gemm_f32(*[0] * count)
    with pytest.raises(TypeError, match=r"^layer_forward takes 27 arguments \(x, B, n, H, bf, cos, .*\); got 26$"):
        cpukernels.library().layer_forward(*[0] * 26)


@needs_kernels
def test_a_wrong_argument_type_names_the_argument():
    x, w, out = torch.ones(2, 8), torch.ones(8), torch.empty(2, 8)
    lib = cpukernels.library()
    with pytest.raises(TypeError, match=r"^rms_norm: argument 2 \(w\) must be an address \(int\); got Tensor tensor\("):
        lib.rms_norm(x.data_ptr(), w, out.data_ptr(), 2, 8, 1e-5, 0)
    with pytest.raises(TypeError, match=r"^rms_norm: argument 4 \(M\) must be an int; got float 2.0$"):
        lib.rms_norm(x.data_ptr(), w.data_ptr(), out.data_ptr(), 2.0, 8, 1e-5, 0)
    lib.rms_norm(x.data_ptr(), w.data_ptr(), out.data_ptr(), 2, 8, 1e-5, 0)  # the right types: the call goes through
    torch.testing.assert_close(out, torch.ones(2, 8), rtol=1e-4, atol=1e-4)


def _layer_args(dtype=torch.float32, n: int = 2, past: int = 5):
    """A valid call of cpukernels.layer on a small random layer (H 64, 2 query heads over 1 kv head of 32)."""
    gen = torch.Generator().manual_seed(0)
    hidden, heads, kv, d, inter = 64, 2, 1, 32, 96

    def rnd(*shape):
        return (torch.randn(*shape, generator=gen) * 0.05).to(dtype)

    weights = (
        1 + rnd(hidden),
        cpukernels.Packed(rnd((heads + 2 * kv) * d, hidden)),
        cpukernels.Packed(rnd(hidden, heads * d)),
        1 + rnd(hidden),
        cpukernels.Packed(rnd(2 * inter, hidden)),
        cpukernels.Packed(rnd(hidden, inter)),
    )
    window = past + n
    cos, sin = torch.ones(n, d, dtype=dtype), torch.zeros(n, d, dtype=dtype)
    k_buf, v_buf = torch.zeros(1, kv, window + 4, d), torch.zeros(1, kv, window + 4, d)
    bias = _bias(n, window)
    return {
        "x": rnd(1, n, hidden),
        "cos": cos,
        "sin": sin,
        "k_buf": k_buf,
        "v_buf": v_buf,
        "col0": past,
        "window": window,
        "bias": bias,
        "weights": weights,
        "n_heads": heads,
        "n_kv": kv,
        "head_dim": d,
        "eps": 1e-5,
        "scale": d**-0.5,
    }


def _bias(n: int, window: int) -> torch.Tensor:
    """_layer_args' attention bias: 2 query heads over 1 kv head, every column allowed."""
    return attention_bias(torch.ones(1, 1, n, window, dtype=torch.bool), 1, 2)


def _replace_weight(args: dict, index: int, value) -> dict:
    weights = list(args["weights"])
    weights[index] = value
    return {**args, "weights": tuple(weights)}


BAD_LAYER_CALLS = {
    "x in float64": (
        lambda a: {**a, "x": a["x"].double()},
        ValueError,
        "x must be a contiguous (B, n, H) CPU tensor in bfloat16 or float32",
    ),
    "x not contiguous": (
        lambda a: {**a, "x": a["x"].repeat(1, 1, 2)[..., ::2]},
        ValueError,
        "(1, 2, 64) torch.float32 on cpu, not contiguous",
    ),
    "x two-dimensional": (lambda a: {**a, "x": a["x"][0]}, ValueError, "x must be a contiguous (B, n, H)"),
    "k_buf not contiguous": (lambda a: {**a, "k_buf": a["k_buf"].transpose(2, 3)}, ValueError, "k_buf and v_buf must be contiguous"),
    "v_buf in bfloat16": (lambda a: {**a, "v_buf": a["v_buf"].bfloat16()}, ValueError, "k_buf and v_buf must be contiguous float32"),
    "k_buf of another head size": (lambda a: {**a, "k_buf": a["k_buf"][..., :16].contiguous()}, ValueError, "k_buf and v_buf"),
    "columns past the buffer": (lambda a: {**a, "col0": a["k_buf"].shape[2] - 1}, ValueError, "must fit the buffers' 11 columns"),
    "window past the buffer": (lambda a: {**a, "window": 50, "bias": _bias(2, 50)}, ValueError, "a window of 50 must fit"),
    "bias of another window": (lambda a: {**a, "window": a["window"] - 1}, ValueError, "bias must be a float32 CPU (1, 4, 6)"),
    "cos in bfloat16": (lambda a: {**a, "cos": a["cos"].bfloat16()}, ValueError, "cos and sin must be (2, 32) CPU tables in x's dtype"),
    "sin too short": (lambda a: {**a, "sin": a["sin"][:1]}, ValueError, "cos and sin must be (2, 32)"),
    "kv heads that do not fit": (
        lambda a: {**a, "n_kv": 2},
        ValueError,
        "(H=64, 128 qkv rows, 64 attention columns, torch.float32) do not fit",
    ),
    "head size past the stack": (lambda a: {**a, "head_dim": 512}, ValueError, "at most 256"),
    "a norm in float64": (
        lambda a: _replace_weight(a, 0, a["weights"][0].double()),
        ValueError,
        "the norms' weights must be contiguous (64,)",
    ),
    "a plain matrix": (lambda a: _replace_weight(a, 1, torch.zeros(128, 64)), TypeError, "the four matrices cpukernels.Packed"),
    "matrices of two layers": (lambda a: _replace_weight(a, 2, a["weights"][1]), ValueError, "are not one layer's"),
    "bias not a tensor": (lambda a: {**a, "bias": a["bias"].tolist()}, TypeError, "must be torch.Tensors"),
}


@needs_kernels
@pytest.mark.parametrize("case", sorted(BAD_LAYER_CALLS))
def test_a_layer_call_the_kernel_would_misread_raises_one_line(case):
    """Each of these would have the kernel read or write the wrong memory; the checks refuse it first, in one line,
    and the same layer then runs as before (a pass's checked arguments are remembered only when they pass)."""
    good = _layer_args()
    change, error, message = BAD_LAYER_CALLS[case]
    bad = change(good)
    with pytest.raises(error, match=re.escape(message)) as raised:
        cpukernels.layer(**bad)
    assert "\n" not in str(raised.value) and str(raised.value).startswith("layer_forward: ")
    out = cpukernels.layer(**good)
    assert out is good["x"] and bool(torch.isfinite(out).all())


@needs_kernels
def test_a_valid_layer_after_a_checked_one_is_checked_again_where_it_differs():
    """The remembered checks key on the tensors themselves: the next pass's new x, or this pass's next layer's
    buffers, are checked afresh, so a wrong one is refused even after a good call with the same weights."""
    good = _layer_args()
    cpukernels.layer(**good)
    with pytest.raises(ValueError, match="not contiguous"):
        cpukernels.layer(**{**good, "k_buf": good["k_buf"].transpose(2, 3)})
    with pytest.raises(ValueError, match="x must be"):
        cpukernels.layer(**{**good, "x": good["x"].double()})
    fresh = _layer_args()
    assert cpukernels.layer(**{**fresh, "weights": good["weights"]}) is fresh["x"]
