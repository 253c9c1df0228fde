"""Engine tests: exactness against transformers' generate, the accept/resample rule, caches, costs, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from conftest import tiny_pair
from engine import ConfigError, DecodeConfig, ModelLoadError, Trace, TraceError, generate, generate_steps, load_pair
from engine.costs import ModelCosts, expected_speedup, expected_tokens_per_step, operations_factor
from engine.drafters import NgramDrafter
from engine.kvcache import COMPACT_SLACK
from engine.sampling import accept_greedy, accept_or_resample, first_rejection, probs_from_logits

PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea, the wind and the salt on the rocks.",
    "Hi",
]


def chi2_pvalue(samples: torch.Tensor, p: torch.Tensor) -> float:
    """Chi-square goodness of fit of integer samples to the distribution p."""
    observed = np.bincount(samples.numpy(), minlength=p.numel())
    expected = p.double().numpy() / p.double().sum().item() * observed.sum()
    return chisquare(observed, expected).pvalue


def hf_greedy(pair, prompt: str, max_new_tokens: int) -> list[int]:
    """Reference: transformers' own greedy generate() on the same chat-templated prompt."""
    ids = torch.tensor([pair.encode_prompt(prompt)])
    eos = sorted(pair.eos_ids) or None
    with torch.inference_mode():
        out = pair.target.generate(
            ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=max_new_tokens,
            eos_token_id=eos, pad_token_id=eos[0] if eos else 0,
        )  # fmt: skip
    return out[0, ids.shape[1] :].tolist()


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
    import engine.kvcache as kvcache

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
    assert pair.draft is pair.target
    trace = generate(pair, PROMPTS, DecodeConfig(depth=4, max_new_tokens=20))
    # The trace's p (target, from one verify pass) and q (draft, token by token) are the same model's probabilities.
    pairs = [(t.target_prob, t.draft_prob) for st in trace.steps for sq in st.seqs for t in sq.drafted]
    assert pairs and all(abs(p - q) < 1e-3 and 0 < p <= 1 for p, q in pairs)
    assert trace.summary["acceptance_rate"] == 1.0
    assert trace.summary["alpha"] == 1.0
    assert all(p == 1.0 for p in trace.summary["per_position_acceptance"])
    # Each sequence-step yields depth + 1 tokens, so a 20-token answer needs 1 prefill + 4 passes (1 + 4*5 > 20).
    assert trace.summary["target_forwards"] == 5


@pytest.mark.slow
@pytest.mark.parametrize("drafter", ["model", "ngram"])
def test_embedded_float32_exact(embedded_f32, drafter):
    """The real target, float32: speculative == AR == transformers generate(), batch 1 and a ragged batch."""
    n = 32
    prompts = PROMPTS[:2] + ["Copy this exactly: the quick brown fox jumps over the lazy dog, the quick brown fox."]
    ar = generate(embedded_f32, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=n))
    spec = generate(embedded_f32, prompts, DecodeConfig(depth=4, drafter=drafter, max_new_tokens=n))
    single = generate(embedded_f32, prompts[1:2], DecodeConfig(depth=4, drafter=drafter, max_new_tokens=n))
    assert spec.output_ids == ar.output_ids
    assert single.output_ids[0] == ar.output_ids[1]
    for prompt, out in zip(prompts, ar.output_ids):
        assert out == hf_greedy(embedded_f32, prompt, n)
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
def test_cache_lengths_follow_sequence_lengths(tiny, drafter):
    stream = generate_steps(tiny, PROMPTS, DecodeConfig(depth=3, drafter=drafter, max_new_tokens=16))
    checked = 0
    for step in stream:
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


# --- sampling ----------------------------------------------------------------------------------
def test_first_rejection():
    accepted = torch.tensor([[True, True, False, True], [False, True, True, True], [True, True, True, True]])
    assert first_rejection(accepted).tolist() == [2, 0, 4]


def test_top_p_keeps_the_nucleus():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    probs = probs_from_logits(logits, 1.0, 0.8)
    assert torch.allclose(probs, torch.tensor([0.625, 0.375, 0.0, 0.0]))
    assert probs_from_logits(logits, 1.0, 0.01)[0] == 1.0  # the top token always survives


