"""goodput prices a draft after plain steps with its catch-up: before the drafter can draft it reads every token the
run's plain steps emitted since its last draft, a pass over batch x plain steps tokens (engine/decoding/goodput.py,
`catch_up_ms`; learnt by engine/decoding/goodput_steps.py, `learn_catch_up`)."""

from __future__ import annotations

import pytest
from test_policies import FLAT, _step, ctx

from engine.decoding import warmstart
from engine.decoding.goodput import GoodputDepth
from engine.decoding.goodput_steps import CATCH_TOKENS, EMA_WEIGHT


def _plain(batch: int):
    return _step(0, [0] * batch, verify_ms=10.0, draft_ms=0.0)


def test_a_draft_after_plain_steps_pays_for_its_catch_up():
    """Passes cost the same at any size (FLAT) and drafting a position is free: a chain of 3 at acceptance 0.6 is
    worth 2.18 tokens a row where plain gives 1, so it wins right after a draft. After twenty plain steps at batch 4
    the drafter first reads 80 tokens at 0.5 ms each: 40 ms on a 10 ms pass, and plain wins; after two, 4 ms, and
    the chain wins again."""
    policy = GoodputDepth(curve=FLAT, max_depth=3, draft_cost_ratio=0.0, accept=[0.6] * 3)
    policy.catch_ms[policy._bucket(4)] = 0.5
    assert policy.depth(ctx(4, 3)) == 3
    policy.explore_every = 1 << 20  # no exploring chain here (those are priced by `_could_pay`)
    for _ in range(20):
        policy.observe(_plain(4))
    assert policy.plain_here == 20 and policy.catch_up_ms(4) == pytest.approx(40.0)
    assert policy.depth(ctx(4, 3)) == 0
    policy.plain_here = 2
    assert policy.catch_up_ms(4) == pytest.approx(4.0)
    assert policy.depth(ctx(4, 3)) == 3
    policy.catch_ms.clear()  # nothing measured: a drafter pass over those tokens on the curve, at its FLOPs ratio
    policy.draft_cost_ratio = 0.25
    assert policy.catch_up_ms(4) == pytest.approx(0.25 * FLAT.time_ms(8))


def test_the_catch_up_is_learnt_per_row_and_plain_token():
    """A chain of 2 at batch 2 drafts in 3 ms step after step (1 ms a position, the feed counted as one); after eight
    plain steps it took 9.4 ms: 6.4 ms more for 2 rows x 8 tokens, 0.4 ms each, learnt from the prior's price (here
    0.01 x 10 ms over 16 tokens) with EMA_WEIGHT, as a catch-up over CATCH_TOKENS tokens is. A run's first draft reads
    nothing of the plain steps before it (its prompts were read at the prefill), whatever the exploration counter
    carried over, so it teaches nothing about the catch-up; nor does a draft right after a draft. A catch-up over two
    tokens moves the estimate an eighth as far."""
    policy = GoodputDepth(curve=FLAT, max_depth=2, draft_cost_ratio=1.0)
    policy.plain_run = 10  # carried over from an earlier run (warm start)
    policy.observe(_step(2, [1, 1], verify_ms=10.0, draft_ms=3.0))  # the run's first draft: below the 10 ms prior, learnt
    policy.observe(_step(2, [1, 1], verify_ms=10.0, draft_ms=3.0))
    assert policy.draft_ms_per_position(2) == pytest.approx(1.0) and not policy.catch_ms
    policy.draft_cost_ratio = 0.01  # the prior: 0.01 x a 10 ms pass over the 16 tokens
    for _ in range(8):
        policy.observe(_plain(2))
    assert policy.plain_here == 8 and 2 * 8 == CATCH_TOKENS  # this catch-up reads CATCH_TOKENS row-tokens
    policy.observe(_step(2, [1, 1], verify_ms=10.0, draft_ms=9.4))
    learnt = (1 - EMA_WEIGHT) * 0.1 / 16 + EMA_WEIGHT * 0.4
    assert policy.catch_ms == {policy._bucket(2): pytest.approx(learnt)}
    assert policy.plain_here == 0 and policy.catch_up_ms(2) == 0.0
    policy.observe(_plain(2))
    assert policy.catch_up_ms(2) == pytest.approx(2 * learnt)  # 2 rows x 1 plain token
    policy.observe(_step(2, [1, 1], verify_ms=10.0, draft_ms=3.0 + 2 * 4.0))  # 4 ms a token, over two tokens
    assert policy.catch_ms[policy._bucket(2)] == pytest.approx((1 - EMA_WEIGHT / 8) * learnt + EMA_WEIGHT / 8 * 4.0)
    assert policy.draft_ms_per_position(2) == pytest.approx(1.0)  # the catch-up never raised the drafting's price


def test_the_catch_up_is_the_machines_part_of_a_warm_start(tmp_path, monkeypatch):
    """What a catch-up costs is the machine's (kept across runs and processes, checked when read back); how many plain
    steps a run has taken since its last draft is the run's own (a new run starts at 0)."""
    monkeypatch.setenv("SPECLAB_CACHE", str(tmp_path))
    key = ("catch-up warm test",)
    policy = GoodputDepth(curve=FLAT, max_depth=2, draft_cost_ratio=1.0, memory_key=key)
    policy.catch_ms[policy._bucket(4)] = 0.3
    policy.plain_here = 7
    state = warmstart.decode(warmstart.encode(key, policy.learnt()), key)
    assert state["catch_ms"] == {policy._bucket(4): 0.3}
    warm = GoodputDepth(curve=FLAT, max_depth=2, draft_cost_ratio=1.0)
    warm.restore(state)
    assert warm.catch_ms == {policy._bucket(4): 0.3} and warm.plain_here == 0
    with pytest.raises(warmstart.StateError, match="catch_ms"):
        warmstart.decode(warmstart.encode(key, policy.learnt() | {"catch_ms": {3: -1.0}}), key)
