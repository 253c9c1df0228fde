"""A shared prefix (engine/model/kvcache.py, RaggedCache.prefill_shared): rows that continue one document prefill it
once and copy its keys and values into every row. The cache then holds what a prefill of every whole prompt holds, and
greedy decoding in float32 gives the same tokens with and without the sharing, for chains, a tree drafter and ragged
rows, on every backend that runs a cache."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from conftest import no_kernels_reason, tiny_eagle_pair

from engine import DecodeConfig, generate
from engine.model import cpukernels
from engine.model.kvcache import SHARED_PREFIX_MIN, joined_hidden, shared_prefix
from engine.model.static_cache import make_cache

DOCUMENT = " ".join(f"Note {i}: the {('red', 'blue', 'green')[i % 3]} box holds {i * 7 % 13} stones." for i in range(28))
QUESTIONS = ["Which box holds most?", "Count the stones in every blue box, one by one, and say the total.", "Why?"]
PROMPTS = [f"{DOCUMENT}\n\n{q}" for q in QUESTIONS]  # ragged: the questions differ in length


@pytest.fixture(scope="module")
def pair(tokenizer, tmp_path_factory):
    return tiny_eagle_pair(tokenizer, tmp_path_factory.mktemp("eagle-shared"))


def test_the_shared_prefix_is_what_every_row_begins_with_never_a_whole_prompt():
    long = list(range(100))
    assert shared_prefix([long + [1, 2], long + [3]]) == 100
    assert shared_prefix([long, long + [7]]) == 99  # the shorter row keeps one token of its own
    assert shared_prefix([long, long]) == 99
    assert shared_prefix([long + [1]]) == 0  # one row: nothing to share
    assert shared_prefix([long[:SHARED_PREFIX_MIN] + [1], long[:SHARED_PREFIX_MIN] + [2]]) == SHARED_PREFIX_MIN
    assert shared_prefix([long[: SHARED_PREFIX_MIN - 1] + [1], long[: SHARED_PREFIX_MIN - 1] + [2]]) == 0  # not worth a pass
    assert shared_prefix([[5] + long, [6] + long]) == 0  # a common tail is no prefix


def test_joined_hidden_lays_a_shared_prefill_out_as_a_whole_prefill():
    prefix = torch.tensor([[[10.0], [11.0], [12.0]]])  # (1, P=3, 1)
    suffix = torch.tensor([[[0.0], [20.0], [21.0]], [[0.0], [0.0], [30.0]]])  # (2, S=3, 1): suffixes of 2 and 1 tokens
    joined = joined_hidden(prefix, suffix, torch.tensor([2, 1]))[..., 0]
    assert joined[0, 1:].tolist() == [10.0, 11.0, 12.0, 20.0, 21.0]  # one padding column, prefix, suffix
    assert joined[1, 2:].tolist() == [10.0, 11.0, 12.0, 30.0]


@pytest.mark.parametrize("backend", ["torch", "fused", "native"])
def test_a_shared_prefill_holds_what_a_whole_prefill_holds(pair, backend):
    """Logits, hidden states and every later pass's logits agree with a prefill of the whole prompts (float32)."""
    if backend == "native" and not cpukernels.available():
        pytest.skip(no_kernels_reason())
    prompts = [pair.encode_prompt(p) for p in PROMPTS]
    shared = shared_prefix(prompts)
    assert shared > 200 and len({len(p) for p in prompts}) == 3
    cfg = DecodeConfig(backend=backend, max_new_tokens=8)
    outputs = []
    with torch.inference_mode():
        for share in (0, shared):
            cache = make_cache(pair.target, pair.device, pair.target_costs, cfg)
            logits, hidden = cache.prefill(prompts, 0, return_hidden=True, shared=share)
            lengths = cache.lengths.tolist()
            later = cache.forward(torch.tensor([[5, 6, 7]] * 3), logits_to_keep=0)  # a 3-token verify pass
            outputs.append((logits, hidden, lengths, later))
    (logits, hidden, lengths, later), (s_logits, s_hidden, s_lengths, s_later) = outputs
    assert s_lengths == lengths == [len(p) for p in prompts]
    torch.testing.assert_close(s_logits, logits, rtol=1e-4, atol=1e-4)
    for row, prompt in enumerate(prompts):  # each row's real columns (its padding is masked wherever it is read)
        width = hidden.shape[1]
        torch.testing.assert_close(s_hidden[row, width - len(prompt) :], hidden[row, width - len(prompt) :], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(s_later, later, rtol=1e-4, atol=1e-4)


def _tokens(pair, cfg: DecodeConfig, share: bool, prompts=PROMPTS):
    trace = generate(pair, prompts, DecodeConfig.from_dict(cfg.to_dict() | {"share_prefix": share}))
    return trace.output_ids, trace.meta["shared_prefix"]


@pytest.mark.parametrize("backend", ["torch", "native", "transformers"])
def test_greedy_decoding_with_a_shared_prefix_equals_decoding_without_it(pair, backend):
    """Chains from the draft model and the EAGLE head, and an EAGLE-2 tree, over ragged rows: the same tokens as
    plain decoding of the whole prompts, and the trace says how many tokens were shared."""
    if backend == "native" and not cpukernels.available():
        pytest.skip(no_kernels_reason())
    plain, none_shared = _tokens(pair, DecodeConfig(mode="autoregressive", max_new_tokens=16, backend="torch"), share=False)
    assert none_shared == 0
    cfgs = [DecodeConfig(mode="autoregressive", max_new_tokens=16), DecodeConfig(depth=3, drafter="model", max_new_tokens=16)]
    if backend != "transformers":  # the EAGLE head and trees need the lean forward
        cfgs += [
            DecodeConfig(depth=3, drafter="eagle", max_new_tokens=16),
            DecodeConfig(depth=4, drafter="eagle", tree_nodes=10, tree_topk=3, max_new_tokens=16),
            DecodeConfig(depth=3, drafter="model", tree_nodes=6, tree_topk=2, max_new_tokens=16),
        ]
    for cfg in cfgs:
        tokens, shared = _tokens(pair, DecodeConfig.from_dict(cfg.to_dict() | {"backend": backend}), share=True)
        assert shared > 200, cfg
        assert tokens == plain, (cfg.drafter, cfg.tree_nodes, backend)


def test_rows_that_finish_early_leave_a_shared_prefill_intact(pair):
    """A row that stops at an end token leaves the batch (and both caches) after a shared prefill: the rows left keep
    decoding what they decode without the sharing."""
    cfg = DecodeConfig(depth=3, drafter="eagle", max_new_tokens=16)
    first, _ = _tokens(pair, cfg, share=False)
    stopping = dataclasses.replace(pair, eos_ids=frozenset({first[0][4]}))  # row 0 ends at its fifth token
    plain, _ = _tokens(stopping, cfg, share=False)
    together, shared = _tokens(stopping, cfg, share=True)
    assert shared > 200 and len(plain[0]) <= 5 < max(len(t) for t in plain)
    assert together == plain


def test_share_prefix_is_an_option_a_trace_keeps_only_when_off():
    assert "share_prefix" not in DecodeConfig().to_dict()  # a default trace stays readable by older SpecLabs
    off = DecodeConfig(share_prefix=False)
    assert DecodeConfig.from_dict(off.to_dict()) == off
    with pytest.raises(Exception, match="share_prefix must be true or false"):
        DecodeConfig(share_prefix="yes")
