"""The prompt set (training/prompts.py) and the held-out prompts the runtime reads from assets/."""

from __future__ import annotations

import json

import pytest

from training.prompts import HELDOUT_ASSET, build_prompts, heldout_asset, heldout_eval_prompts


def test_heldout_prompt_set_is_disjoint_from_training_topics():
    from engine.bench.prompts import heldout_prompts, prompt_set_list
    from training.prompts import build_prompts

    prompts = build_prompts(seed=0)
    train_topics = {r["topic"] for r in prompts["train"]}
    held = heldout_prompts(16)
    assert len(held) == 16 and held == prompt_set_list("heldout")
    by_prompt = {r["prompt"]: r["topic"] for r in prompts["heldout"]}
    assert all(by_prompt[p] not in train_topics for p in held)
    with pytest.raises(ValueError, match="unknown prompt set"):
        prompt_set_list("poems")


def test_heldout_asset_is_what_the_prompt_module_writes():
    """assets/heldout_prompts.json (read by engine.bench, which may not import training code) is exactly the
    round-robin list of every first-round held-out prompt; its first n are heldout_eval_prompts(n)."""
    from engine.bench.prompts import heldout_prompts

    stored = json.loads(HELDOUT_ASSET.read_text())
    assert stored == heldout_asset()
    heldout = build_prompts(seed=0)["heldout"]
    for n in (1, 16, 24, 390):
        assert heldout_prompts(n) == heldout_eval_prompts(heldout, n)
    with pytest.raises(ValueError, match="held-out prompts"):
        heldout_prompts(391)
