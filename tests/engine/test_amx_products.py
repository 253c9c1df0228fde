"""The packed bfloat16 products on AMX's tiles (cpu_kernels.c, `gemm_amx_team`), where the CPU has them, and the
register tiles (AVX512-BF16) that a CPU without AMX runs: both are the rounded float32 sum of the same products, for
every pass size the kernels take (1 to 64 tokens: one, two or three token tiles, sweeps of 32 past 48) and matrices whose
rows are not a whole number of 4-block groups; a token's row does not depend on its pass; torch's own bfloat16 products
(oneDNN, on the same tiles) are left alone. On a machine without AMX both builds run the register tiles."""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest
import torch
import torch.nn.functional as F
from conftest import no_kernels_reason

from engine.model import cpu_abi, cpukernels
from engine.model.layer import linear

needs_kernels = pytest.mark.skipif(not cpukernels.available(), reason=no_kernels_reason())
TOKENS = [1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 49, 64]


def _matrix(n: int, k: int, seed: int) -> torch.Tensor:
    return torch.randn(n, k, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def _within_a_step(got: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> None:
    """got is x @ w.T summed in float32 and rounded once: within one bfloat16 step of the exact float32 product,
    and nearly always its correctly rounded value."""
    exact = F.linear(x.float(), w.float())
    step = exact.abs().clamp(min=1e-3) * 2.0**-8
    assert bool(((got.float() - exact).abs() <= step + 1e-4 * w.shape[1]).all())
    assert float((got != exact.to(torch.bfloat16)).float().mean()) < 0.05


@needs_kernels
@pytest.mark.parametrize("n,k", [(597, 576), (64, 1536), (144, 32)])
@pytest.mark.parametrize("m", TOKENS)
def test_the_products_of_any_pass_size_are_the_rounded_float32_sum(n, k, m):
    w, x = _matrix(n, k, 0), _matrix(m, k, 1)
    packed = cpukernels.Packed(w, max_tokens=64)
    got = linear(x, packed)
    assert got.shape == (m, n) and got.dtype == torch.bfloat16
    _within_a_step(got, x, w)


@needs_kernels
@pytest.mark.parametrize("m", [33, 49, 64])
def test_a_tokens_row_is_the_same_alone_and_in_a_large_pass(m):
    w, x = _matrix(200, 576, 2), _matrix(m, 576, 3)
    packed = cpukernels.Packed(w, max_tokens=64)
    alone = torch.cat([linear(x[i : i + 1], packed) for i in range(m)])
    assert torch.equal(linear(x, packed), alone)


@needs_kernels
def test_the_products_leave_torchs_products_alone():
    """The products restore each thread's tile configuration (oneDNN's bfloat16 GEMM uses the same tiles)."""
    a, w = _matrix(64, 576, 4), _matrix(1536, 576, 5)
    before = F.linear(a, w)
    packed = cpukernels.Packed(_matrix(960, 576, 6), max_tokens=64)
    x = _matrix(32, 576, 7)
    first = linear(x, packed)
    assert torch.equal(F.linear(a, w), before)
    assert torch.equal(linear(x, packed), first)
    assert torch.equal(F.linear(a, w), before)


def _without_amx(folder):
    """The kernels built for this CPU less AMX (a CPU with AVX512-BF16 only: the register tiles), or None where the
    compiler cannot leave AMX out."""
    compiler = shutil.which("gcc")
    if compiler is None:
        return None
    out = folder / "speclab-cpu-no-amx.so"
    flags = [*cpukernels.FLAGS, "-mno-amx-tile", "-mno-amx-bf16", "-mno-amx-int8"]
    done = subprocess.run([compiler, *flags, str(cpukernels.SOURCE), "-o", str(out)], capture_output=True, timeout=120)
    return cpu_abi.bind(ctypes.CDLL(str(out))) if done.returncode == 0 else None


@needs_kernels
def test_the_register_tiles_agree_with_the_tiles(tmp_path):
    """The same packed matrix multiplied by the kernels built without AMX: the rounded float32 sum too, within a step
    of this machine's products, and a token's row the same alone and in its pass."""
    lib = _without_amx(tmp_path)
    if lib is None:
        pytest.skip("the compiler cannot build the kernels without AMX")
    w = _matrix(597, 576, 8)
    packed = cpukernels.Packed(w, max_tokens=64)
    for m in (1, 8, 32, 48):
        x = _matrix(m, 576, 9 + m)
        y = torch.empty(m, 597, dtype=torch.bfloat16)
        lib.gemm_bf16(x.data_ptr(), packed.data.data_ptr(), y.data_ptr(), m, 576, 597, torch.get_num_threads())
        _within_a_step(y, x, w)
        ones = torch.empty(1, 597, dtype=torch.bfloat16)
        lib.gemm_bf16(x[-1:].contiguous().data_ptr(), packed.data.data_ptr(), ones.data_ptr(), 1, 576, 597, torch.get_num_threads())
        assert torch.equal(ones[0], y[-1])
        assert float((y.float() - linear(x, packed).float()).abs().max()) <= float(y.float().abs().max()) * 2.0**-7