def test_greedy_acceptance_rule():
    logits = torch.full((2, 4, 10), -10.0)
    for r, seq in enumerate([[3, 4, 5, 6], [3, 9, 5, 6]]):
        for j, t in enumerate(seq):
            logits[r, j, t] = 10.0
    drafts = torch.tensor([[3, 4, 5], [3, 4, 5]])
    n, nxt = accept_greedy(drafts, logits, torch.ones(2, 3, dtype=torch.bool))
    assert n.tolist() == [3, 1] and nxt.tolist() == [6, 9]


@pytest.mark.parametrize("depth", [1, 3])
def test_accept_or_resample_reproduces_target_distribution(depth):
    """Leviathan et al. Alg. 1 on toy distributions: emitted tokens follow p exactly (chi-square, 20k trials)."""
    trials, vocab = 20000, 6
    gen = torch.Generator().manual_seed(1234)
    p = torch.tensor([0.05, 0.30, 0.10, 0.25, 0.20, 0.10])
    q = torch.tensor([0.40, 0.05, 0.25, 0.05, 0.15, 0.10])  # a poor draft: many rejections
    draft_ids = torch.multinomial(q.expand(trials, vocab), depth, replacement=True, generator=gen)  # (N, k) iid from q
    draft_probs = q.expand(trials, depth, vocab)
    target_probs = p.expand(trials, depth + 1, vocab)
    num_acc, nxt = accept_or_resample(draft_ids, draft_probs, target_probs, torch.ones(trials, depth, dtype=torch.bool), gen)
    # The first emitted token is the first draft if accepted, else the resample.
    first = torch.where(num_acc >= 1, draft_ids[:, 0], nxt)
    assert chi2_pvalue(first, p) > 1e-3
    # Acceptance rate per token is sum(min(p, q)) (Leviathan's alpha for context-free p, q).
    expected_alpha = torch.minimum(p, q).sum().item()
    assert abs((num_acc >= 1).float().mean().item() - expected_alpha) < 0.02
    if depth > 1:  # the second emitted token, in rows that accepted the first, also follows p
        rows = num_acc >= 1
        second = torch.where(num_acc[rows] >= 2, draft_ids[rows, 1], nxt[rows])
        assert chi2_pvalue(second, p) > 1e-3


def test_ngram_padding_gets_bonus_from_p():
    """A row that ran out of n-gram drafts samples its next token from p (q = 0 there)."""
    gen = torch.Generator().manual_seed(0)
    trials, vocab = 20000, 4
    p = torch.tensor([0.1, 0.2, 0.3, 0.4])
    draft_ids = torch.zeros(trials, 2, dtype=torch.long)
    valid = torch.tensor([[True, False]]).expand(trials, 2)
    draft_probs = torch.zeros(trials, 2, vocab)
    draft_probs[:, 0, 0] = 1.0  # point mass on token 0 at position 1; padding at position 2
    n, nxt = accept_or_resample(draft_ids, draft_probs, p.expand(trials, 3, vocab), valid, gen)
    assert n.max().item() <= 1
    first = torch.where(n >= 1, draft_ids[:, 0], nxt)
    assert chi2_pvalue(first, p) > 1e-3


def test_sampling_is_seeded(tiny):
    cfg = DecodeConfig(depth=3, temperature=0.8, top_p=0.9, max_new_tokens=16, seed=7)
    a, b = generate(tiny, PROMPTS, cfg), generate(tiny, PROMPTS, cfg)
    assert a.output_ids == b.output_ids
    c = generate(tiny, PROMPTS, DecodeConfig(depth=3, temperature=0.8, top_p=0.9, max_new_tokens=16, seed=8))
    assert c.output_ids != a.output_ids


def test_ngram_lookup():
    tokens = [5, 6, 7, 8, 9, 1, 5, 6, 7]
    assert NgramDrafter.lookup(tokens, 3, 3) == [8, 9, 1]
    assert NgramDrafter.lookup([1, 2, 3], 3, 3) == []
    assert NgramDrafter.lookup([4, 1, 2, 4], 2, 2) == [1, 2]  # falls back to a 1-gram
    assert NgramDrafter.lookup([5, 6, 7, 99, 3, 5, 6], 3, 2, frozenset({99})) == [7]  # stops before a special token


