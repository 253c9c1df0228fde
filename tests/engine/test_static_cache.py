"""Static KV buffers and the CUDA-graph buckets (engine/model/static_cache.py, engine/model/graphs.py).

On a CPU: the static-buffer path ("static": exact windows) and the graph-bucket path run eagerly
("padded": what a graph replays) give the same float32 output as the dynamic cache, for every drafter,
at batch 1 and ragged, with holes, compaction and rows leaving the batch; the cache invariants hold;
the bucket and mask logic is right. On CUDA (marked gpu): captured graphs give the same tokens."""

from __future__ import annotations

import pytest
import torch
from conftest import PROMPTS, no_kernels_reason, tiny_eagle_pair

from engine import DecodeConfig, generate, generate_steps
from engine.model import cpukernels
from engine.model.backend import Backend, choose_backend
from engine.model.graphs import GraphRunner, batch_bucket, window_bucket
from engine.model.kvcache import RaggedCache
from engine.model.pass_masks import pass_mask
from engine.model.static_cache import StaticRaggedCache, make_cache, route_for, static_capacity
from engine.options import ConfigError

MODES = ["static", "padded"]


@pytest.fixture(autouse=True)
def dynamic_by_default(monkeypatch):
    """These tests hold the static modes against the dynamic cache, which a run without cuda_graphs gets on the
    "torch" backend (SPECLAB_BACKEND=torch; on the CPU the fused pass is the default: tests/engine/test_fastpass.py)."""
    monkeypatch.setenv("SPECLAB_BACKEND", "torch")


def decisions(trace):
    """What each step decided: depth, batch, and each row's drafted ids, accepted count and next token."""
    return [(s.depth, s.batch, [([t.id for t in q.drafted], q.num_accepted, q.next_id) for q in s.seqs]) for s in trace.steps]


# --- exactness against the dynamic cache ------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("drafter", ["model", "ngram"])
@pytest.mark.parametrize("prompts", [PROMPTS[:1], PROMPTS], ids=["batch1", "ragged3"])
def test_static_buffers_equal_dynamic_cache_tiny(tiny, mode, drafter, prompts):
    cfg = DecodeConfig(depth=3, drafter=drafter, max_new_tokens=24)
    ref = generate(tiny, prompts, cfg)
    got = generate(tiny, prompts, DecodeConfig.from_dict(cfg.to_dict() | {"cuda_graphs": mode}))
    assert got.output_ids == ref.output_ids
    assert decisions(got) == decisions(ref)  # same drafts, same acceptance, step by step
    assert [s.target_flops for s in got.steps] == [s.target_flops for s in ref.steps]
    assert got.meta["kv_cache"] == "static" and ref.meta["kv_cache"] == "dynamic"
    assert got.config["cuda_graphs"] == mode


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("slack", [0, 10_000], ids=["compact-every-step", "never-compact"])
def test_static_buffers_with_holes_and_compaction(tiny, monkeypatch, mode, slack):
    import engine.model.kvcache as kvcache

    monkeypatch.setattr(kvcache, "COMPACT_SLACK", slack)
    ar = generate(tiny, PROMPTS, DecodeConfig(mode="autoregressive", max_new_tokens=32, cuda_graphs="off"))
    stream = generate_steps(tiny, PROMPTS, DecodeConfig(depth=4, max_new_tokens=32, cuda_graphs=mode))
    compactions = 0
    for _ in stream:
        if stream.active:
            assert isinstance(stream.target_cache, StaticRaggedCache)
            compactions = stream.target_cache.compactions
    assert stream.trace.output_ids == ar.output_ids
    assert (compactions > 0) == (slack == 0)


def test_static_cache_invariants_match_the_dynamic_cache_step_by_step(tiny):
    """Run both caches in lockstep: same lengths, masks and widths; the buffers' live columns hold exactly
    the dynamic cache's keys and values wherever a column is valid (bit for bit in float32)."""
    cfg = DecodeConfig(depth=3, max_new_tokens=20)
    dyn = generate_steps(tiny, PROMPTS, cfg)
    sta = generate_steps(tiny, PROMPTS, DecodeConfig.from_dict(cfg.to_dict() | {"cuda_graphs": "static"}))
    checked = 0
    for _ in zip(dyn, sta):
        if not dyn.active:
            continue
        for a, b in ((dyn.target_cache, sta.target_cache), (dyn.drafter.cache, sta.drafter.cache)):
            assert b.lengths.tolist() == a.lengths.tolist() and b.width == a.width
            assert torch.equal(b.valid, a.valid)
            assert b.valid.sum(1).tolist() == b.lengths.tolist()
            assert b.width + 1 <= b.kv.capacity and b.batch <= b.kv.rows
            for layer, (k, v) in zip(a.cache.layers, b.live()):
                mask = a.valid[:, None, :, None].expand_as(layer.keys)
                assert k.shape == layer.keys.shape
                assert torch.equal(k[mask], layer.keys[mask]) and torch.equal(v[mask], layer.values[mask])
        checked += 1
    assert checked >= 3
    for stream in (dyn, sta):  # zip stops at the first exhausted stream: finish both
        for _ in stream:
            pass
    assert sta.trace.output_ids == dyn.trace.output_ids


