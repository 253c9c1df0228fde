"""SpecLab's native CPU kernels (engine/model/cpukernels.py, cpu_kernels.c): the packed matrix products equal
F.linear (float32 to rounding, bfloat16 to the last bit of its rounding), through engine/model/layer.py's one
`linear`, which hands larger passes to their fallback; they refuse what they cannot pack, and say in one line
why they are unavailable."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import no_kernels_reason

from engine.model import cpukernels
from engine.model.layer import linear

needs_kernels = pytest.mark.skipif(not cpukernels.available(), reason=no_kernels_reason())


def _matrix(n: int, k: int, dtype, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, k, generator=torch.Generator().manual_seed(seed)).to(dtype)


@needs_kernels
@pytest.mark.parametrize("n,k", [(37, 33), (64, 576), (130, 48), (16, 1)])
@pytest.mark.parametrize("m", [1, 2, 5, 8, 9, 12, 13, 16, 25, 48])
def test_float32_product_equals_linear(n, k, m):
    w = _matrix(n, k, torch.float32)
    x = _matrix(m, k, torch.float32, seed=1)
    packed = cpukernels.Packed(w)
    got = linear(x, packed)
    assert got.shape == (m, n) and got.dtype == torch.float32
    torch.testing.assert_close(got, F.linear(x, w), rtol=1e-5, atol=1e-5 * k)


@needs_kernels
@pytest.mark.parametrize("n,k", [(37, 34), (96, 576), (200, 64)])
@pytest.mark.parametrize("m", [1, 3, 8, 12, 13, 48])
def test_bfloat16_product_is_the_rounded_float32_sum(n, k, m):
    """bf16 x bf16 products are exact in float32; the sum is float32 then rounded once: within half a
    bfloat16 step (plus float32 reordering) of the float32 product of the same values."""
    w = _matrix(n, k, torch.bfloat16)
    x = _matrix(m, k, torch.bfloat16, seed=2)
    got = linear(x, cpukernels.Packed(w))
    assert got.dtype == torch.bfloat16
    exact = F.linear(x.float(), w.float())
    step = exact.abs().clamp(min=1e-3) * 2.0**-8  # one bfloat16 ulp at most (8 significant bits)
    assert bool(((got.float() - exact).abs() <= step + 1e-4 * k).all())
    differ = float((got != exact.to(torch.bfloat16)).float().mean())
    assert differ < 0.05  # nearly all equal the correctly rounded sum; the rest are one step off


@needs_kernels
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m", [2, 9, 13, 16, 48])
def test_a_tokens_product_does_not_depend_on_the_pass_it_is_in(dtype, m):
    """Register tiles of 1-12 tokens (a pass of more cut into equal tiles) sum each token's products in one order,
    so a token's row is bit for bit the same alone or among m - 1 others, whatever tile it lands in."""
    w = _matrix(200, 576, dtype)
    x = _matrix(m, 576, dtype, seed=3)
    packed = cpukernels.Packed(w)
    together = linear(x, packed)
    alone = torch.cat([linear(x[i : i + 1], packed) for i in range(m)])
    assert torch.equal(together, alone)


@needs_kernels
def test_leading_dimensions_and_fallback_beyond_max_tokens():
    w = _matrix(48, 32, torch.float32)
    packed = cpukernels.Packed(w, max_tokens=4)
    x = _matrix(6, 32, torch.float32, seed=3).view(2, 3, 32)  # 6 tokens > 4: F.linear on the plain matrix
    assert torch.equal(linear(x, packed), F.linear(x, w))
    small = x[:1, :3]  # 3 tokens: natively, shape kept
    assert linear(small, packed).shape == (1, 3, 48)
    torch.testing.assert_close(linear(small, packed), F.linear(small, w))
    strided = x.transpose(0, 1)[:1]  # a non-contiguous input is copied, not misread
    torch.testing.assert_close(linear(strided, packed), F.linear(strided, w))


