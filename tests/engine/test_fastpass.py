"""The fast decode pass (engine/model/fastpass.py): fused QKV and gate-up projections over the static KV
buffers, eager ("fused") and with the native CPU kernels ("native"). Greedy float32 output equals plain
decoding over the dynamic cache and transformers' generate(), token for token, on a tiny random Llama."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import PROMPTS, hf_greedy, no_kernels_reason, tiny_eagle_pair
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from engine import DecodeConfig, generate
from engine.model import backend, cpukernels
from engine.model.backend import Backend, choose_backend, default_backend
from engine.model.fastllama import rotate_half
from engine.model.fastpass import FastRoute, FastRunner
from engine.model.kvcache import RaggedCache
from engine.model.layer import norm, small_attend
from engine.model.pass_masks import attention_bias, pass_mask, rope, rope_lookup, rope_tables
from engine.model.static_cache import ExactRoute, StaticRaggedCache, make_cache
from engine.options import ConfigError


def _tokens(pair, prompts, cfg, name: str):
    """`cfg` decoded on the backend `name` (engine/model/backend.py)."""
    return generate(pair, prompts, DecodeConfig.from_dict(cfg.to_dict() | {"backend": name}))


@pytest.fixture(scope="module", params=[(), (0,)], ids=["eagle", "eagle3-fused"])
def eagle_pair(tokenizer, tmp_path_factory, request):
    """A tiny target with an untrained (seeded) EAGLE head over every third token; the second one also fuses
    the target's layer-0 output (EAGLE-3: the fast pass collects that layer)."""
    return tiny_eagle_pair(tokenizer, tmp_path_factory.mktemp("eagle-fast"), request.param)


PASS_NAMES = {
    "fused": "fused projections, eager (static KV buffers)",
    "native": "fused projections, native CPU kernels (static KV buffers)",
}


@pytest.mark.parametrize("fast", ["fused", "native"])
@pytest.mark.parametrize("drafter", ["model", "ngram", "eagle"])
@pytest.mark.parametrize("prompts", [PROMPTS[:1], PROMPTS], ids=["batch1", "ragged3"])
def test_fused_pass_equals_plain_decoding(eagle_pair, drafter, prompts, fast):
    """Fused eager passes (with or without the native kernels): the same tokens as the eager dynamic cache,
    for plain and speculative decoding."""
    if fast == "native" and not cpukernels.available():
        pytest.skip(no_kernels_reason())
    plain = _tokens(eagle_pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=24), "torch")
    fused_plain = _tokens(eagle_pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=24), fast)
    spec = _tokens(eagle_pair, prompts, DecodeConfig(depth=3, drafter=drafter, max_new_tokens=24), fast)
    assert fused_plain.output_ids == plain.output_ids
    assert spec.output_ids == plain.output_ids
    assert spec.meta["decode_passes"] == fused_plain.meta["decode_passes"] == PASS_NAMES[fast]
    assert plain.meta["kv_cache"] == "dynamic" and spec.meta["kv_cache"] == "static"
    assert (plain.meta["backend"], spec.meta["backend"], spec.config["backend"]) == ("torch", fast, fast)


def test_fused_pass_equals_transformers_generate(tiny):
    """Batch 1, float32 greedy: the fused pass gives transformers' own generate() tokens."""
    ids = tiny.encode_prompt(PROMPTS[1])
    with torch.inference_mode():
        ref = tiny.target.generate(torch.tensor([ids]), max_new_tokens=20, do_sample=False, min_new_tokens=20)[0, len(ids) :].tolist()
    for fast in ("fused", "native") if cpukernels.available() else ("fused",):
        got = _tokens(tiny, [PROMPTS[1]], DecodeConfig(mode="autoregressive", max_new_tokens=20), fast)
        n = len(got.output_ids[0])  # stops early only at an end-of-sequence token
        assert n > 0 and got.output_ids[0] == ref[:n], fast