def test_consumer_time_is_off_the_clock(tiny):
    """Time the caller spends between steps (drawing a live view) is not billed to decoding."""
    import time

    stream = generate_steps(tiny, PROMPTS[:1], DecodeConfig(depth=2, max_new_tokens=6))
    for _ in stream:
        time.sleep(0.2)
    trace = stream.trace
    busy = sum(s.step_ms for s in trace.steps) / 1000
    assert trace.summary["wall_s"] < busy + 0.15  # the 0.2 s pauses (one per step) are not in it


# --- costs -------------------------------------------------------------------------------------
def test_lean_forward_matches_transformers(tokenizer):
    """engine/fastllama.py computes what LlamaForCausalLM computes: ragged prefill, multi-token verify,
    per-row roll-back, row selection and single-token steps all give the same logits (float32)."""
    from engine.kvcache import RaggedCache

    model = __import__("conftest").tiny_llama(len(tokenizer), layers=3, seed=5)
    costs = ModelCosts.from_model(model)
    prompts = [[5, 6, 7, 8, 9, 10, 11], [20, 21, 22], [30, 31, 32, 33, 34]]
    logits = {}
    for lean in (False, True):
        cache = RaggedCache(model, torch.device("cpu"), costs, lean=lean)
        assert (cache.lean is not None) == lean
        with torch.inference_mode():
            steps = [cache.prefill(prompts, 0, logits_to_keep=1), cache.forward(torch.tensor([[1, 2, 3]] * 3))]
            cache.keep(cache.lengths - torch.tensor([0, 2, 1]))  # ragged roll-back
            steps.append(cache.forward(torch.tensor([[4]] * 3)))
            cache._compact()  # pack the holes away: same logits afterwards
            steps.append(cache.forward(torch.tensor([[6]] * 3)))
            cache.select(torch.tensor([0]))  # rows 1, 2 finished
            steps += [cache.forward(torch.tensor([[7, 8]])), cache.forward(torch.tensor([[9]]))]
        logits[lean] = steps
    for ref, lean in zip(logits[False], logits[True]):
        assert ref.shape == lean.shape
        assert torch.allclose(ref, lean, atol=1e-4, rtol=1e-4), (ref - lean).abs().max()


def _reduced_head_pair(tokenizer, vocab_ids):
    from dataclasses import replace

    pair = tiny_pair(tokenizer, draft_noise=0.01)
    return replace(pair, draft_vocab=torch.tensor(sorted(vocab_ids)), draft_name="tiny-draft + reduced head")


def test_reduced_draft_head_is_lossless_and_drafts_only_its_vocabulary(tokenizer):
    """FR-Spec: the draft scores a subset of the vocabulary. Output is unchanged (float32 greedy), every
    drafted token is in the subset, and the draft's FLOPs shrink with its head."""
    full = tiny_pair(tokenizer, draft_noise=0.01)
    ar = generate(full, PROMPTS, DecodeConfig(mode="autoregressive", max_new_tokens=20))
    full_spec = generate(full, PROMPTS, DecodeConfig(depth=3, max_new_tokens=20))
    # the subset: every token the target emits here (what distillation keeps) plus 200 others
    subset = set(t for out in ar.output_ids for t in out) | set(range(200))
    pair = _reduced_head_pair(tokenizer, subset)
    assert pair.draft_costs.head_params < full.draft_costs.head_params
    spec = generate(pair, PROMPTS, DecodeConfig(depth=3, max_new_tokens=20))
    assert spec.output_ids == ar.output_ids
    drafted = [d.id for step in spec.steps for s in step.seqs for d in s.drafted]
    assert drafted and set(drafted) <= subset
    assert spec.summary["alpha"] > 0
    assert sum(st.draft_flops for st in spec.steps) < sum(st.draft_flops for st in full_spec.steps)


