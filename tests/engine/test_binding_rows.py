"""A batch waits for its slowest row (engine/decoding/binding_rows.py): goodput prices a step with the first-position
acceptance of the row that has the most expected steps left, not the batch's mean.

Four Spec-Bench translation prompts at batch 4 accepted 11/21, 5/26, 1/29 and 1/29 single drafts: the mean said a
chain paid, and goodput drafted for 20 steps while the run still took 30 steps against plain decoding's 31."""

from __future__ import annotations

import pytest
from test_policies import FLAT, _step, ctx

from engine import DecodeConfig, generate
from engine.decoding import goodput
from engine.decoding.binding_rows import ROW_PRIOR, RowAcceptance
from engine.decoding.goodput import GoodputDepth
from engine.decoding.policies import PolicyContext


def _rows_ctx(remaining: tuple[int, ...], depth: int = 2) -> PolicyContext:
    return PolicyContext(
        step=2, batch=len(remaining), base_depth=depth, mean_accepted=None, rows=tuple(range(len(remaining))), remaining=remaining
    )


def test_one_row_an_undescribed_batch_or_rows_that_accept_alike_bind_at_one():
    rows = RowAcceptance()
    assert rows.factor((0,), (10,), [0.5]) == 1.0  # batch 1: the row is the batch
    assert rows.factor((), (), [0.5]) == 1.0  # a caller that does not say which rows are in flight
    for _ in range(6):
        rows.observe(_step(1, [1, 0, 1, 0], verify_ms=10.0, draft_ms=1.0))  # every row: none yet, a prior of 0.5
    alike = RowAcceptance()
    for _ in range(6):
        alike.observe(_step(1, [1, 1, 1, 1], verify_ms=10.0, draft_ms=1.0))
        alike.observe(_step(1, [0, 0, 0, 0], verify_ms=10.0, draft_ms=1.0))
    assert alike.factor((0, 1, 2, 3), (20, 20, 20, 20), [0.5]) == pytest.approx(1.0, abs=0.05)


def test_the_row_with_the_most_steps_left_binds_not_the_lowest_acceptance_alone():
    """Rows 0 and 1 accepted every draft, rows 2 and 3 none. With as many tokens left in each, rows 2 and 3 (the
    slower half) end the run: the factor is their acceptance over the batch's, far below 1. With one token left in
    rows 2 and 3, rows 0 and 1 end it, and they accept more than the batch: above 1. At batch 2 the slower half is
    the one row."""
    rows = RowAcceptance()
    for _ in range(10):
        rows.observe(_step(1, [1, 1, 0, 0], verify_ms=10.0, draft_ms=1.0))
    batch = [0.5, 0.5]
    low = rows.estimate(2, 0.5)
    assert low == pytest.approx(ROW_PRIOR * 0.5 / (sum(0.96**i for i in range(10)) + ROW_PRIOR))
    assert rows.factor((0, 1, 2, 3), (20, 20, 20, 20), batch) == pytest.approx(low / 0.5)
    assert rows.factor((0, 1, 2, 3), (20, 20, 20, 20), batch) < 0.5
    assert rows.factor((0, 1, 2, 3), (20, 20, 1, 1), batch) > 1.2
    assert rows.factor((0, 2), (20, 20), batch) == pytest.approx(low / 0.5)
    assert rows.factor((0, 1, 2, 3), (20, 20, 20, 3), batch) == pytest.approx((rows.estimate(0, 0.5) + low) / 2 / 0.5)


def test_goodput_stops_drafting_when_the_row_the_batch_waits_for_rejects():
    """The same policy state, a chain that pays at the batch's mean acceptance (0.5 against a draft costing a fifth of
    a flat pass): with the rows said, two rows that reject every draft end the run, and goodput chooses plain."""
    policy = GoodputDepth(curve=FLAT, max_depth=2, draft_cost_ratio=0.2, accept=[0.5, 0.5])
    for _ in range(8):
        policy.observe(_step(1, [1, 1, 0, 0], verify_ms=10.0, draft_ms=4.0))
    assert policy.accept[0] == pytest.approx(0.5, abs=0.05)
    assert policy.depth(ctx(4, 2)) > 0  # the batch's mean: a chain pays
    assert policy.bind == 1.0
    assert policy.depth(_rows_ctx((20, 20, 20, 20))) == 0  # the rows the batch waits for reject: plain
    assert policy.bind < 0.5
    assert policy.depth(_rows_ctx((20, 20, 1, 1))) > 0  # the rows that accept end the run: drafting pays


def test_the_decoder_tells_the_policy_which_rows_are_in_flight_and_what_each_has_left(embedded_f32, monkeypatch):
    """A real run at batch 2: before every step the policy sees each row in flight by its prompt's index and the new
    tokens it may still emit, max_new_tokens less what it emitted so far (rows accept differently, so these differ)."""
    seen: list[PolicyContext] = []
    real = goodput.GoodputDepth.depth
    monkeypatch.setattr(goodput.GoodputDepth, "depth", lambda self, c: seen.append(c) or real(self, c))
    cfg = DecodeConfig(mode="speculative", drafter="ngram", depth=2, policy="goodput", max_new_tokens=12)
    trace = generate(embedded_f32, ["The capital of France is", "List three colours: red, green,"], cfg)
    assert seen and all(len(c.rows) == len(c.remaining) == c.batch for c in seen)
    assert seen[0].rows == (0, 1) and seen[0].remaining == (11, 11)  # the prefill emitted each row's first token
    emitted = {0: 1, 1: 1}
    decode = [s for s in trace.steps if s.kind == "decode"]
    for c, step in zip(seen, decode):
        assert c.remaining == tuple(12 - emitted[r] for r in c.rows)
        for row in step.seqs:
            emitted[row.seq] += len(row.emitted)
