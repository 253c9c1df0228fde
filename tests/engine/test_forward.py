"""Forwards and costs: the lean Llama forward, reduced draft heads, FLOP formulas, Leviathan's formulas."""

from __future__ import annotations

import pytest
import torch
from conftest import PROMPTS, tiny_pair

from engine import DecodeConfig, generate
from engine.costs import ModelCosts, expected_speedup, expected_tokens_per_step, operations_factor
from engine.model.pair import Loaded


# --- costs -------------------------------------------------------------------------------------
def test_lean_forward_matches_transformers(tokenizer):
    """engine/model/fastllama.py computes what LlamaForCausalLM computes: ragged prefill, multi-token verify,
    per-row roll-back, row selection and single-token steps all give the same logits (float32)."""
    from engine.model.backend import Backend
    from engine.model.kvcache import RaggedCache

    model = __import__("conftest").tiny_llama(len(tokenizer), layers=3, seed=5)
    costs = ModelCosts.from_model(model)
    prompts = [[5, 6, 7, 8, 9, 10, 11], [20, 21, 22], [30, 31, 32, 33, 34]]
    logits = {}
    for lean in (False, True):
        cache = RaggedCache(model, torch.device("cpu"), costs, backend=Backend("torch" if lean else "transformers", torch.device("cpu")))
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
    draft = Loaded(pair.weights("draft"), "tiny-draft + reduced head", vocab=torch.tensor(sorted(vocab_ids)))
    return replace(pair, loaded={"draft": draft})


def test_reduced_draft_head_is_lossless_and_drafts_only_its_vocabulary(tokenizer):
    """FR-Spec: the draft scores a subset of the vocabulary. Output is unchanged (float32 greedy), every
    drafted token is in the subset, and the draft's FLOPs shrink with its head."""
    full = tiny_pair(tokenizer, draft_noise=0.01)
    ar = generate(full, PROMPTS, DecodeConfig(mode="autoregressive", max_new_tokens=20))
    full_spec = generate(full, PROMPTS, DecodeConfig(depth=3, max_new_tokens=20))
    # the subset: every token the target emits here (what distillation keeps) plus 200 others
    subset = set(t for out in ar.output_ids for t in out) | set(range(200))
    pair = _reduced_head_pair(tokenizer, subset)
    assert pair.loaded["draft"].costs.head_params < full.loaded["draft"].costs.head_params
    spec = generate(pair, PROMPTS, DecodeConfig(depth=3, max_new_tokens=20))
    assert spec.output_ids == ar.output_ids
    drafted = [d.id for step in spec.steps for s in step.seqs for d in s.drafted]
    assert drafted and set(drafted) <= subset
    assert spec.summary["alpha"] > 0
    assert sum(st.draft_flops for st in spec.steps) < sum(st.draft_flops for st in full_spec.steps)


def test_reduced_draft_head_sampling_gives_q_over_the_whole_vocabulary(tokenizer):
    from engine.drafters import ModelDrafter

    pair = _reduced_head_pair(tokenizer, range(0, 2000, 3))
    loaded = pair.loaded["draft"]
    drafter = ModelDrafter(loaded.module, pair.device, loaded.costs, pad_id=2, vocab=loaded.vocab)
    seqs = [pair.encode_prompt(p) for p in PROMPTS]
    with torch.inference_mode():
        drafter.prefill(seqs)
        draft = drafter.propose([s + [5] for s in seqs], 3, DecodeConfig(temperature=1.0, top_p=1.0), torch.Generator().manual_seed(0))
    vocab = loaded.module.get_output_embeddings().weight.shape[0]
    assert draft.probs.shape == (3, 3, vocab)
    assert torch.allclose(draft.probs.sum(-1), torch.ones(3, 3), atol=1e-4)
    outside = torch.ones(vocab, dtype=torch.bool)
    outside[loaded.vocab] = False
    assert float(draft.probs[..., outside].abs().max()) == 0.0
    assert torch.equal(draft.q_x, draft.probs.gather(2, draft.ids[..., None]).squeeze(-1))


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "unusable"),
        ('{"format": "other", "ids": [1]}', "expected format"),
        ('{"format": "speclab.draft_vocab/1", "ids": [1, 999999]}', "non-empty list of token ids"),
        ('{"format": "speclab.draft_vocab/1", "ids": [3, 3]}', "duplicates"),
    ],
)
def test_bad_draft_vocab_file_falls_back_to_the_full_head(tmp_path, tokenizer, content, message):
    from engine.model.pair import load_draft_vocab

    model = __import__("conftest").tiny_llama(len(tokenizer))
    (tmp_path / "draft_vocab.json").write_text(content)
    ids, note = load_draft_vocab(str(tmp_path), model)
    assert ids is None and message in note and "full vocabulary" in note
    (tmp_path / "draft_vocab.json").write_text('{"format": "speclab.draft_vocab/1", "ids": [7, 2, 5]}')
    ids, note = load_draft_vocab(str(tmp_path), model)
    assert ids.tolist() == [2, 5, 7] and note is None


def test_lean_forward_only_for_plain_llama(tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    from engine.model.fastllama import supports

    assert supports(__import__("conftest").tiny_llama(len(tokenizer)))
    biased = LlamaForCausalLM(
        LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, attention_bias=True)
    )
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


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n", [1, 5, 25])
def test_grouped_query_attention_with_a_mask_equals_expanded_heads(dtype, n):
    """`attend` hands a masked grouped-query attention to SDPA's GQA path on the CPU (no kv expansion):
    the output must equal expanding the kv heads, bit for bit."""
    import torch.nn.functional as F

    from engine.model.layer import attend

    gen = torch.Generator().manual_seed(n)
    q = torch.randn(2, 9, n, 64, generator=gen).to(dtype)
    k, v = (torch.randn(2, 3, 40, 64, generator=gen).to(dtype) for _ in range(2))
    mask = torch.rand(2, 1, n, 40, generator=gen) > 0.2
    mask[..., 0] = True  # every query sees a column
    expanded = [t[:, :, None].expand(2, 3, 3, 40, 64).reshape(2, 9, 40, 64) for t in (k, v)]
    reference = F.scaled_dot_product_attention(q, *expanded, attn_mask=mask, scale=0.125)
    assert torch.equal(attend(q, k, v, mask, False, 0.125), reference)