def test_the_fallback_without_the_kernels_equals_transformers(tiny, monkeypatch):
    """What a CPU without AVX-512 (an AVX2 laptop; an ARM Mac run on its CPU) or without gcc runs, forced here with
    SPECLAB_BACKEND=fused: the backend says why the kernels are off, the CPU's default is "fused" (the fused pass
    over static KV buffers, torch ops only), and greedy statistics and a tree's top-k take torch's way: the
    backend's small operations answer None and no kernel is ever called. Float32 greedy tokens equal
    transformers' generate(): plain, a speculative chain and a draft tree."""
    monkeypatch.setenv("SPECLAB_BACKEND", "fused")
    assert backend.why_not_native() == "SPECLAB_BACKEND=fused" and backend.native_kernels() is None
    assert default_backend("cpu").name == choose_backend("cpu").name == "fused"
    asked, answers, kernel_calls = [], [], []
    for name in ("logit_stats", "topk_logq"):  # the backend's small operations are asked, and answer None
        monkeypatch.setattr(Backend, name, _recording(getattr(Backend, name), name, asked, answers))
    for name in ("layer", "logit_stats", "topk_logq", "rms_norm"):  # the kernels themselves are never called
        monkeypatch.setattr(cpukernels, name, _recording(getattr(cpukernels, name), name, kernel_calls, []))
    ref = hf_greedy(tiny, PROMPTS[1], 20)
    plain = DecodeConfig(mode="autoregressive", max_new_tokens=20)
    chain = DecodeConfig(depth=3, drafter="model", max_new_tokens=20)
    tree = DecodeConfig(depth=3, drafter="model", tree_nodes=6, tree_topk=2, max_new_tokens=20)
    for cfg in (plain, chain, tree):
        got = generate(tiny, [PROMPTS[1]], cfg)
        assert got.output_ids[0] == ref and len(ref) == 20, cfg
        assert got.meta["decode_passes"] == PASS_NAMES["fused"] and got.meta["kv_cache"] == "static", cfg
        assert got.meta["backend"] == "fused" and "backend" not in got.config  # chosen by "auto", not written
    assert "logit_stats" in asked and "topk_logq" in asked  # verification and the tree builder asked ...
    assert set(answers) == {None} and kernel_calls == []  # ... were answered None every time, and no kernel ran
    with pytest.raises(ConfigError, match="SPECLAB_BACKEND=fused"):  # and the native backend is refused, saying why
        choose_backend("cpu", "native")


def _recording(real, name: str, asked: list, answers: list):
    """`real`, recording its name in `asked` and its answer in `answers` at every call."""

    def call(*args, **kwargs):
        asked.append(name)
        answers.append(real(*args, **kwargs))
        return answers[-1]

    return call


