"""The hybrid drafter (engine/drafters/hybrid.py: prompt lookup where the text repeats, the EAGLE head elsewhere):
lossless (greedy equals plain decoding, ragged batches included), both kinds of step really happen, the head keeps
taking in every verified token while the lookup drafts (its entries equal the target's cache after every step, and it
drafts what a head-only run drafts from the same text), and a lookup step runs no drafter pass at all."""

from __future__ import annotations

import numpy
import pytest
import torch

from engine import ConfigError, DecodeConfig, generate, generate_steps
from engine.bench.prompt_files import SPEC_BENCH, read_prompts, select
from engine.bench.prompts import batch_prompts
from engine.drafters import DRAFTERS, LookupEagleDrafter
from engine.drafters.base import Draft
from engine.drafters.hybrid import MIN_MATCH, substitute
from engine.drafters.ngram import NgramDrafter

TOKENS = 40


def _pair(embedded_f32):
    if "eagle" not in embedded_f32.loaded:
        pytest.skip("no shipped EAGLE head in assets/eagle")
    return embedded_f32


def _checked(pair, prompts, cfg) -> tuple[object, list]:
    """Run, checking after every step that the head holds exactly each row's tokens; returns (trace, [(row lengths,
    the head's draft ids, drafted by the head?) per drafted step])."""
    stream = generate_steps(pair, prompts, cfg)
    drafts = []
    for step in stream:
        if not stream.active:
            continue
        target, head = stream.target_cache, stream.drafter.head
        assert torch.equal(head.entries(), target.lengths)
        if step.kind == "decode" and step.depth:
            drafts.append(([len(s.emitted) for s in step.seqs], step.draft_flops > 0, [[t.id for t in s.drafted] for s in step.seqs]))
    return stream.trace, drafts


@pytest.mark.parametrize("kind, batch", [("extractive", 1), ("heldout", 1), ("ragged", 3)])
def test_greedy_equals_plain_and_the_head_keeps_every_token(embedded_f32, kind, batch):
    pair = _pair(embedded_f32)
    prompts = batch_prompts("extractive", 1) + batch_prompts("heldout", 2) if kind == "ragged" else batch_prompts(kind, batch)
    plain = generate(pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=TOKENS))
    trace, drafts = _checked(pair, prompts, DecodeConfig(drafter="ngram_eagle", depth=3, max_new_tokens=TOKENS))
    assert trace.output_ids == plain.output_ids
    assert drafts and trace.meta["draft_name"].startswith("n-gram lookup, else ")
    if kind == "extractive":  # the answer copies its prompt: lookups draft, and some steps need the head too
        kinds = {by_head for _, by_head, _ in drafts}
        assert kinds == {True, False}


def test_sampling_mixes_lookup_rows_and_head_rows_in_one_batch(embedded_f32):
    """A row that copies beside one that does not: the head drafts for the batch and the copying row takes its lookup
    as a point mass; sampled runs finish with every row's tokens, each step's pass as wide as its widest row."""
    pair = _pair(embedded_f32)
    prompts = batch_prompts("extractive", 1) + batch_prompts("heldout", 1)
    cfg = DecodeConfig(drafter="ngram_eagle", depth=3, max_new_tokens=TOKENS, temperature=0.8, seed=3)
    trace = generate(pair, prompts, cfg)
    assert trace.summary["new_tokens"] > 0

    def lookup_row(q) -> bool:
        return bool(q.drafted) and all(t.draft_prob == 1.0 for t in q.drafted)

    def head_row(q) -> bool:
        return bool(q.drafted) and any(t.draft_prob < 1.0 for t in q.drafted)

    head_steps = [s for s in trace.steps if s.kind == "decode" and s.depth and s.draft_flops > 0]
    mixed = [s for s in head_steps if any(map(lookup_row, s.seqs)) and any(map(head_row, s.seqs))]
    assert mixed and all(len(q.drafted) <= 3 for s in head_steps for q in s.seqs)


def test_a_lookup_step_runs_no_drafter_pass_and_wastes_no_drafter_flops(embedded_f32):
    pair = _pair(embedded_f32)
    trace = generate(pair, batch_prompts("extractive", 1), DecodeConfig(drafter="ngram_eagle", depth=3, max_new_tokens=TOKENS))
    lookups = [s for s in trace.steps if s.kind == "decode" and s.depth and s.draft_flops == 0]
    assert lookups and all(s.draft_bytes == 0 for s in lookups)
    for s in lookups:  # a rejected lookup token cost the target its position, never a drafter pass
        rejected = sum(len(q.drafted) - q.num_accepted for q in s.seqs)
        per_token = pair.target_costs.token_flops(0)
        assert s.flops_wasted <= rejected * pair.target_costs.token_flops(10_000) and (rejected == 0 or s.flops_wasted >= per_token)