@pytest.mark.parametrize("rows", [[0, 2], [1, 2], [0, 1], [2], [0, 0, 0], [2, 2, 2], [1, 1], [2, 0, 1]])
def test_select_keeps_each_rows_entries(tiny, rows):
    """Dropping rows moves only those whose slot changes, in place; one row copied into every row (a shared prefix) is
    broadcast around itself, wherever it sits; a reordering goes through an index: every kept row's valid entries, in
    order, are the ones it held, whatever columns `_tidy` crops after."""
    stream = generate_steps(tiny, PROMPTS, DecodeConfig(depth=3, max_new_tokens=8, cuda_graphs="static"))
    steps = iter(stream)
    next(steps), next(steps)  # the prefill and a decode step: ragged rows, with holes
    cache = stream.target_cache
    old = [(k.clone(), v.clone()) for k, v in cache.live()]
    old_valid = cache.valid.clone()
    with torch.inference_mode():  # as the decode loop calls it
        cache.select(torch.tensor(rows))
    assert cache.batch == len(rows)
    for (k, v), (k0, v0) in zip(cache.live(), old):
        for i, r in enumerate(rows):
            assert torch.equal(k[i][:, cache.valid[i]], k0[r][:, old_valid[r]])
            assert torch.equal(v[i][:, cache.valid[i]], v0[r][:, old_valid[r]])


MARGIN_CASES = {
    "ngram": {"drafter": "ngram", "depth": 3},
    "model": {"drafter": "model", "depth": 3},
    "eagle-tree-goodput": {"drafter": "eagle", "depth": 3, "tree_nodes": 6, "tree_topk": 2, "policy": "goodput"},
    "lookup-else-eagle": {"drafter": "ngram_eagle", "depth": 4},
}


@pytest.mark.parametrize("case", list(MARGIN_CASES))
def test_native_route_keeps_a_left_margin_when_the_longest_row_leaves(tiny, tokenizer, tmp_path, case, monkeypatch):
    """On the native route the columns of a row that leaves with the batch's longest prompt stay as a margin of holes
    (`StaticRaggedCache._slice_columns`: cropping it would move every kept row): the kept rows decode the same tokens as
    when the margin is cropped and as the dynamic cache does ("torch"), chains and trees, the drafter's cache too, and
    the margin is there after the row left."""
    monkeypatch.delenv("SPECLAB_BACKEND")  # each run names its backend
    if not cpukernels.available():
        pytest.skip(no_kernels_reason())
    spec = MARGIN_CASES[case]
    pair = tiny_eagle_pair(tokenizer, tmp_path / "eagle", (0,)) if "eagle" in spec["drafter"] else tiny
    longest = max(range(len(PROMPTS)), key=lambda i: len(pair.encode_prompt(PROMPTS[i])))

    def run(backend: str, keep_margin: bool = False):
        stream = generate_steps(pair, PROMPTS, DecodeConfig(max_new_tokens=16, backend=backend, **spec))
        steps = iter(stream)
        next(steps)  # the prefill
        drafter = getattr(stream.drafter, "head", stream.drafter)  # the hybrid's head holds its cache
        for cache in (stream.target_cache, getattr(drafter, "cache", None)):
            if cache is not None and backend == "native":
                cache.route.skips_holes = keep_margin
        row = stream.active[longest]
        row.max_new_tokens = len(row.generated) + 1  # the longest prompt's row finishes at the next step
        margins = [not bool(stream.target_cache.valid[:, 0].any()) for _ in steps if stream.active]
        return stream.trace.output_ids, margins

    kept, margins = run("native", keep_margin=True)
    cropped, no_margins = run("native")
    assert kept == cropped == run("torch")[0]
    assert any(margins) and not any(no_margins)
    assert len(kept[longest]) < len(kept[(longest + 1) % len(PROMPTS)])


@pytest.fixture(scope="module")
def reference_runs() -> dict:
    """The reference run (the default cache) per drafter, made once: both EAGLE cases compare with the same one."""
    return {}


