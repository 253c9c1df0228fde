"""Confidence-gated drafting (DecodeConfig.confidence_threshold): a model drafter stops a row's draft once
the product of its own probabilities over that draft falls below the threshold (EAGLE-2's joint confidence).
It must stay lossless (greedy == plain decoding, ragged batches included), stop exactly where the rule
says, keep sampling exact (a stopped row's padding has q = 0, so its next token comes from p), and with
threshold 0 draft the full depth as before."""

from __future__ import annotations

import math

import pytest
import torch

from engine import DecodeConfig, generate, generate_steps
from engine.drafters import ConfidenceGate
from engine.sampling import accept_or_resample

PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea, the wind and the salt on the rocks.",
    "Hi",
]


@pytest.mark.parametrize("prompts", [PROMPTS[:1], PROMPTS], ids=["batch1", "ragged3"])
@pytest.mark.parametrize("threshold", [0.05, 0.5])
def test_gated_greedy_equals_plain(tiny, prompts, threshold):
    ar = generate(tiny, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=24))
    spec = generate(tiny, prompts, DecodeConfig(depth=6, confidence_threshold=threshold, max_new_tokens=24))
    assert spec.output_ids == ar.output_ids


def test_rows_stop_where_their_joint_confidence_falls_below_the_threshold(tiny):
    threshold, depth = 0.3, 6
    stream = generate_steps(tiny, PROMPTS, DecodeConfig(depth=depth, confidence_threshold=threshold, max_new_tokens=24))
    lengths = []
    for step in stream:
        if step.kind != "decode" or step.depth == 0:
            continue
        longest = max(len(s.drafted) for s in step.seqs)
        assert longest == step.depth  # the pass is as wide as the longest draft, no wider
        for s in step.seqs:
            q = [t.draft_prob for t in s.drafted]
            lengths.append(len(q))
            assert math.prod(q[:-1]) >= threshold  # every token before the last kept the row going
            if len(q) < step.depth:
                assert math.prod(q) < threshold  # ... and the last one stopped it
    assert min(lengths) < depth  # the gate did cut some drafts short


def test_threshold_zero_drafts_full_depth_and_a_threshold_drafts_less(tiny):
    full = generate(tiny, PROMPTS[:1], DecodeConfig(depth=4, max_new_tokens=24))
    gated = generate(tiny, PROMPTS[:1], DecodeConfig(depth=4, confidence_threshold=0.5, max_new_tokens=24))
    decode = [s for s in full.steps if s.kind == "decode" and s.depth]
    assert all(len(q.drafted) == 4 for st in decode for q in st.seqs if q.drafted and st.depth == 4)
    assert gated.summary["drafted_tokens"] < full.summary["drafted_tokens"]
    assert gated.summary["flops"] < full.summary["flops"]  # fewer drafts: less draft and verify work


def test_gate_pads_stopped_rows_with_zero_q():
    gate = ConfidenceGate(2, 0.5, torch.device("cpu"))
    vocab = 5
    q_full = torch.full((2, vocab), 0.2)
    gate.add(torch.tensor([1, 2]), torch.tensor([0.9, 0.4]), q_full)  # row 1 falls below 0.5: stops after this
    assert not gate.done
    gate.add(torch.tensor([3, 4]), torch.tensor([0.9, 0.9]), q_full)  # 0.81 >= 0.5: row 0 goes on
    gate.add(torch.tensor([0, 0]), torch.tensor([0.5, 0.9]), q_full)  # 0.405: row 0 stops
    assert gate.done
    draft = gate.draft(forwards=3, fed_tokens=3)
    assert draft.valid.tolist() == [[True, True, True], [True, False, False]]
    assert draft.q_x[1, 1:].tolist() == [0.0, 0.0]
    assert torch.all(draft.probs[1, 1:] == 0) and torch.all(draft.probs[0] > 0)


def test_stopped_row_samples_its_next_token_from_p():
    """A row whose draft stopped after 1 token and was accepted: its next token is drawn from p at position 1,
    never from the residual p - q of the padding position (q = 0 there)."""
    gate = ConfidenceGate(1, 0.5, torch.device("cpu"))
    q = torch.tensor([[0.0, 1.0, 0.0]])
    gate.add(torch.tensor([1]), torch.tensor([0.4]), q)  # drafted token 1 with q = 1 ... and stopped
    gate.add(torch.tensor([2]), torch.tensor([0.9]), torch.tensor([[0.0, 0.0, 1.0]]))  # padding (another row's width)
    draft = gate.draft(forwards=2, fed_tokens=2)
    p = torch.tensor([[[0.0, 1.0, 0.0], [0.2, 0.3, 0.5], [1.0, 0.0, 0.0]]])  # p accepts token 1 surely
    gen = torch.Generator().manual_seed(0)
    counts = torch.zeros(3)
    for _ in range(400):
        n, nxt = accept_or_resample(draft.ids, draft.probs, p, draft.valid, gen)
        assert n.item() == 1
        counts[nxt.item()] += 1
    assert counts[2] > 0 and counts[0] > 0 and counts[1] > 0  # all of p at position 1, not p - q (which drops 2)


def test_gated_sampling_is_seeded_and_reports_valid_drafts(tiny):
    cfg = DecodeConfig(depth=5, confidence_threshold=0.2, temperature=1.0, max_new_tokens=16)
    a = generate(tiny, PROMPTS, cfg)
    b = generate(tiny, PROMPTS, cfg)
    assert a.output_ids == b.output_ids
    for step in a.steps:
        for s in step.seqs:
            assert all(0 < t.draft_prob <= 1 for t in s.drafted)