def test_the_backend_is_chosen_once_per_run_with_one_default_per_device(monkeypatch, tiny):
    """engine/model/backend.py: the device's default (native on the CPU where the kernels load, else fused; torch on
    CUDA and MPS), an explicit backend, SPECLAB_BACKEND standing in for "auto", cuda_graphs as it was, and the old
    variables mapped."""
    cpu_default = "native" if cpukernels.available() else "fused"
    assert default_backend("cpu").name == choose_backend(torch.device("cpu")).name == cpu_default
    assert default_backend("cuda").name == default_backend("mps").name == "torch"
    assert choose_backend("cuda", cuda_graphs="auto") == Backend("cuda_graphs", torch.device("cuda"), "graphs")
    auto_on_cpu = choose_backend("cpu", cuda_graphs="auto")
    assert auto_on_cpu.name == cpu_default and auto_on_cpu.note == "CUDA graphs need CUDA; this run is on cpu"
    assert choose_backend("cpu", cuda_graphs="padded").graph_mode == "padded"
    assert choose_backend("cpu", "fused", cuda_graphs="auto").name == "fused"  # a named backend wins over "auto" graphs
    for name in ("transformers", "torch", "fused"):
        assert choose_backend("cpu", name).name == name
    with pytest.raises(ConfigError, match="needs CUDA"):
        choose_backend("cpu", "cuda_graphs")
    with pytest.raises(ConfigError, match="cannot go with backend='fused'"):
        choose_backend("cpu", "fused", cuda_graphs="static")
    with pytest.raises(ConfigError, match="backend must be one of"):
        DecodeConfig(backend="eager")  # one name per backend: "eager" was "fused"'s second name
    costs, tree = tiny.target_costs, DecodeConfig(depth=3, drafter="model", tree_nodes=6, tree_topk=2)
    default = make_cache(tiny.target, tiny.device, costs, DecodeConfig(max_new_tokens=8))
    assert isinstance(default, StaticRaggedCache) and type(default.route) is FastRoute and default.backend.name == cpu_default
    assert type(make_cache(tiny.target, tiny.device, costs, DecodeConfig(backend="torch"))) is RaggedCache
    assert type(make_cache(tiny.target, tiny.device, costs, DecodeConfig(cuda_graphs="static")).route) is ExactRoute
    assert type(make_cache(tiny.target, tiny.device, costs, DecodeConfig.from_dict(tree.to_dict() | {"backend": "torch"}))) is RaggedCache
    fused_tree = make_cache(tiny.target, tiny.device, costs, DecodeConfig.from_dict(tree.to_dict() | {"backend": "fused"}))
    assert fused_tree.backend.name == "fused" and fused_tree.passes.backend is fused_tree.backend
    oracle = make_cache(tiny.target, tiny.device, costs, DecodeConfig(backend="transformers"))
    assert type(oracle) is RaggedCache and oracle.lean is None
    for value, name in [("torch", "torch"), ("fused", "fused"), ("transformers", "transformers"), ("auto", cpu_default)]:
        monkeypatch.setenv("SPECLAB_BACKEND", value)
        assert choose_backend("cpu").name == name and choose_backend("cpu", "torch").name == "torch"  # code's choice wins
    monkeypatch.setenv("SPECLAB_BACKEND", "eager")
    with pytest.raises(ConfigError, match="SPECLAB_BACKEND must be"):
        choose_backend("cpu")
    monkeypatch.delenv("SPECLAB_BACKEND")


def test_the_old_variables_are_mapped_with_a_deprecation_note(monkeypatch, capsys):
    monkeypatch.setattr(backend, "_warned", set())
    for variable, value, name in [
        ("SPECLAB_FAST", "0", "torch"),
        ("SPECLAB_FAST", "eager", "fused"),
        ("SPECLAB_LEAN", "0", "transformers"),
    ]:
        monkeypatch.setenv(variable, value)
        assert choose_backend("cpu").name == name
        assert f"{variable}={value} is deprecated; use SPECLAB_BACKEND={name}" in capsys.readouterr().err
        monkeypatch.delenv(variable)
    monkeypatch.setenv("SPECLAB_NATIVE", "0")  # the kernels off: the CPU's default is the fused pass
    assert choose_backend("cpu").name == "fused" and backend.why_not_native() == "SPECLAB_NATIVE=0"
    monkeypatch.delenv("SPECLAB_NATIVE")
    for removed in ("1", "on", "compiled"):  # the compiled pass was removed: a clear error, not a silent fallback
        monkeypatch.setenv("SPECLAB_FAST", removed)
        with pytest.raises(ConfigError, match="compiled pass was removed"):
            choose_backend("cpu")


def test_eager_runner_counts_passes_and_no_capture_time():
    runner = FastRunner(torch.device("cpu"))
    assert runner.run("k", lambda a, b: a + b, {"a": 1, "b": 2}) == 3
    assert runner.run("k", lambda a: -a, {"a": 4}) == -4
    assert runner.eager_passes == 2 and runner.captured == runner.replays == runner.capture_pending() == 0
    assert runner.capture_ms_total == 0.0 and runner.graphs == {} and runner.pending == {}
    runner.reset()
    assert runner.eager_passes == 0