def test_reduced_draft_head_sampling_gives_q_over_the_whole_vocabulary(tokenizer):
    from engine.drafters import ModelDrafter

    pair = _reduced_head_pair(tokenizer, range(0, 2000, 3))
    drafter = ModelDrafter(pair.draft, pair.device, pair.draft_costs, pad_id=2, vocab=pair.draft_vocab)
    seqs = [pair.encode_prompt(p) for p in PROMPTS]
    with torch.inference_mode():
        drafter.prefill(seqs)
        draft = drafter.propose([s + [5] for s in seqs], 3, 1.0, 1.0, torch.Generator().manual_seed(0))
    vocab = pair.draft.get_output_embeddings().weight.shape[0]
    assert draft.probs.shape == (3, 3, vocab)
    assert torch.allclose(draft.probs.sum(-1), torch.ones(3, 3), atol=1e-4)
    outside = torch.ones(vocab, dtype=torch.bool)
    outside[pair.draft_vocab] = False
    assert float(draft.probs[..., outside].abs().max()) == 0.0
    assert torch.equal(draft.q_x, draft.probs.gather(2, draft.ids[..., None]).squeeze(-1))


@pytest.mark.parametrize("content, message", [
    ("{not json", "unusable"),
    ('{"format": "other", "ids": [1]}', "expected format"),
    ('{"format": "speclab.draft_vocab/1", "ids": [1, 999999]}', "non-empty list of token ids"),
    ('{"format": "speclab.draft_vocab/1", "ids": [3, 3]}', "duplicates"),
])
def test_bad_draft_vocab_file_falls_back_to_the_full_head(tmp_path, tokenizer, content, message):
    from engine.models import load_draft_vocab

    model = __import__("conftest").tiny_llama(len(tokenizer))
    (tmp_path / "draft_vocab.json").write_text(content)
    ids, note = load_draft_vocab(str(tmp_path), model)
    assert ids is None and message in note and "full vocabulary" in note
    (tmp_path / "draft_vocab.json").write_text('{"format": "speclab.draft_vocab/1", "ids": [7, 2, 5]}')
    ids, note = load_draft_vocab(str(tmp_path), model)
    assert ids.tolist() == [2, 5, 7] and note is None


def test_lean_forward_only_for_plain_llama(tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    from engine.fastllama import supports

    assert supports(__import__("conftest").tiny_llama(len(tokenizer)))
    biased = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                          num_attention_heads=2, attention_bias=True))
    assert not supports(biased)  # falls back to transformers' forward


def test_flops_formula_matches_flop_counter(tokenizer):
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import DynamicCache

    model = __import__("conftest").tiny_llama(len(tokenizer), layers=3, hidden=128, attn="eager")
    costs = ModelCosts.from_model(model)
    batch, past, new = 2, 40, 5
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        model(torch.randint(0, 1000, (batch, past)), past_key_values=cache, use_cache=True)
        with FlopCounterMode(display=False) as counter:
            model(torch.randint(0, 1000, (batch, new)), past_key_values=cache, use_cache=True)
    measured = counter.get_total_flops()
    assert abs(costs.forward_flops(batch, new, past) - measured) / measured < 0.05


def test_leviathan_formulas():
    assert expected_tokens_per_step(0.0, 4) == 1.0
    assert expected_tokens_per_step(1.0, 4) == 5.0
    assert abs(expected_tokens_per_step(0.5, 2) - 1.75) < 1e-12
    assert abs(expected_speedup(0.8, 4, 0.1) - (1 - 0.8**5) / (0.2 * 1.4)) < 1e-12
    assert operations_factor(0.8, 4, 0.05) > 1.0  # speculation always does more arithmetic


def test_speculative_run_does_more_flops(tiny):
    ar = generate(tiny, PROMPTS, DecodeConfig(mode="autoregressive", max_new_tokens=16))
    spec = generate(tiny, PROMPTS, DecodeConfig(depth=4, max_new_tokens=16))
    assert spec.summary["flops"] > ar.summary["flops"]
    assert spec.summary["flops_wasted"] > 0


# --- trace -------------------------------------------------------------------------------------
def test_trace_round_trip(tiny, tmp_path):
    trace = generate(tiny, PROMPTS, DecodeConfig(depth=3, drafter="ngram", max_new_tokens=12))
    path = tmp_path / "t.json"
    trace.to_json(path)
    loaded = Trace.from_json(path)
    assert loaded.to_dict() == json.loads(path.read_text())
    assert loaded.output_ids == trace.output_ids and loaded.summary == trace.summary
    assert loaded.steps[1].seqs[0].drafted == trace.steps[1].seqs[0].drafted
    assert list(tmp_path.iterdir()) == [path]  # atomic write leaves no temp file


