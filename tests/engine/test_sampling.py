"""Acceptance and sampling: Leviathan et al.'s accept/resample rule, greedy acceptance, n-gram padding, seeding."""

from __future__ import annotations

import pytest
import torch
from conftest import PROMPTS, chi2_pvalue

from engine import DecodeConfig, generate
from engine.drafters import NgramDrafter
from engine.sampling import accept_greedy, accept_or_resample, first_rejection, probs_from_logits


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