@needs_kernels
def test_what_cannot_be_packed_is_refused():
    assert not cpukernels.supports(_matrix(8, 7, torch.bfloat16))  # bfloat16 pairs need an even K
    assert not cpukernels.supports(_matrix(8, 8, torch.float16))
    assert not cpukernels.supports(torch.zeros(4))
    with pytest.raises(ValueError, match="cannot pack a \\(8, 7\\) torch.bfloat16 matrix"):
        cpukernels.Packed(_matrix(8, 7, torch.bfloat16))


def _mapping_of(address: int) -> tuple[str, set[str]]:
    """The /proc/self/smaps entry holding `address`: (its header line, its VmFlags)."""
    header, inside = "", False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        first = line.split(" ", 1)[0]
        if "-" in first and ":" not in first:
            lo, hi = (int(part, 16) for part in first.split("-"))
            header, inside = line, lo <= address < hi
        elif inside and line.startswith("VmFlags:"):
            return header, set(line.split()[1:])
    raise AssertionError(f"no mapping holds {address:#x}")


@pytest.mark.skipif(not Path("/sys/kernel/mm/transparent_hugepage").exists(), reason="no transparent huge pages (not Linux)")
def test_weight_memory_is_a_private_block_at_a_huge_page_with_huge_pages_asked_for():
    """The packed matrices' memory (docs/engine.md, "Prepared weights"): a block of its own, starting at a 2 MiB
    boundary, private anonymous memory (not shared memory, where THP is off by default) with MADV_HUGEPAGE set (the
    "hg" flag) before it was touched, and as large as asked."""
    block = cpukernels.weight_memory(3 * cpukernels.HUGE_PAGE + 4096)
    assert block.dtype == torch.uint8 and block.numel() == 3 * cpukernels.HUGE_PAGE + 4096
    assert block.data_ptr() % cpukernels.HUGE_PAGE == 0
    header, flags = _mapping_of(block.data_ptr())
    assert "hg" in flags and "sh" not in flags and "/dev/zero" not in header, (header, flags)
    block.fill_(7)
    assert int(block[-1]) == 7


