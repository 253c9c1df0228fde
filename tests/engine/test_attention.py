"""The native attention (engine/model/cpukernels.py `attention`, cpu_kernels.c: a tile of a kv head's queries over
blocks of 16 columns, an online softmax, long windows split into segments and merged) against a plain torch
reference: random q, k, v, the masks a pass makes (causal over the new tokens, a draft tree's rows, ragged rows with
left padding and holes), float32 and bfloat16 queries over float32 and bfloat16 buffers."""

from __future__ import annotations

import pytest
import torch
from conftest import no_kernels_reason

from engine.model import cpukernels
from engine.model.layer import small_attend
from engine.model.pass_masks import attention_bias

needs_kernels = pytest.mark.skipif(not cpukernels.available(), reason=no_kernels_reason())


def reference(q, k, v, mask, scale):
    """softmax(q k^T * scale, masked) v in float64, kv heads repeated over their query groups: (B, n, H * d)."""
    bsz, n, heads, d = q.shape
    groups = heads // k.shape[1]
    kk = k.double().repeat_interleave(groups, 1)  # (B, H, W, d)
    vv = v.double().repeat_interleave(groups, 1)
    scores = torch.einsum("bnhd,bhwd->bhnw", q.double(), kk) * scale
    scores = scores.masked_fill(~mask, float("-inf"))  # mask (B, 1, n, W)
    out = torch.einsum("bhnw,bhwd->bnhd", scores.softmax(-1).nan_to_num(0.0), vv)
    return out.reshape(bsz, n, heads * d)


def make_mask(batch, n, past, tree=False, ragged=False, seed=0):
    """(B, 1, n, past + n): causal over the new tokens, or a random tree (each node sees its context, itself and
    an ancestor chain); ragged: row 1 left-padded and row 0 holed."""
    gen = torch.Generator().manual_seed(seed)
    window = past + n
    mask = (torch.arange(window)[None, :] <= (past + torch.arange(n))[:, None])[None].repeat(batch, 1, 1)
    if tree:
        parent = [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]
        mask[:, :, past:] = False
        for i in range(n):
            node = i
            while node >= 0:
                mask[:, i, past + node] = True
                node = parent[node]
    if ragged and batch > 1:
        mask[1, :, : min(past, 700)] = False  # left padding
        mask[0, :, 3 : min(past, 40)] = False  # holes (rejected drafts)
    return mask[:, None]


def buffers(batch, kv, window, d, cap_extra, dtype, gen):
    """k, v: (B, kv, window, d) views of (B + 1, kv, window + cap_extra, d) buffers, as the static cache holds them."""
    k = torch.randn(batch + 1, kv, window + cap_extra, d, generator=gen).to(dtype)
    v = torch.randn(batch + 1, kv, window + cap_extra, d, generator=gen).to(dtype)
    return k[:batch, :, :window], v[:batch, :, :window]


CASES = [  # batch, n, past, tree, ragged
    (1, 1, 0, False, False),
    (1, 1, 37, False, False),
    (1, 4, 1500, False, False),
    (2, 5, 700, True, False),
    (3, 4, 1030, False, True),
    (2, 16, 513, True, True),
    (8, 1, 4090, False, True),
    (1, 48, 300, False, False),
]


@needs_kernels
@pytest.mark.parametrize("batch,n,past,tree,ragged", CASES)
@pytest.mark.parametrize(
    "dtype,kv_dtype", [(torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16), (torch.bfloat16, torch.float32)]
)
def test_native_attention_equals_the_reference(batch, n, past, tree, ragged, dtype, kv_dtype):
    heads, kv, d = 9, 3, 64
    gen = torch.Generator().manual_seed(batch * 100 + n + past)
    qkv = torch.randn(batch, n, heads + 2 * kv, d, generator=gen).to(dtype)  # q is a slice of the heads, as in a pass
    q = qkv[:, :, :heads]
    k, v = buffers(batch, kv, past + n, d, 24, kv_dtype, gen)
    mask = make_mask(batch, n, past, tree, ragged, seed=n)
    bias = attention_bias(mask, kv, heads // kv)
    got = cpukernels.attention(q, k, v, bias, d**-0.5)
    assert got is not None and got.dtype == dtype and got.shape == (batch, n, heads * d)
    want = reference(q.float(), k.float(), v.float(), mask, d**-0.5)
    if dtype == torch.float32:
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=2e-6)
    elif kv_dtype == torch.float32:  # the float32 result rounded once to bfloat16
        torch.testing.assert_close(got.double(), want, rtol=1 / 128, atol=1e-3)
    else:  # and each probability rounded to bfloat16 for the values' product: off by at most 2^-9 of the largest |v|
        torch.testing.assert_close(got.double(), want, rtol=1 / 128, atol=1e-3 + float(v.abs().max()) / 512)


