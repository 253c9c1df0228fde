"""A warm shared prefix (engine/model/prefix_cache.py): a run over the same document reads the prefix's keys and values
from the caller's store instead of prefilling them, and decodes exactly what a cold run decodes (float32); the store
keeps at most its entries, tokens and bytes. A store that keeps whole prompts (`prompts=True`) serves a repeated batch's
whole prefill, and the run still decodes what a cold run decodes."""

from __future__ import annotations

import pytest
import torch
from conftest import no_kernels_reason, tiny_eagle_pair
from test_shared_prefix import PROMPTS

from engine import DecodeConfig, generate
from engine.model import cpukernels
from engine.model.prefix_cache import PrefixCache, WarmPrefix, WarmPrompts, digest


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


CASES = [
    DecodeConfig(mode="autoregressive", max_new_tokens=12),
    DecodeConfig(depth=3, drafter="eagle", max_new_tokens=12),
    DecodeConfig(depth=4, drafter="eagle", tree_nodes=10, tree_topk=3, max_new_tokens=12),
    DecodeConfig(depth=3, drafter="model", max_new_tokens=12),
]


@pytest.mark.parametrize("backend", ["native", "torch"])
@pytest.mark.parametrize("cfg", CASES, ids=["plain", "eagle-chain", "eagle-tree", "draft-model"])
@pytest.mark.parametrize("prompts", [PROMPTS, ["Hi there", "A longer prompt of its own, with more words in it"]], ids=["shared", "apart"])
def test_warm_whole_prompts_decode_what_a_cold_prefill_decodes(pair, backend, cfg, prompts):
    if backend == "native" and not cpukernels.available():
        pytest.skip(no_kernels_reason())
    cfg = DecodeConfig.from_dict(cfg.to_dict() | {"backend": backend})
    cold = generate(pair, prompts, cfg)
    store = PrefixCache(prompts=True)
    first, second = generate(pair, prompts, cfg, prefix_cache=store), generate(pair, prompts, cfg, prefix_cache=store)
    caches = 1 if cfg.mode == "autoregressive" else 2  # the target's, and the drafter's own
    assert (first.meta["warm_prompts"], second.meta["warm_prompts"]) == (0, caches)
    assert first.output_ids == second.output_ids == cold.output_ids
    assert second.steps[0].target_flops == 0 < first.steps[0].target_flops  # nothing ran for the prompts
    assert sum(isinstance(e, WarmPrompts) for e in store._entries.values()) == caches
    other = generate(pair, prompts[::-1], cfg, prefix_cache=store)  # the same prompts in another order: another batch
    assert other.meta["warm_prompts"] == 0 and other.output_ids == cold.output_ids[::-1]


def test_a_store_without_prompts_runs_every_prompt_pass(pair):
    store, cfg = PrefixCache(), DecodeConfig(mode="autoregressive", max_new_tokens=2, backend="torch")
    runs = [generate(pair, PROMPTS, cfg, prefix_cache=store) for _ in range(2)]
    assert [t.meta["warm_prompts"] for t in runs] == [0, 0] and runs[1].steps[0].target_flops > 0  # its suffixes ran
    assert not any(isinstance(e, WarmPrompts) for e in store._entries.values())


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
    small = PrefixCache(max_bytes=2 * 2 * (2 * 10 * 4 * 4))  # room for two of these entries, in bytes
    for name in "abc":
        small.put((name,), _entry(10))
    assert len(small) == 2 and small.get(("a",)) is None and small.nbytes == small.max_bytes
    small.put(("big",), _entry(30))  # larger than the whole store: never kept, nothing pushed out
    assert small.get(("big",)) is None and len(small) == 2


def test_features_digest_tells_inputs_apart():
    a = torch.arange(12, dtype=torch.bfloat16).view(1, 3, 4)
    assert digest(a) == digest(a.clone()) != digest(a + 1) and digest(None) == ""