def test_after_a_lookup_the_head_drafts_what_a_head_only_run_drafts(embedded_f32):
    """Greedy runs emit the same tokens, so where the hybrid's head drafts, after lookups, at a length where an
    EAGLE-only run also drafted, it has read the same tokens and features: the same draft."""
    pair = _pair(embedded_f32)
    compared = 0
    rag = [p.text for p in select(read_prompts(SPEC_BENCH), "rag", 2)]  # answers over passages: lookups and the head
    for prompt in batch_prompts("extractive", 2) + rag:
        _, hybrid = _checked(pair, [prompt], DecodeConfig(drafter="ngram_eagle", depth=3, max_new_tokens=TOKENS))
        eagle = generate(pair, [prompt], DecodeConfig(drafter="eagle", depth=3, max_new_tokens=TOKENS))
        at, length = {}, 0
        for step in (s for s in eagle.steps if s.kind == "decode"):
            if step.depth:
                at[length] = [t.id for t in step.seqs[0].drafted]
            length += len(step.seqs[0].emitted)
        length, looked_up = 0, False
        for emitted, by_head, draft in hybrid:
            if by_head and looked_up and length in at:
                assert draft[0] == at[length]
                compared += 1
            looked_up |= not by_head
            length += emitted[0]
    assert compared >= 2, compared


def test_rows_take_the_lookup_only_from_a_match_of_min_match_tokens():
    tokens = [5, 6, 7, 8, 9, 5, 6]  # "5 6" occurred before: continues 7 8 9
    assert NgramDrafter.lookup(tokens, 3, 3, shortest=MIN_MATCH) == [7, 8, 9]
    assert NgramDrafter.lookup([1, 2, 3, 4, 2], 3, 3, shortest=MIN_MATCH) == []  # only "2" repeats: one token is not enough
    assert NgramDrafter.lookup([1, 2, 3, 4, 2], 3, 3) == [3, 4, 2]  # the plain lookup takes it


def _scan(tokens, depth, ngram_size, stop_ids=frozenset(), shortest=1):
    """The lookup as a plain right-to-left scan, one start at a time (the definition the vectorised search keeps)."""
    for n in range(min(ngram_size, len(tokens) - 1), max(shortest, 1) - 1, -1):
        for start in range(len(tokens) - n - 1, -1, -1):
            if tokens[start : start + n] == tokens[-n:] and (found := NgramDrafter.following(tokens, start + n, depth, stop_ids)):
                return found
    return []


def test_the_vectorised_lookup_finds_what_a_scan_finds_on_every_sequence():
    """2,000 random sequences over small alphabets (so matches, overlapping ones and stop tokens are common), every
    n-gram size, shortest match and depth: the same continuation as the scan, and none for sequences under 2 tokens."""
    rng = numpy.random.default_rng(0)
    for i in range(2000):
        tokens = rng.integers(0, 2 + i % 7, size=int(rng.integers(0, 40))).tolist()
        ngram, shortest, depth = int(rng.integers(1, 5)), int(rng.integers(1, 4)), int(rng.integers(1, 6))
        stops = frozenset({0}) if i % 3 == 0 else frozenset()
        assert NgramDrafter.lookup(tokens, depth, ngram, stops, shortest) == _scan(tokens, depth, ngram, stops, shortest), tokens


def test_substitute_widens_the_heads_chain_and_pads_with_zero_q():
    head = Draft(
        ids=torch.tensor([[1, 2], [3, 4]]),
        q_x=torch.tensor([[0.5, 0.4], [0.9, 0.8]]),
        probs=torch.full((2, 2, 10), 0.1),
        valid=torch.tensor([[True, True], [True, False]]),
        forwards=2,
        fed_tokens=3,
    )
    out = substitute(head, [[7, 8, 9], []], sampling=True, vocab_size=10)
    assert out.ids.tolist() == [[7, 8, 9], [3, 4, 0]]
    assert out.valid.tolist() == [[True, True, True], [True, False, False]] and out.q_x[0].tolist() == [1.0, 1.0, 1.0]
    assert out.q_x[1].tolist() == pytest.approx([0.9, 0.8, 0.0])
    assert torch.equal(out.probs[0].argmax(-1), torch.tensor([7, 8, 9])) and out.probs[0].sum().item() == 3.0
    assert torch.all(out.probs[1, 2] == 0) and out.forwards == 2  # the head's passes were spent all the same


def test_it_is_registered_needs_a_head_and_draws_no_trees(tiny):
    assert DRAFTERS["ngram_eagle"] is LookupEagleDrafter and not LookupEagleDrafter.branches
    with pytest.raises(ConfigError, match="needs an EAGLE head"):
        generate(tiny, ["Hi"], DecodeConfig(drafter="ngram_eagle", depth=2, max_new_tokens=2))
    with pytest.raises(ConfigError, match="distribution to branch on"):
        DecodeConfig(drafter="ngram_eagle", depth=2, tree_nodes=4, tree_topk=2)


def test_goodput_starts_the_hybrid_from_the_heads_card(embedded_f32, capsys):
    from engine.drafters.calibration import shipped_acceptance

    pair = _pair(embedded_f32)
    head = shipped_acceptance(pair, "eagle")
    assert head is not None and shipped_acceptance(pair, "ngram_eagle") == head
    assert "ignored" not in capsys.readouterr().err  # the head's card is the hybrid's own prior, not another drafter's
