"""The decode loop: exactness against transformers' generate, caches and roll-back, policies, the clock."""

from __future__ import annotations

import pytest
from conftest import PROMPTS, hf_greedy, tiny_pair

from engine import DecodeConfig, generate, generate_steps
from engine.model.kvcache import COMPACT_SLACK


# --- exactness ---------------------------------------------------------------------------------
@pytest.mark.parametrize("drafter", ["model", "ngram"])
@pytest.mark.parametrize("prompts", [PROMPTS[:1], PROMPTS], ids=["batch1", "ragged3"])
def test_tiny_greedy_speculative_equals_ar_equals_hf(tiny, drafter, prompts):
    n = 24
    ar = generate(tiny, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=n))
    spec = generate(tiny, prompts, DecodeConfig(mode="speculative", depth=3, drafter=drafter, max_new_tokens=n))
    assert spec.output_ids == ar.output_ids
    for prompt, out in zip(prompts, ar.output_ids):
        assert out == hf_greedy(tiny, prompt, n)
        assert len(out) == n


@pytest.mark.parametrize("slack", [0, 4, 10_000], ids=["compact-every-step", "compact-sometimes", "never-compact"])
def test_rollback_holes_and_compaction_keep_output_exact(tiny, monkeypatch, slack):
    """Rejected tokens become masked holes; compaction packs rows again. Either way: output == plain decoding."""
    import engine.model.kvcache as kvcache

    monkeypatch.setattr(kvcache, "COMPACT_SLACK", slack)
    n = 32
    ar = generate(tiny, PROMPTS, DecodeConfig(mode="autoregressive", max_new_tokens=n))
    stream = generate_steps(tiny, PROMPTS, DecodeConfig(depth=4, max_new_tokens=n))
    compactions = 0
    for _ in stream:
        if stream.active:
            compactions = stream.target_cache.compactions
            assert stream.target_cache.width <= int(stream.target_cache.lengths.max()) + slack
    assert stream.trace.output_ids == ar.output_ids
    assert (compactions > 0) == (slack < 10_000)


def test_draft_equal_to_target_accepts_everything(tokenizer):
    pair = tiny_pair(tokenizer, draft_same_as_target=True)
    assert pair.weights("draft") is pair.target
    trace = generate(pair, PROMPTS, DecodeConfig(depth=4, max_new_tokens=20))
    # The trace's p (target, from one verify pass) and q (draft, token by token) are the same model's probabilities.
    pairs = [(t.target_prob, t.draft_prob) for st in trace.steps for sq in st.seqs for t in sq.drafted]
    assert pairs and all(abs(p - q) < 1e-3 and 0 < p <= 1 for p, q in pairs)
    assert trace.summary["acceptance_rate"] == 1.0
    assert trace.summary["alpha"] == 1.0
    assert all(p == 1.0 for p in trace.summary["per_position_acceptance"])
    # Each sequence-step yields depth + 1 tokens, so a 20-token answer needs 1 prefill + 4 passes (1 + 4*5 > 20).
    assert trace.summary["target_forwards"] == 5


EMBEDDED_N = 32
EMBEDDED_PROMPTS = PROMPTS[:2] + ["Copy this exactly: the quick brown fox jumps over the lazy dog, the quick brown fox."]


@pytest.fixture(scope="module")
def embedded_references(embedded_f32):
    """The embedded target's plain decoding and transformers' generate() of the same prompts: the same for every
    drafter, so made once for the module (each drafter's test compares its own runs with them)."""
    ar = generate(embedded_f32, EMBEDDED_PROMPTS, DecodeConfig(mode="autoregressive", max_new_tokens=EMBEDDED_N))
    return ar, [hf_greedy(embedded_f32, prompt, EMBEDDED_N) for prompt in EMBEDDED_PROMPTS]


@pytest.mark.slow
@pytest.mark.parametrize("drafter", ["model", "ngram"])
def test_embedded_float32_exact(embedded_f32, embedded_references, drafter):
    """The real target, float32: speculative == AR == transformers generate(), batch 1 and a ragged batch."""
    n, prompts = EMBEDDED_N, EMBEDDED_PROMPTS
    ar, hf = embedded_references
    spec = generate(embedded_f32, prompts, DecodeConfig(depth=4, drafter=drafter, max_new_tokens=n))
    single = generate(embedded_f32, prompts[1:2], DecodeConfig(depth=4, drafter=drafter, max_new_tokens=n))
    assert spec.output_ids == ar.output_ids
    assert single.output_ids[0] == ar.output_ids[1]
    assert ar.output_ids == hf
    assert spec.summary["target_forwards"] < ar.summary["target_forwards"] or drafter == "model"
    assert spec.summary["flops"] > 0 and spec.summary["bytes"] > 0


def test_depth_zero_is_plain_decoding(tiny):
    ar = generate(tiny, PROMPTS, DecodeConfig(mode="autoregressive", max_new_tokens=10))
    d0 = generate(tiny, PROMPTS, DecodeConfig(mode="speculative", depth=0, max_new_tokens=10))
    assert d0.output_ids == ar.output_ids
    assert d0.summary["target_forwards"] == ar.summary["target_forwards"] == 10
    assert ar.summary["acceptance_rate"] is None and ar.summary["alpha"] is None