@needs_kernels
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_matrix_packed_into_given_memory_is_the_same_matrix(dtype):
    """Packed into a slice of a block (prepared.py's layout) it gives the product bit for bit as packed alone, and
    its copy lies in that slice; memory too small, of another dtype or misaligned is refused in one line."""
    w, x = _matrix(37, 34, dtype), _matrix(3, 34, dtype, seed=4)
    need = cpukernels.packed_bytes(37, 34, dtype)
    assert need % 4096 == 0 and need >= 48 * 34 * x.element_size()
    block = cpukernels.weight_memory(2 * need)
    packed = cpukernels.Packed(w, memory=block[need:])
    assert packed.data.data_ptr() == block.data_ptr() + need
    assert torch.equal(linear(x, packed), linear(x, cpukernels.Packed(w)))
    for bad in (block[: need - 64], block[1 : need + 1], torch.zeros(need // 4, dtype=torch.float32)):
        with pytest.raises(ValueError, match="needs uint8 memory of"):
            cpukernels.Packed(w, memory=bad)


def test_switched_off_and_broken_compiler_say_why(monkeypatch, tmp_path):
    from engine.model import backend

    monkeypatch.setenv("SPECLAB_BACKEND", "fused")  # the backend keeps them off (engine/model/backend.py)
    assert backend.native_kernels() is None and backend.why_not_native() == "SPECLAB_BACKEND=fused"
    monkeypatch.delenv("SPECLAB_BACKEND")
    monkeypatch.setenv("SPECLAB_CACHE", str(tmp_path))  # a fresh cache: the library is built again
    monkeypatch.setenv("CC", "/bin/false")
    cpukernels._state.clear()
    assert cpukernels.library() is None and not cpukernels.available() and backend.native_kernels() is None
    why = cpukernels.why_not()
    assert why.startswith("the native kernels did not build: the compiler failed") and "\n" not in why
    assert backend.why_not_native() == why
    monkeypatch.delenv("CC")
    monkeypatch.undo()
    cpukernels._state.clear()  # the next caller loads the real library again


@needs_kernels
def test_library_is_cached_per_machine(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECLAB_CACHE", str(tmp_path))
    cpukernels._state.clear()
    assert cpukernels.available()
    built = list((tmp_path / "kernels").glob("speclab-cpu-*.so"))
    assert len(built) == 1
    cpukernels._state.clear()
    stamp = built[0].stat().st_mtime_ns
    assert cpukernels.available() and built[0].stat().st_mtime_ns == stamp  # loaded, not built again
    monkeypatch.undo()
    cpukernels._state.clear()


@needs_kernels
def test_native_pass_runs_each_layer_in_one_call(tiny, monkeypatch):
    """The "native" backend: every decoder layer of a pass of up to LAYER_TOKENS tokens (the short prompt's
    prefill too) is one native call, and the greedy tokens are the lean pass's; a pass of more tokens (batch x
    new tokens) than LAYER_TOKENS (here lowered to 4) falls back to the fused eager layer, with the same tokens."""
    from conftest import PROMPTS

    from engine import DecodeConfig, generate

    calls = []
    real = cpukernels.layer
    monkeypatch.setattr(cpukernels, "layer", lambda *a, **k: calls.append(a[0].shape) or real(*a, **k))
    lean = generate(tiny, PROMPTS[:1], DecodeConfig(mode="autoregressive", max_new_tokens=6, backend="torch"))
    assert calls == []
    native = generate(tiny, PROMPTS[:1], DecodeConfig(mode="autoregressive", max_new_tokens=6, backend="native"))
    layers = len(tiny.target.model.layers)
    assert native.output_ids == lean.output_ids
    passes = len(calls) // layers
    assert passes == 6 and len(calls) == passes * layers  # the prefill and 5 one-token passes
    assert 1 < calls[0][1] <= cpukernels.LAYER_TOKENS and all(shape[:2] == (1, 1) for shape in calls[layers:])
    calls.clear()
    monkeypatch.setattr(cpukernels, "LAYER_TOKENS", 4)  # passes of 8 new tokens per row go eager
    spec = generate(tiny, PROMPTS, DecodeConfig(depth=7, drafter="model", max_new_tokens=12))
    wide = [step for step in spec.steps if step.kind == "decode" and step.tokens_per_pass > 4 * step.batch]
    assert wide  # the target verified 8 tokens per row in these passes ...
    assert calls and all(shape[0] * shape[1] <= 4 for shape in calls)  # ... yet only passes of up to 4 ran natively
    assert spec.output_ids == generate(tiny, PROMPTS, DecodeConfig(mode="autoregressive", max_new_tokens=12)).output_ids


@needs_kernels
def test_layer_ready_needs_packed_matrices_and_float32_buffers():
    w = cpukernels.Packed(_matrix(32, 16, torch.float32), max_tokens=4)
    ln = torch.ones(16)
    weights = (ln, w, w, ln, w, w)
    buf = torch.zeros(1, 1, 8, 4)
    x = torch.zeros(1, 4, 16)
    assert cpukernels.layer_ready(x, weights, buf, 4)
    assert not cpukernels.layer_ready(torch.zeros(1, 5, 16), weights, buf, 4)  # more tokens than the matrices take
    assert not cpukernels.layer_ready(x, weights, buf.to(torch.bfloat16), 4)
    assert not cpukernels.layer_ready(x.to(torch.bfloat16), weights, buf, 4)
    assert not cpukernels.layer_ready(x, (ln, _matrix(32, 16, torch.float32), w, ln, w, w), buf, 4)
    assert not cpukernels.layer_ready(x, (ln.double(), w, w, ln, w, w), buf, 4)  # norms in another dtype


@needs_kernels
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("shape", [(1, 49152), (3, 8192), (2, 5, 17), (4, 1), (1, 33)])
def test_logit_stats_are_the_argmax_and_logsumexp(dtype, shape):
    """The first maximum exactly as max(dim).indices, the log-sum-exp to float32 rounding; ties (bfloat16
    rounds many logits to the same value) go to the lowest index, as torch's do."""
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(4)) * 4).to(dtype)
    x[..., -1] = x.amax(-1)  # a tie with the maximum at the end: the first one must win
    ids, logz = cpukernels.logit_stats(x)
    assert ids.shape == logz.shape == shape[:-1] and ids.dtype == torch.long and logz.dtype == torch.float32
    assert torch.equal(ids, x.max(-1).indices)
    torch.testing.assert_close(logz, torch.logsumexp(x.float(), -1), rtol=2e-6, atol=1e-5)


@needs_kernels
def test_logit_stats_special_rows_match_torch():
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0], [-inf] * 4, [0.0, nan, 5.0, nan], [1.0, inf, 2.0, inf], [-inf, -2.0, -inf, -2.0]])
    for dtype in (torch.bfloat16, torch.float32):
        ids, logz = cpukernels.logit_stats(x.to(dtype))
        assert ids.tolist() == x.max(-1).indices.tolist() == [1, 0, 1, 1, 1]
        torch.testing.assert_close(logz, torch.logsumexp(x, -1), equal_nan=True)
    assert cpukernels.logit_stats(torch.zeros(3, 4, dtype=torch.float16)) is None  # another dtype: torch's way
    assert cpukernels.logit_stats(torch.zeros(0, 4)) is not None  # no rows: empty results, no call


