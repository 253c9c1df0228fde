"""A warm shared prefix (engine/model/prefix_cache.py): a run over the same document reads the prefix's keys and values
from the caller's store instead of prefilling them, and decodes exactly what a cold run decodes (float32); the store
keeps at most its entries and tokens."""

from __future__ import annotations

import pytest
import torch
from conftest import no_kernels_reason, tiny_eagle_pair
from test_shared_prefix import PROMPTS

from engine import DecodeConfig, generate
from engine.model import cpukernels
from engine.model.prefix_cache import PrefixCache, WarmPrefix, digest


@pytest.fixture(scope="module")
def pair(tokenizer, tmp_path_factory):
    return tiny_eagle_pair(tokenizer, tmp_path_factory.mktemp("eagle-warm"))


@pytest.mark.parametrize("backend", ["native", "fused", "torch", "transformers"])
@pytest.mark.parametrize(
    "cfg",
    [
        DecodeConfig(mode="autoregressive", max_new_tokens=12),
        DecodeConfig(depth=3, drafter="eagle", max_new_tokens=12),
        DecodeConfig(depth=4, drafter="eagle", tree_nodes=10, tree_topk=3, max_new_tokens=12),
        DecodeConfig(depth=3, drafter="model", max_new_tokens=12),
    ],
    ids=["plain", "eagle-chain", "eagle-tree", "draft-model"],
)
def test_a_warm_prefix_decodes_what_a_cold_prefill_decodes(pair, backend, cfg):
    if backend == "native" and not cpukernels.available():
        pytest.skip(no_kernels_reason())
    if backend == "transformers" and cfg.drafter == "eagle":
        pytest.skip("transformers' forward gives no hidden states: the EAGLE head runs on the lean forward only")
    cfg = DecodeConfig.from_dict(cfg.to_dict() | {"backend": backend})
    cold = generate(pair, PROMPTS, cfg)
    store = PrefixCache()
    first, second = generate(pair, PROMPTS, cfg, prefix_cache=store), generate(pair, PROMPTS, cfg, prefix_cache=store)
    caches = 1 if cfg.mode == "autoregressive" else 2  # the target's, and the drafter's own
    assert (first.meta["warm_prefix"], second.meta["warm_prefix"]) == (0, caches) and len(store) == caches
    assert first.output_ids == second.output_ids == cold.output_ids
    assert second.steps[0].target_flops < first.steps[0].target_flops / 3  # the prefix's pass was not run again
    assert store.hits == caches and store.misses == caches


def test_another_prefix_model_or_forward_misses(pair):
    cfg = DecodeConfig(mode="autoregressive", max_new_tokens=4, backend="fused")
    store = PrefixCache()
    generate(pair, PROMPTS, cfg, prefix_cache=store)
    other = [p.replace("Note 3:", "Note three:") for p in PROMPTS]  # a different document from its fourth note on
    trace = generate(pair, other, cfg, prefix_cache=store)
    assert trace.meta["warm_prefix"] == 0 and trace.meta["shared_prefix"] > 64 and len(store) == 2
    native_cfg = DecodeConfig.from_dict(cfg.to_dict() | {"backend": "native"}) if cpukernels.available() else None
    if native_cfg is not None:  # another backend files its own entry: its buffers hold other numbers
        assert generate(pair, PROMPTS, native_cfg, prefix_cache=store).meta["warm_prefix"] == 0
    for dynamic in ("torch", "transformers"):  # a dynamic cache files its own too, one per forward
        dynamic_cfg = DecodeConfig.from_dict(cfg.to_dict() | {"backend": dynamic})
        assert [generate(pair, PROMPTS, dynamic_cfg, prefix_cache=store).meta["warm_prefix"] for _ in range(2)] == [0, 1]


def _entry(tokens: int) -> WarmPrefix:
    keys = (torch.zeros(1, 2, tokens, 4),)
    return WarmPrefix(keys, keys, None)


def test_the_store_keeps_at_most_its_entries_and_tokens():
    store = PrefixCache(max_entries=2, max_tokens=100)
    store.put(("a",), _entry(10))
    store.put(("b",), _entry(10))
    assert store.get(("a",)) is not None  # a is now the most recently used
    store.put(("c",), _entry(10))
    assert store.get(("b",)) is None and store.get(("a",)) is not None and len(store) == 2
    store.put(("d",), _entry(101))  # longer than max_tokens: never kept
    assert store.get(("d",)) is None and len(store) == 2
    assert store.nbytes == 2 * 2 * (2 * 10 * 4 * 4)  # two entries of keys and values, float32
    store.clear()
    assert len(store) == 0 and store.nbytes == 0


def test_features_digest_tells_inputs_apart():
    a = torch.arange(12, dtype=torch.bfloat16).view(1, 3, 4)
    assert digest(a) == digest(a.clone()) != digest(a + 1) and digest(None) == ""