# --- caches ------------------------------------------------------------------------------------
@pytest.mark.parametrize("drafter", ["model", "ngram"])
def test_cache_lengths_follow_sequence_lengths(tiny, drafter, monkeypatch):
    monkeypatch.setenv("SPECLAB_BACKEND", "torch")  # the dynamic cache, whose layers this reads (the static one: test_static_cache.py)
    stream = generate_steps(tiny, PROMPTS, DecodeConfig(depth=3, drafter=drafter, max_new_tokens=16))
    checked = 0
    for _ in stream:
        cache = stream.target_cache
        if not stream.active:  # the last step: everything finished
            continue
        # Target caches all but the pending last token; the draft all but the last two.
        assert cache.lengths.tolist() == [len(s.tokens) - 1 for s in stream.active]
        # every row's unmasked columns are exactly its tokens; holes stay within the compaction slack
        assert cache.valid.sum(1).tolist() == cache.lengths.tolist()
        assert max(cache.lengths.tolist()) <= cache.width <= max(cache.lengths.tolist()) + COMPACT_SLACK
        for layer in cache.cache.layers:
            assert layer.keys.shape[0] == len(stream.active) and layer.keys.shape[2] == cache.width
        if drafter == "model":
            draft = stream.drafter.cache
            assert draft.lengths.tolist() == [len(s.tokens) - stream.drafter.lag for s in stream.active]
            assert draft.valid.sum(1).tolist() == draft.lengths.tolist()
        checked += 1
    assert checked >= 3
    assert stream.trace is not None


def test_ragged_rows_keep_their_own_acceptance(tiny):
    """Different rows accept different counts in the same step; no row is truncated to another's."""
    cfg = DecodeConfig(depth=4, max_new_tokens=30)
    trace = generate(tiny, PROMPTS + ["Tell me about owls."], cfg)
    counts = [tuple(s.num_accepted for s in step.seqs) for step in trace.steps if step.kind == "decode"]
    assert any(len(set(c)) > 1 for c in counts), "expected at least one step with differing acceptance"
    single = [generate(tiny, [p], cfg).output_ids[0] for p in PROMPTS]
    assert trace.output_ids[:3] == single
    # Each row's steps advance it by its own accepted count + 1.
    for step in trace.steps[1:]:
        for seq in step.seqs:
            assert len(seq.emitted) == seq.num_accepted + 1 or seq.finished


def test_finished_sequences_leave_the_batch(embedded_f32):
    # "Hi" is answered in a few tokens and hits EOS; the longer request keeps going alone.
    stream = generate_steps(embedded_f32, ["Hi", "Write a long story about a dragon."], DecodeConfig(depth=2, max_new_tokens=40))
    batches = [step.batch for step in stream]
    trace = stream.trace
    assert len(trace.output_ids[0]) < 40 and trace.output_ids[0][-1] in embedded_f32.eos_ids
    assert batches[0] == 2 and batches[-1] == 1


def test_off_above_batch_policy(tiny):
    cfg = DecodeConfig(depth=3, policy="off_above_batch", disable_by_batch_size=2, max_new_tokens=8)
    trace = generate(tiny, PROMPTS, cfg)
    assert all(step.depth == 0 for step in trace.steps if step.kind == "decode" and step.batch > 2)
    small = generate(tiny, PROMPTS[:2], cfg)
    assert any(step.depth == 3 for step in small.steps)
    assert trace.output_ids == generate(tiny, PROMPTS, DecodeConfig(mode="autoregressive", max_new_tokens=8)).output_ids


def test_heuristic_policy_adapts_depth(tokenizer, tiny):
    """Deeper after full acceptance (+2), shallower after a rejection (-1, not below 1); output stays exact."""
    perfect = tiny_pair(tokenizer, draft_same_as_target=True)
    cfg = DecodeConfig(depth=2, policy="heuristic", max_new_tokens=40)
    depths = [s.depth for s in generate(perfect, PROMPTS[:1], cfg).steps if s.kind == "decode"]
    assert depths[:3] == [2, 4, 6]
    trace = generate(tiny, PROMPTS[:1], DecodeConfig(depth=6, policy="heuristic", max_new_tokens=40))
    depths = [s.depth for s in trace.steps if s.kind == "decode"]
    assert depths[0] == 6 and min(depths) >= 1 and depths[1] in (5, 8)
    assert trace.output_ids == generate(tiny, PROMPTS[:1], DecodeConfig(mode="autoregressive", max_new_tokens=40)).output_ids
    big = generate(tiny, PROMPTS, DecodeConfig(depth=3, policy="heuristic", disable_by_batch_size=2, max_new_tokens=6))
    assert all(s.depth == 0 for s in big.steps if s.batch > 2)


def test_consumer_time_is_off_the_clock(tiny):
    """Time the caller spends between steps (drawing a live view) is not billed to decoding."""
    import time

    stream = generate_steps(tiny, PROMPTS[:1], DecodeConfig(depth=2, max_new_tokens=6))
    for _ in stream:
        time.sleep(0.2)
    trace = stream.trace
    busy = sum(s.step_ms for s in trace.steps) / 1000
    assert trace.summary["wall_s"] < busy + 0.15  # the 0.2 s pauses (one per step) are not in it


def test_streams_never_leave_the_consumers_thread_in_inference_mode(tiny):
    """Two streams iterated in lockstep (one left suspended, then dropped) must leave grad mode as it was: the loop
    enters inference mode around its work, never across a yield (it once leaked into later training tests)."""
    import gc

    import torch

    assert torch.is_grad_enabled()
    a = generate_steps(tiny, PROMPTS[:1], DecodeConfig(depth=2, max_new_tokens=4))
    b = generate_steps(tiny, PROMPTS[:1], DecodeConfig(depth=2, max_new_tokens=12))
    for _ in zip(a, b):  # a ends first; b stays suspended
        assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    del a, b
    gc.collect()
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    x = torch.ones(2, requires_grad=True)
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