def test_cli_backend_flag(capsys):
    from engine.__main__ import main
    from engine.cli.parser import BACKEND_NAMES, build_parser

    assert BACKEND_NAMES == backend.BACKENDS
    for command in (["run", "--prompt", "x"], ["bench"], ["passes"]):
        assert build_parser().parse_args(command + ["--backend", "fused"]).backend == "fused"
        assert build_parser().parse_args(command).backend == "auto"
        for old, name in (("off", "torch"), ("eager", "fused"), ("native", "native")):  # --fast: the old flag, mapped
            assert build_parser().parse_args(command + ["--fast", old]).backend == name
    with pytest.raises(SystemExit):
        build_parser().parse_args(["passes", "--backend", "sometimes"])
    assert "--backend" in capsys.readouterr().err
    assert main(["run", "--prompt", "x", "--mode", "autoregressive", "--backend", "cuda_graphs", "--device", "cpu", "--draft", "none"]) == 2
    assert "needs CUDA" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["passes", "--fast", "compiled"])  # removed


def test_compare_backends_interleaves_them(tiny):
    """`passes --compare-backends`: every backend timed at every size in every round, with medians inside the spread."""
    from engine.bench.fastcompare import compare_fast, format_fast_comparison

    rows = compare_fast(tiny, ["torch", "fused"], [1, 2], [1, 3], context=8, repeats=1, rounds=2)
    assert {(r["batch"], r["new_tokens"], r["mode"]) for r in rows} == {
        (b, n, m) for b in (1, 2) for n in (1, 3) for m in ("torch", "fused")
    }
    for r in rows:
        assert len(r["ms_rounds"]) == 2 and r["ms_min"] <= r["ms"] <= r["ms_max"] and r["ms"] > 0
        assert r["tokens_per_pass"] == r["batch"] * r["new_tokens"]
    table = format_fast_comparison(rows, ["torch", "fused"], peak_bandwidth=1e10).splitlines()
    assert len(table) == 5 and "torch/fused" in table[0] and "%BW" in table[0]
    off, eager = (next(r for r in rows if (r["batch"], r["new_tokens"], r["mode"]) == (1, 1, m)) for m in ("torch", "fused"))
    assert f"{off['ms'] / eager['ms']:.2f}x" in table[1]


def test_compare_backends_refuses_bad_names(capsys):
    from engine.__main__ import main

    for modes in ("torch,turbo", "off,eager", "fused", "torch,torch"):
        assert main(["passes", "--compare-backends", modes]) == 2  # refused before any model loads
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error:") and ("unknown backend" in err[0] or "two or more" in err[0])