@pytest.mark.parametrize(("mode", "drafter"), [("padded", "model"), ("padded", "eagle"), ("static", "eagle")])
def test_embedded_static_buffers_all_drafters(embedded_f32, reference_runs, mode, drafter):
    """The real target in float32 with the distilled draft, the EAGLE head (the target's features feed it)
    and n-grams; a ragged batch in which "Hi" finishes early and leaves the batch (rows move inside the buffers)."""
    prompts = ["Hi", "Write a long story about a dragon."]
    cfg = DecodeConfig(depth=3, drafter=drafter, max_new_tokens=20)
    if drafter not in reference_runs:
        reference_runs[drafter] = generate(embedded_f32, prompts, cfg)
    ref = reference_runs[drafter]
    got = generate(embedded_f32, prompts, DecodeConfig.from_dict(cfg.to_dict() | {"cuda_graphs": mode}))
    assert got.output_ids == ref.output_ids
    assert decisions(got) == decisions(ref)
    assert got.steps[0].batch == 2 and got.steps[-1].batch == 1  # "Hi" left the batch


# --- buckets and masks ------------------------------------------------------------------------------
def test_batch_and_window_buckets():
    sizes = (1, 2, 3, 4, 5, 8, 9, 16, 17, 100, 128, 129, 250)
    assert [batch_bucket(b, 256) for b in sizes] == [1, 2, 4, 4, 8, 8, 16, 16, 32, 112, 128, 192, 256]
    assert batch_bucket(7, 6) == 6  # never above the buffers' rows
    assert window_bucket(1, 1000) == 128 and window_bucket(128, 1000) == 128 and window_bucket(129, 1000) == 256
    assert window_bucket(990, 1000) == 1000
    with pytest.raises(ValueError):
        window_bucket(1001, 1000)
    with pytest.raises(ValueError):
        batch_bucket(0, 4)
    assert static_capacity(100, 64) > 100 + 64 + 16


def test_padded_mask_rows_and_columns():
    valid = torch.tensor([[False, True, True, True], [True, True, False, True]])  # (B=2, past 2 + n 2)
    mask = pass_mask(valid, past=2, n=2, rows=3, window=6)  # (3, 1, 2, 6)
    assert mask.shape == (3, 1, 2, 6)
    # row 0: first query (column 2) sees columns 1-2, the second sees 1-3; nothing past the live columns
    assert mask[0, 0].tolist() == [[False, True, True, False, False, False], [False, True, True, True, False, False]]
    assert mask[1, 0].tolist() == [[True, True, False, False, False, False], [True, True, False, True, False, False]]
    # a padding row sees only its own new columns (finite output, discarded)
    assert mask[2, 0].tolist() == [[False, False, True, False, False, False], [False, False, True, True, False, False]]


def test_graph_runner_runs_eagerly_without_cuda():
    runner = GraphRunner(Backend("cuda_graphs", torch.device("cpu"), "graphs"))
    assert not runner.capture  # CUDA graphs need CUDA
    out = runner.run(("k",), lambda x: (x * 2, None), {"x": torch.ones(2)})
    assert torch.equal(out[0], torch.full((2,), 2.0)) and out[1] is None
    assert runner.eager_passes == 1 and runner.captured == 0 and runner.capture_ms_total == 0.0