@needs_kernels
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "shape,k,temperature", [((1, 4, 8192), 4, 1.0), ((3, 12), 3, 1.0), ((2, 5, 1000), 8, 0.7), ((4, 17), 17, 1.0), ((2, 33), 1, 2.0)]
)
def test_topk_logq_is_log_softmax_then_topk(dtype, shape, k, temperature):
    """A tree's children (cpukernels.topk_logq): the k largest logits best first, at log_softmax(x / T) to float32
    rounding; where bfloat16 rounds logits to the same value the values must still be the top k."""
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(6)) * 3).to(dtype)
    logq, ids = cpukernels.topk_logq(x, k, temperature)
    ref_logq, ref_ids = torch.log_softmax(x.float() / temperature, -1).topk(k, -1)
    assert ids.shape == logq.shape == (*shape[:-1], k) and ids.dtype == torch.long and logq.dtype == torch.float32
    assert torch.equal(x.gather(-1, ids), x.gather(-1, ref_ids))  # the same values, best first
    torch.testing.assert_close(logq, ref_logq, rtol=2e-6, atol=2e-6)
    if dtype == torch.float32:  # random float32 logits have no ties: the same tokens too
        assert torch.equal(ids, ref_ids)


@needs_kernels
def test_topk_logq_ties_go_to_the_lower_index_and_bad_calls_fall_back():
    x = torch.tensor([[1.0, 3.0, 2.0, 3.0, 3.0, 0.0], [5.0, 5.0, 5.0, 5.0, 5.0, 5.0]])
    for dtype in (torch.float32, torch.bfloat16):
        logq, ids = cpukernels.topk_logq(x.to(dtype), 4)
        assert ids.tolist() == [[1, 3, 4, 2], [0, 1, 2, 3]]
        torch.testing.assert_close(logq[1], torch.full((4,), -math.log(6.0)))
    assert cpukernels.topk_logq(x, 7) is None and cpukernels.topk_logq(x, 0) is None  # k out of 1..V: torch's way
    assert cpukernels.topk_logq(x.half(), 2) is None and cpukernels.topk_logq(x, 2, 0.0) is None
    assert cpukernels.topk_logq(torch.zeros(0, 6), 2)[0].shape == (0, 2)  # no rows: empty results, no call