def test_the_passes_command_times_the_default_pass(tmp_path, capsys):
    """`python -m engine passes` (the contract's CLI) on the embedded target: one row per shape, with the backend chosen
    by name (it once handed --cuda-graphs to pass_costs' `stat` by position and crashed)."""
    from engine.__main__ import main

    out = tmp_path / "passes.json"
    assert main(["passes", "--batch", "1", "--tokens", "1,2", "--context", "8", "--repeats", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["batch"], r["new_tokens"]) for r in rows] == [(1, 1), (1, 2)] and all(r["ms"] > 0 for r in rows)
    assert "forward passes on" in capsys.readouterr().out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pass_pieces_match_the_lean_forward(dtype):
    """The one norm is transformers' LlamaRMSNorm bit for bit, RoPE its rotate_half arithmetic; small_attend over float32
    keys/values with the additive bias equals the float32 attention with the boolean mask."""
    torch.manual_seed(0)
    x, w = torch.randn(2, 3, 64).to(dtype) * 5, torch.rand(64).to(dtype)
    hf = LlamaRMSNorm(64, eps=1e-5).to(dtype)
    hf.weight.data.copy_(w)
    with torch.no_grad():
        assert torch.equal(norm(x, w, 1e-5), hf(x))
    positions, inv_freq = torch.arange(6).view(2, 3) + 7, 1.0 / (10000 ** (torch.arange(0, 16, 2).float() / 16))
    cos, sin = rope_tables(positions, inv_freq, dtype)  # (B, n, 1, d)
    emb = torch.cat([positions[..., None].float() * inv_freq] * 2, dim=-1)
    q = torch.randn(2, 3, 4, 16).to(dtype)  # (B, n, heads, d)
    old_cos, old_sin = emb.cos().to(dtype)[:, :, None], emb.sin().to(dtype)[:, :, None]
    assert torch.equal(rope(q, cos, sin), q * old_cos + rotate_half(q) * old_sin)
    k, v = torch.randn(2, 2, 9, 16), torch.randn(2, 2, 9, 16)  # (B, kv, window, d), float32 buffers
    mask = torch.rand(2, 1, 3, 9) > 0.3
    mask[..., 0] = True
    out = small_attend(q, k, v, attention_bias(mask, 2, 2), 0.25)  # (B, n, H * d)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    expect = torch.nn.functional.scaled_dot_product_attention(
        q.float().transpose(1, 2), k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), attn_mask=mask, scale=0.25
    )
    torch.testing.assert_close(out.float(), expect.to(dtype).float().transpose(1, 2).reshape(2, 3, -1), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_native_pass_shortcuts_equal_the_general_pieces(dtype):
    """What the native pass makes cheaply equals what it replaced: RoPE tables looked up (also after the
    table grows), the bias made directly (single token, causal block) equal to the bias of the boolean mask (also
    where a row is ragged or a padding row, where it is made from the mask), and the
    native final norm to float32 sum-order rounding."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, 16, 2).float() / 16))
    for positions in (torch.tensor([[5]]), torch.arange(6).view(2, 3) + 40, torch.tensor([[700, 701]])):
        got, expect = rope_lookup(positions, inv_freq, dtype), rope_tables(positions, inv_freq, dtype)
        assert got[0].shape == expect[0].shape and torch.equal(got[0], expect[0]) and torch.equal(got[1], expect[1])
    for bsz, past, n in ((1, 7, 1), (2, 4, 3), (1, 0, 5)):
        valid = torch.ones(bsz, past + n, dtype=torch.bool)
        direct = pass_mask(valid, past, n, bsz, past + n, heads=(2, 3))
        assert torch.equal(direct, attention_bias(pass_mask(valid, past, n, bsz, past + n), 2, 3))
    ragged = torch.ones(2, 6, dtype=torch.bool)
    ragged[1, 0] = False
    for valid, rows in ((ragged, 2), (ragged[:1], 2)):  # a hole; a padding row: the general route
        bias = pass_mask(valid, 5, 1, rows, 6, heads=(2, 3))
        assert torch.equal(bias, attention_bias(pass_mask(valid, 5, 1, rows, 6), 2, 3))
        assert bool(torch.isinf(bias).any())
    if cpukernels.available():
        x, w = torch.randn(3, 2, 64).to(dtype) * 5, torch.rand(64).to(dtype)
        native = cpukernels.rms_norm(x, w, 1e-5)
        tol = 1e-6 if dtype == torch.float32 else 1e-2  # bfloat16: a sum-order difference may move one rounding step
        torch.testing.assert_close(native, norm(x, w, 1e-5), rtol=tol, atol=tol)
        assert cpukernels.rms_norm(x, w.float() if dtype == torch.bfloat16 else w.double(), 1e-5) is None


@pytest.mark.parametrize("fast", ["fused", "native"])
@pytest.mark.parametrize("drafter", ["model", "eagle"])
@pytest.mark.parametrize("prompts", [PROMPTS[:1], PROMPTS], ids=["batch1", "ragged3"])
def test_tree_on_the_fast_pass_equals_plain_decoding(eagle_pair, drafter, prompts, fast):
    """EAGLE-2 trees verified and drafted over the static buffers (engine/model/static_tree.py): the same
    greedy float32 tokens as plain decoding on the lean pass; fixed trees and goodput's cut trees."""
    if fast == "native" and not cpukernels.available():
        pytest.skip(no_kernels_reason())
    plain = _tokens(eagle_pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=24), "torch")
    for cfg in (
        DecodeConfig(depth=4, drafter=drafter, tree_nodes=12, tree_topk=3, max_new_tokens=24),
        DecodeConfig(depth=4, drafter=drafter, tree_nodes=12, tree_topk=3, policy="goodput", max_new_tokens=24),
    ):
        tree = _tokens(eagle_pair, prompts, cfg, fast)
        assert tree.output_ids == plain.output_ids, cfg.policy
        assert tree.meta["kv_cache"] == "static" and tree.meta["decode_passes"] == PASS_NAMES[fast]