@needs_kernels
@pytest.mark.parametrize("d", [16, 32, 64, 128])
def test_other_head_sizes_and_groups(d):
    """Head sizes that fill a register tile in part or twice, groups of 1 and 4."""
    for heads, kv in ((4, 4), (8, 2)):
        gen = torch.Generator().manual_seed(d + heads)
        q = torch.randn(2, 3, heads, d, generator=gen)
        k, v = buffers(2, kv, 600, d, 5, torch.float32, gen)
        mask = make_mask(2, 3, 597, ragged=True)
        got = cpukernels.attention(q, k, v, attention_bias(mask, kv, heads // kv), d**-0.5)
        torch.testing.assert_close(got.double(), reference(q, k, v, mask, d**-0.5), rtol=1e-5, atol=2e-6)


@needs_kernels
def test_a_query_does_not_depend_on_the_pass_it_is_in():
    """A query's output is the same bits alone (a plain decode step) as among more queries over a longer window (a
    verify pass): its masked columns add exact zeros, its segments are fixed columns."""
    heads, kv, d, past = 9, 3, 64, 1100
    gen = torch.Generator().manual_seed(5)
    q = torch.randn(2, 5, heads, d, generator=gen).to(torch.bfloat16)
    k, v = buffers(2, kv, past + 5, d, 8, torch.bfloat16, gen)
    five = cpukernels.attention(q, k, v, attention_bias(make_mask(2, 5, past), kv, 3), d**-0.5)
    for i in range(5):
        window = past + i + 1
        alone = q[:, i : i + 1].contiguous()
        one = cpukernels.attention(alone, k[:, :, :window], v[:, :, :window], attention_bias(make_mask(2, 1, past + i), kv, 3), d**-0.5)
        assert torch.equal(one[:, 0], five[:, i])


@needs_kernels
def test_small_attend_native_equals_its_torch_arithmetic():
    """layer.small_attend with `native` (a pass of packed matrices) against its torch route over float32 buffers."""
    heads, kv, d = 9, 3, 64
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(3, 4, heads, d, generator=gen)
    k, v = buffers(3, kv, 900, d, 16, torch.float32, gen)
    bias = attention_bias(make_mask(3, 4, 896, tree=True, ragged=True), kv, 3)
    native = small_attend(q, k, v, bias, d**-0.5, native=True)
    torch.testing.assert_close(native, small_attend(q, k, v, bias, d**-0.5), rtol=1e-5, atol=2e-6)


@needs_kernels
def test_what_the_native_attention_does_not_take_falls_back():
    q = torch.randn(1, 2, 9, 64)
    k = v = torch.randn(1, 3, 10, 64)
    bias = torch.zeros(3, 6, 10)
    assert cpukernels.attention(q.double(), k, v, bias, 0.125) is None  # another dtype
    assert cpukernels.attention(q, k.to(torch.float16), v.to(torch.float16), bias, 0.125) is None
    assert cpukernels.attention(q.transpose(1, 2).contiguous().transpose(1, 2), k, v, bias, 0.125) is None  # rows not contiguous
    assert cpukernels.attention(q, k.transpose(2, 3), v, bias, 0.125) is None
    assert cpukernels.attention(q, k, v, bias[:, :5], 0.125) is None  # a bias of another shape


@needs_kernels
@pytest.mark.parametrize("batch,n,past", [(1, 1, 600), (2, 4, 1100), (3, 16, 40)])
def test_a_bfloat16_layer_over_bfloat16_buffers_equals_it_over_float32_buffers(batch, n, past):
    """cpukernels.layer in bfloat16 over the native route's bfloat16 buffers and over float32 ones: the same keys and
    values stored (they are bfloat16 values either way), the same output to bfloat16 rounding and to the bfloat16
    buffers' probabilities, rounded to bfloat16 for the values' pair products (each off by at most 2^-9 of itself)."""
    from engine.model.pass_masks import rope_tables

    gen = torch.Generator().manual_seed(batch + n + past)
    hidden, heads, kv, d, inter = 576, 9, 3, 64, 1536

    def rnd(*shape, s=0.05):
        return (torch.randn(*shape, generator=gen) * s).to(torch.bfloat16)

    weights = (
        1 + rnd(hidden),
        rnd((heads + 2 * kv) * d, hidden),
        rnd(hidden, heads * d),
        1 + rnd(hidden),
        rnd(2 * inter, hidden),
        rnd(hidden, inter),
    )
    packed = tuple(w if w.dim() == 1 else cpukernels.Packed(w) for w in weights)
    window, cap = past + n, past + n + 8
    x = rnd(batch, n, hidden, s=1.0)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    cos, sin = rope_tables((past + torch.arange(n))[None].expand(batch, n), inv_freq, torch.bfloat16)
    keys, values = rnd(batch, kv, cap, d, s=1.0), rnd(batch, kv, cap, d, s=1.0)
    bias = attention_bias(make_mask(batch, n, past, ragged=True), kv, heads // kv)
    k32, v32, k16, v16 = keys.float(), values.float(), keys.clone(), values.clone()
    assert cpukernels.layer_ready(x, packed, k16, d) and cpukernels.layer_ready(x, packed, k32, d)
    out32 = cpukernels.layer(x.clone(), cos, sin, k32, v32, past, window, bias, packed, heads, kv, d, 1e-5, d**-0.5)
    out16 = cpukernels.layer(x.clone(), cos, sin, k16, v16, past, window, bias, packed, heads, kv, d, 1e-5, d**-0.5)
    assert torch.equal(k16.float(), k32) and torch.equal(v16.float(), v32)
    torch.testing.assert_close(out16.float(), out32.float(), rtol=2 / 128, atol=5e-2)  # a few bfloat16 steps at most


@needs_kernels
def test_the_native_attention_leaves_torchs_products_alone():
    """Where the attention uses AMX it restores each thread's tile configuration (oneDNN's bfloat16 products use the
    same tiles): a product before and after it, and between two of its calls, is the same."""
    gen = torch.Generator().manual_seed(9)
    a, w = torch.randn(64, 576, generator=gen).bfloat16(), torch.randn(1536, 576, generator=gen).bfloat16()
    before = torch.nn.functional.linear(a, w)
    q = torch.randn(2, 4, 9, 64, generator=gen).bfloat16()
    k, v = buffers(2, 3, 700, 64, 8, torch.bfloat16, gen)
    bias = attention_bias(make_mask(2, 4, 696), 3, 3)
    first = cpukernels.attention(q, k, v, bias, 0.125)
    assert torch.equal(torch.nn.functional.linear(a, w), before)
    assert torch.equal(cpukernels.attention(q, k, v, bias, 0.125), first)
    assert torch.equal(torch.nn.functional.linear(a, w), before)
