"""Pass costs at several contexts in interleaved rounds (engine/decoding/context_passes.py): one row per (context,
new tokens), every round's time kept, the counted bytes growing with the context by exactly the rows' KV cache, and
bad requests refused in one line before any pass runs."""

from __future__ import annotations

import pytest

from engine.decoding.context_passes import context_rounds, warm_contexts
from engine.model.prefix_cache import PrefixCache


def test_every_pass_is_timed_once_per_round_and_its_bytes_count_the_cache(tiny):
    rows = context_rounds(tiny, batch=3, tokens=[1, 3], contexts=[16, 64], rounds=2, repeats=1)
    assert [(r["context"], r["new_tokens"]) for r in rows] == [(16, 1), (16, 3), (64, 1), (64, 3)]
    for r in rows:
        assert r["batch"] == 3 and r["tokens_per_pass"] == 3 * r["new_tokens"]
        assert len(r["ms_rounds"]) == 2 and all(t > 0 for t in r["ms_rounds"])
        assert min(r["ms_rounds"]) <= r["ms"] <= max(r["ms_rounds"])
    kv = tiny.target_costs.kv_bytes_per_token
    short, long_ = rows[0], rows[2]  # one new token per row over 16 and over 64 tokens of cache
    assert long_["bytes"] - short["bytes"] == pytest.approx(3 * kv * (64 - 16))
    assert long_["flops"] > short["flops"]  # attention over a longer cache


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"batch": 0}, "batch"),
        ({"rounds": 0}, "rounds"),
        ({"tokens": []}, "new tokens"),
        ({"contexts": [1]}, "contexts"),
        ({"contexts": [10**6]}, "window"),
    ],
)
def test_a_request_that_cannot_run_is_refused_in_one_line(tiny, kwargs, words):
    args = {"batch": 2, "tokens": [1, 2], "contexts": [8, 16], "rounds": 1, "repeats": 1} | kwargs
    with pytest.raises(ValueError, match=words) as err:
        context_rounds(tiny, **args)
    assert "\n" not in str(err.value)


def test_warmed_contexts_are_read_warm_by_a_later_timing(tiny):
    """A server files lesson 8's contexts before anyone asks: every context of the later call is a hit, nothing is
    prefilled again, and the warmed contexts hold what a cold call would have prefilled (the counted bytes agree)."""
    store = PrefixCache(prompts=True)
    warm_contexts(tiny, [16, 64], store)
    assert len(store) == 2 and store.misses == 2 and store.hits == 0
    rows = context_rounds(tiny, batch=3, tokens=[1, 2], contexts=[16, 64], rounds=1, repeats=1, prefix_cache=store)
    assert store.hits == 2 and store.misses == 2 and len(store) == 2
    cold = context_rounds(tiny, batch=3, tokens=[1, 2], contexts=[16, 64], rounds=1, repeats=1)
    assert [(r["context"], r["bytes"]) for r in rows] == [(r["context"], r["bytes"]) for r in cold]
    other = PrefixCache()
    context_rounds(tiny, batch=2, tokens=[1], contexts=[16, 32], rounds=1, repeats=1, prefix_cache=other)
    warm_contexts(tiny, [16, 32], other)  # the same rows, drawn from the same seed
    assert other.hits == 2


@pytest.mark.parametrize("contexts", [[], [1], [10**6]])
def test_warming_a_context_that_cannot_fit_is_refused_in_one_line(tiny, contexts):
    with pytest.raises(ValueError, match="contexts") as err:
        warm_contexts(tiny, contexts, PrefixCache())
    assert "\n" not in str(err.value)