# --- the switch ---------------------------------------------------------------------------------------
def test_mode_resolution_and_errors(tiny, monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    auto = choose_backend(cpu, cuda_graphs="auto")
    assert (auto.name, auto.note) == ("torch", "CUDA graphs need CUDA; this run is on cpu")
    assert choose_backend(cuda, cuda_graphs="auto").name == "torch"  # SPECLAB_BACKEND (this file's) stands in for "auto"
    assert choose_backend(cpu, cuda_graphs="padded").graph_mode == "padded"
    assert type(make_cache(tiny.target, cpu, tiny.target_costs, DecodeConfig(cuda_graphs="auto"))) is RaggedCache  # auto on a CPU
    assert isinstance(make_cache(tiny.target, cpu, tiny.target_costs, DecodeConfig(cuda_graphs="static")), StaticRaggedCache)
    monkeypatch.delenv("SPECLAB_BACKEND")
    assert choose_backend(cuda, cuda_graphs="auto").graph_mode == "graphs" and choose_backend(cuda).name == "torch"
    with pytest.raises(ConfigError, match="cuda_graphs must be one of"):
        DecodeConfig(cuda_graphs="always")
    graphs = choose_backend(cuda, cuda_graphs="auto")
    assert graphs.for_model(tiny.target).name == "cuda_graphs" and graphs.for_tree().name == "torch"  # trees: eager, dynamic
    gpt2 = __import__("transformers").GPT2LMHeadModel(__import__("transformers").GPT2Config(n_layer=1, n_embd=32, n_head=2))
    assert graphs.for_model(gpt2).name == "transformers"  # a model the lean forward does not cover: transformers' forward
    with pytest.raises(ConfigError, match="lean Llama forward"):
        choose_backend(cpu, cuda_graphs="static").for_model(gpt2)
    with pytest.raises(ConfigError, match="cannot go with backend='transformers'"):  # transformers' forward: no static buffers
        generate(tiny, PROMPTS[:1], DecodeConfig(max_new_tokens=4, cuda_graphs="static", backend="transformers"))


def test_a_static_cache_builds_no_dynamic_cache_and_no_dynamic_forward(tiny, tokenizer, tmp_path, monkeypatch):
    """The buffers are the static cache's keys and values and its `Pass` runs over them: building one makes no
    transformers DynamicCache and no dynamic-cache forward (whose LeanLlama it would never call)."""
    import engine.model.kvcache as kvcache

    def refuse(*args, **kwargs):
        raise AssertionError("a static cache built what it does not use")

    monkeypatch.setattr(kvcache, "DynamicCache", refuse)
    monkeypatch.setattr(kvcache, "make_forward", refuse)
    for mode in MODES:
        cache = make_cache(tiny.target, torch.device("cpu"), tiny.target_costs, DecodeConfig(cuda_graphs=mode))
        assert isinstance(cache, StaticRaggedCache) and cache.passes.lean is cache.lean
        assert not hasattr(cache, "cache") and not hasattr(cache, "run")
    head = tiny_eagle_pair(tokenizer, tmp_path).loaded["eagle"]
    eagle = make_cache(None, torch.device("cpu"), head.costs, DecodeConfig(cuda_graphs="static"), runner=head.module)
    assert eagle.lean is None and eagle.passes.lean is head.module.lean
    with pytest.raises(AssertionError, match="does not use"):  # the dynamic cache still builds both
        make_cache(tiny.target, torch.device("cpu"), tiny.target_costs, DecodeConfig())


def test_trace_meta_says_how_passes_ran(tiny, tmp_path):
    from engine import Trace

    trace = generate(tiny, PROMPTS[:2], DecodeConfig(depth=2, max_new_tokens=8, cuda_graphs="padded"))
    meta = trace.meta
    assert meta["decode_passes"] == "eager (static KV buffers, padded to graph buckets)"
    assert meta["graphs_captured"] == 0 and meta["graph_eager_passes"] > 0 and meta["cuda_graphs"] == "padded"
    plain = generate(tiny, PROMPTS[:2], DecodeConfig(depth=2, max_new_tokens=8))  # cuda_graphs "off", backend torch
    assert plain.meta["decode_passes"] == "eager (dynamic KV cache)" and plain.meta["graph_note"] is None
    assert plain.meta["backend"] == "torch" and meta["backend"] == "cuda_graphs"
    auto = generate(tiny, PROMPTS[:2], DecodeConfig(depth=2, max_new_tokens=8, cuda_graphs="auto"))
    assert auto.meta["decode_passes"] == "eager (dynamic KV cache)"
    assert auto.meta["graph_note"] == "CUDA graphs need CUDA; this run is on cpu"
    path = tmp_path / "t.json"
    trace.to_json(path)
    assert Trace.from_json(path).meta["decode_passes"] == meta["decode_passes"]  # the strict loader takes it


# --- on a GPU -----------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_graphs_equal_eager_float32():
    from engine import load_pair
    from engine.decoding.warmup import warm_graphs

    pair = load_pair(dtype="float32", device="cuda")
    prompts = ["Hi", "Write a long story about a dragon.", "What is the capital of France?"]
    for drafter in ("model", "eagle", "ngram"):
        cfg = DecodeConfig(depth=3, drafter=drafter, max_new_tokens=32, cuda_graphs="off")
        eager = generate(pair, prompts, cfg)
        graph_cfg = DecodeConfig.from_dict(cfg.to_dict() | {"cuda_graphs": "auto"})
        assert warm_graphs(pair, prompts, graph_cfg)["graphs_ready"] > 0  # captured at load, before any timed run
        graphs = generate(pair, prompts, graph_cfg)
        assert graphs.meta["graph_replays"] > 0
        assert graphs.output_ids == eager.output_ids, drafter


def test_fast_pass_buffers_on_the_cpu_are_float32_on_fused_and_the_models_dtype_on_native():
    """small_attend's torch arithmetic reads float32 keys and values: the fused pass gets float32 buffers on the CPU;
    the native attention reads bfloat16 ones as they are (half the bytes), so the native pass keeps the model's dtype,
    as other modes and devices do."""
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert route_for(Backend("fused", cpu)).buffer_dtype(cpu, torch.bfloat16) == torch.float32
    assert route_for(Backend("native", cpu)).buffer_dtype(cpu, torch.bfloat16) == torch.bfloat16
    for name in ("fused", "native"):
        assert route_for(Backend(name, cpu)).buffer_dtype(cpu, torch.float32) == torch.float32
    assert route_for(Backend("fused", cuda)).buffer_dtype(cuda, torch.bfloat16) == torch.bfloat16
    assert route_for(Backend("cuda_graphs", cpu, "static")).buffer_dtype(cpu, torch.bfloat16) == torch.bfloat16