def test_greedy_stats_off_the_native_backend_equal_torch():
    """engine/sampling.greedy_stats takes torch's way on every backend but "native" (and with none), with the same
    argmax as the native call."""
    from engine import sampling
    from engine.model.backend import Backend

    x = torch.randn(2, 3, 300, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    for backend in (None, Backend("fused", torch.device("cpu")), Backend("torch", torch.device("cpu"))):
        ids, logz = sampling.greedy_stats(x, backend)
        assert torch.equal(ids, x.max(-1).indices) and torch.equal(logz, torch.logsumexp(x.float(), -1))
    if cpukernels.available():
        native_ids, native_logz = sampling.greedy_stats(x, Backend("native", torch.device("cpu")))
        assert torch.equal(native_ids, ids)
        torch.testing.assert_close(native_logz, logz)


@needs_kernels
@pytest.mark.parametrize(
    "batch,n,past", [(1, 1, 0), (1, 1, 40), (1, 5, 150), (1, 9, 37), (1, 16, 200), (2, 3, 33), (3, 16, 17), (1, 48, 300)]
)
def test_native_layer_equals_the_fused_eager_layer(batch, n, past):
    """One decoder layer (cpukernels.layer: the products, RoPE, the new keys and values, attention over 16 key
    columns at a time and the rest one by one, the MLP) against the Python layer (layer.decoder_layer over the
    buffers) in float32, random weights,
    a ragged row when batch > 1: the outputs, and the keys and values stored, within float32 reordering."""
    from engine.model.layer import buffer_store, decoder_layer
    from engine.model.pass_masks import attention_bias, rope_tables

    gen = torch.Generator().manual_seed(batch * 1000 + n * 10 + past)
    hidden, heads, kv, d, inter = 576, 9, 3, 64, 1536

    def rnd(*shape, s=0.05):
        return torch.randn(*shape, generator=gen) * s

    ln1, ln2 = 1 + rnd(hidden), 1 + rnd(hidden)
    wqkv, wo, wgu, wd = rnd((heads + 2 * kv) * d, hidden), rnd(hidden, heads * d), rnd(2 * inter, hidden), rnd(hidden, inter)
    native_w = (ln1, cpukernels.Packed(wqkv), cpukernels.Packed(wo), ln2, cpukernels.Packed(wgu), cpukernels.Packed(wd))
    window, cap = past + n, past + n + 8
    x = rnd(batch, n, hidden, s=1.0)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    cos, sin = rope_tables((past + torch.arange(n))[None].expand(batch, n), inv_freq, torch.float32)
    keys, values = rnd(batch, kv, cap, d, s=1.0), rnd(batch, kv, cap, d, s=1.0)
    valid = torch.ones(batch, window, dtype=torch.bool)
    if batch > 1:
        valid[1, : min(7, past)] = False  # a ragged row: its first columns are holes
    causal = torch.arange(window)[None, :] <= (past + torch.arange(n))[:, None]
    mask = (causal[None] & valid[:, None, :])[:, None]
    bias = attention_bias(mask, kv, heads // kv)
    k1, v1, k2, v2 = keys.clone(), values.clone(), keys.clone(), values.clone()
    store = buffer_store(k1, v1, torch.arange(past, past + n), window)
    ref = decoder_layer(x.clone(), cos, sin, store, bias if n <= 16 else mask, (ln1, wqkv, wo, ln2, wgu, wd), heads, kv, d, 1e-5, d**-0.5)
    got = cpukernels.layer(x.clone(), cos, sin, k2, v2, past, window, bias, native_w, heads, kv, d, 1e-5, d**-0.5)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=5e-5)
    torch.testing.assert_close(k2, k1, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(v2, v1, rtol=1e-5, atol=1e-5)


def test_the_pass_key_changes_with_any_source_that_makes_the_native_pass(tmp_path, monkeypatch):
    """Pass curves are keyed by the fingerprint: a change to the kernels or to the Python that lays out and drives
    them (the packed weights' move into one mapping changed the pass's shape, not the kernels) measures it again."""
    for name in ("cpu_kernels.c", *cpukernels.PASS_SOURCES):
        (tmp_path / name).write_bytes(cpukernels.SOURCE.with_name(name).read_bytes())
    monkeypatch.setattr(cpukernels, "SOURCE", tmp_path / "cpu_kernels.c")
    cpukernels.fingerprint.cache_clear()
    try:
        before = cpukernels.fingerprint()
        for name in ("cpu_kernels.c", "prepared.py", "layer.py", "passes.py", "static_cache.py"):
            with open(tmp_path / name, "a") as f:
                f.write("\n# changed\n")
            cpukernels.fingerprint.cache_clear()
            after = cpukernels.fingerprint()
            assert after != before, name
            before = after
    finally:
        cpukernels.fingerprint.cache_clear()