@pytest.mark.parametrize(
    "content, message",
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be an object"),
        (b'{"schema": "other/9"}', "unsupported trace schema"),
        (b'{"schema": "speclab.trace/1", "config": {}}', "missing"),
        (b'{"schema": "speclab.trace/1", "config": {}, "sequences": [], "summary": {}, "steps": [{"bogus": 1}]}', "malformed"),
    ],
)
def test_corrupt_trace_is_refused(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=message):
        Trace.from_json(path)


def test_summary_fields(tiny):
    trace = generate(tiny, PROMPTS, DecodeConfig(depth=2, max_new_tokens=8))
    for key in [
        "new_tokens", "wall_s", "tokens_per_s", "target_forwards", "device", "dtype", "acceptance_rate", "alpha",
        "mean_accepted", "tokens_per_step", "per_position_acceptance", "flops", "flops_wasted", "bytes",
    ]:  # fmt: skip
        assert key in trace.summary
    assert trace.summary["new_tokens"] == 24
    assert abs(trace.summary["tokens_per_step"] - trace.summary["mean_accepted"] - 1) < 1e-12
    assert len(trace.summary["per_position_acceptance"]) == 2


# --- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"depth": -1}, "depth must be between 0 and 16"),
        ({"depth": 17}, "depth must be between 0 and 16"),
        ({"temperature": -0.5}, "temperature must be >= 0"),
        ({"top_p": 0.0}, r"top_p must be in \(0, 1\]"),
        ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
        ({"max_new_tokens": 0}, "max_new_tokens must be >= 1"),
        ({"mode": "fast"}, "mode must be one of"),
        ({"drafter": "oracle"}, "drafter must be one of"),
        ({"confidence_threshold": -0.1}, "confidence_threshold must be between 0 and 1"),
        ({"confidence_threshold": 1.5}, "confidence_threshold must be between 0 and 1"),
        ({"confidence_threshold": "high"}, "confidence_threshold must be between 0 and 1"),
    ],
)
def test_bad_config(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        DecodeConfig(**kwargs)


@pytest.mark.parametrize(
    "prompts, cfg, message",
    [
        ([], {}, "prompts is empty"),
        (["ok", "   "], {}, "prompt 2 is empty"),
        ("just a string", {}, "list of strings"),
        (["hello"], {"max_new_tokens": 100000}, "beyond the context window"),
        (["word " * 600], {}, "context window is 512"),
    ],
)
def test_bad_prompts(tiny, prompts, cfg, message):
    with pytest.raises(ConfigError, match=message):
        generate(tiny, prompts, DecodeConfig(**cfg))


def test_model_drafter_without_draft(tokenizer):
    pair = tiny_pair(tokenizer, with_draft=False)
    with pytest.raises(ConfigError, match="needs a draft model"):
        generate(pair, ["hi there"], DecodeConfig(drafter="model"))
    assert generate(pair, ["hi there"], DecodeConfig(drafter="ngram", max_new_tokens=4)).summary["new_tokens"] == 4


def test_unknown_hub_id_offline():
    with pytest.raises(ModelLoadError, match="Hugging Face Hub"):
        load_pair(target="no-such-org/no-such-model")


def test_draft_with_other_vocabulary_is_refused(tmp_path, tokenizer):
    from conftest import tiny_llama

    other = tiny_llama(1000)
    other.save_pretrained(tmp_path / "other")
    with pytest.raises(ModelLoadError, match="vocabulary of 1000 tokens"):
        load_pair(draft=str(tmp_path / "other"), dtype="float32")


def test_missing_draft_folder_is_an_error_when_asked_for(tmp_path):
    with pytest.raises(ModelLoadError, match="neither an existing folder"):
        load_pair(draft=str(tmp_path / "nope"), dtype="float32")


def test_cli_bad_input_is_one_line(capsys):
    from engine.__main__ import main

    assert main(["run", "--prompt", "hi", "--depth", "40"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: depth must be between 0 and 16") and "Traceback" not in err
    assert main(["bench", "--batch", "1", "--depth", "2", "--sequential", "0"]) == 2
    assert capsys.readouterr().err.startswith("error: --sequential and --baseline-prompts must be >= 1")
    assert main(["run", "--prompt", "hi", "--confidence", "2"]) == 2
    assert capsys.readouterr().err.startswith("error: confidence_threshold must be between 0 and 1")
    assert main(["bench", "--batch", "1", "--depth", "2", "--confidence", "0,-1"]) == 2
    assert capsys.readouterr().err.startswith("error: confidence thresholds must be between 0 and 1; got [-1.0]")


# --- bench -------------------------------------------------------------------------------------
def test_bench_grid_and_baselines_run_end_to_end(tiny):
    """The benchmark's code path (not its speed): every cell is measured, outputs match AR, the table prints."""
    from engine.bench import bench, format_table

    result = bench(tiny, [1, 2], [2], drafter="model", max_new_tokens=6, repeats=1, baseline=True,
                   baseline_prompts=2, sequential=3, log=lambda s: None)
    assert [(r["batch"], r["depth"]) for r in result["rows"]] == [(1, 2), (2, 2)]
    for r in result["rows"]:
        assert r["ar_tokens_per_s"] > 0 and r["spec_tokens_per_s"] > 0
        assert r["same_output"]  # float32 tiny models: speculative == AR
        assert r["c"] > 0 and r["predicted_speedup"] > 0
    b = result["baselines"]
    assert len(b["prompts"]) == 2
    assert b["ours_spec"]["outputs"] == b["ours_ar"]["outputs"] == b["hf_generate"]["outputs"]
    assert b["hf_drafting"]["outputs"] == b["hf_generate"]["outputs"]  # assisted generation is lossless too
    table = format_table(result)
    assert "assistant_model=draft" in table and "predicted" in table and "3 prompts one after another" in table


def test_bench_confidence_grid(tiny):
    """Each depth runs at each confidence threshold; the gated rows report how much they actually drafted."""
    from engine.bench import bench, format_table

    result = bench(tiny, [1], [3], drafter="model", max_new_tokens=8, repeats=1, sequential=2,
                   confidences=[0.0, 0.9], log=lambda s: None)
    fixed, gated = result["rows"]
    assert (fixed["confidence_threshold"], gated["confidence_threshold"]) == (0.0, 0.9)
    # (fixed drafts 3 a step, less near the end of the 8 tokens; gated stops on low confidence as well)
    assert 2 < fixed["drafted_per_step"] <= 3 and 1 <= gated["drafted_per_step"] < fixed["drafted_per_step"]
    assert fixed["same_output"] and gated["same_output"]
    assert "conf drafted" in format_table(result)


def test_heldout_prompt_set_is_disjoint_from_training_topics():
    from engine.bench import heldout_prompts, prompt_set_list
    from engine.distill import build_prompts

    prompts = build_prompts(seed=0)
    train_topics = {r["topic"] for r in prompts["train"]}
    held = heldout_prompts(16)
    assert len(held) == 16 and held == prompt_set_list("heldout")
    by_prompt = {r["prompt"]: r["topic"] for r in prompts["heldout"]}
    assert all(by_prompt[p] not in train_topics for p in held)
    with pytest.raises(ValueError, match="unknown prompt set"):
        prompt_set_list("poems")


def test_cuda_attention_avoids_cudnn_plans_and_cpu_is_untouched(monkeypatch):
    """On CUDA the engine turns off cuDNN's attention backend (a plan per new cache length cost 55-88 ms per
    decode step on an H200) unless SPECLAB_CUDNN_ATTENTION=1; on a CPU it leaves the flag alone. Setting
    the flag needs no GPU."""
    from engine.hardware import configure_attention

    before = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        configure_attention(torch.device("cpu"))
        assert torch.backends.cuda.cudnn_sdp_enabled()
        monkeypatch.setenv("SPECLAB_CUDNN_ATTENTION", "1")
        configure_attention("cuda")
        assert torch.backends.cuda.cudnn_sdp_enabled()
        monkeypatch.delenv("SPECLAB_CUDNN_ATTENTION")
        configure_attention("cuda")
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)
