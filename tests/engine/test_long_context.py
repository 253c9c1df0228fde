"""Greedy speculative decoding at long context (prompts of ~1,000-1,600 tokens, so attention runs over several of the
native attention's segments, with ragged rows left-padded by hundreds of columns): float32 output equals plain
decoding on the dynamic cache, token for token, for chains and trees, on the native and the fused passes."""

from __future__ import annotations

import pytest
from conftest import no_kernels_reason, tiny_eagle_pair

from engine import DecodeConfig, generate
from engine.model import cpukernels


def document(items: int, colour_shift: int = 0) -> str:
    colours = ["red", "blue", "green", "old"]
    return " ".join(f"Note {i}: the {colours[(i + colour_shift) % 4]} box holds {i * 7 % 13} stones." for i in range(items))


LONG = [document(120) + " Which box holds most?", document(95, 1) + " Count the stones.", document(70, 2)]  # ~1600, 1250, 930 tokens


@pytest.fixture(scope="module")
def pair(tokenizer, tmp_path_factory):
    """conftest's tiny target, noisy draft and EAGLE head, its context window widened to 4096 positions (RoPE has no
    table to outgrow)."""
    pair = tiny_eagle_pair(tokenizer, tmp_path_factory.mktemp("eagle-long"))
    for model in (pair.target, pair.weights("draft")):
        model.config.max_position_embeddings = 4096
    pair.max_context = 4096
    return pair


def _tokens(pair, prompts, cfg: DecodeConfig, backend: str):
    return generate(pair, prompts, DecodeConfig.from_dict(cfg.to_dict() | {"backend": backend})).output_ids


@pytest.mark.parametrize("fast", ["native", "fused"])
@pytest.mark.parametrize("prompts", [LONG[:1], LONG], ids=["batch1", "ragged3"])
def test_long_context_chains_and_trees_equal_plain_decoding(pair, prompts, fast):
    if fast == "native" and not cpukernels.available():
        pytest.skip(no_kernels_reason())
    assert len(pair.tokenizer(prompts[0]).input_ids) > 1500
    plain = _tokens(pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=16), "torch")
    assert _tokens(pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=16), fast) == plain
    for cfg in (
        DecodeConfig(depth=3, drafter="model", max_new_tokens=16),
        DecodeConfig(depth=3, drafter="eagle", max_new_tokens=16),
        DecodeConfig(depth=4, drafter="eagle", tree_nodes=12, tree_topk=3, max_new_tokens=16),
    ):
        assert _tokens(pair, prompts, cfg, fast) == plain, (cfg.drafter, cfg.tree_nodes)
