"""Load-aware depth policies: goodput (measured pass cost x the run's acceptance) and vLLM's batch table."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from conftest import PROMPTS

from engine import ConfigError, DecodeConfig, formats, generate
from engine.decoding.goodput import EXPLORE_STEPS, PRIOR_ACCEPTANCE, PRIOR_WEIGHT, REFRESH_STEPS, GoodputDepth, expected_tokens
from engine.decoding.passcurve import PassCurve
from engine.decoding.policies import BatchTable, PolicyContext, derived_batch_table
from engine.trace.records import DraftToken, SeqStep, Step

TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def curve(ms_of) -> PassCurve:
    return PassCurve(tokens=TOKENS, ms=tuple(float(ms_of(n)) for n in TOKENS), context=128, key="test", measured_at="-")


FLAT = curve(lambda n: 10.0)  # every pass costs the same: memory/overhead-bound throughout
COMPUTE_BOUND = curve(lambda n: 1.0 * n)  # time proportional to tokens: no idle compute at all
KNEE_32 = curve(lambda n: 10.0 if n <= 32 else 10.0 * n / 32)  # flat to 32 tokens per pass, then linear


def assert_warm_from(policy, learnt: dict) -> None:
    """`policy` was built warm from `learnt` (goodput's `restore`): the machine's part whole, the text's part (per-position
    acceptance, the calibration of q, the trees' curves) where a cold run starts, from the drafter's card."""
    text = ("accept", "counts", "tree_gain", "calibration")
    assert {n: v for n, v in policy.learnt().items() if n not in text} == {n: v for n, v in learnt.items() if n not in text}
    assert policy.accept == policy.prior[: len(policy.accept)] and policy.counts == [
        [PRIOR_WEIGHT * a, PRIOR_WEIGHT] for a in policy.accept
    ]
    assert policy.tree_gain is None and not any(policy.calibration.accepted) and not any(policy.calibration.confidence)


def ctx(batch: int, depth: int) -> PolicyContext:
    return PolicyContext(step=1, batch=batch, base_depth=depth, mean_accepted=None)


def test_expected_tokens_is_leviathans_formula_for_a_constant_alpha():
    alpha, k = 0.7, 4
    assert expected_tokens([alpha] * k, k) == pytest.approx((1 - alpha ** (k + 1)) / (1 - alpha))
    assert expected_tokens([0.5, 0.0, 1.0], 3) == pytest.approx(1.5)


def test_goodput_drafts_deep_while_passes_are_free_and_never_beyond_depth():
    policy = GoodputDepth(curve=FLAT, max_depth=8, draft_cost_ratio=0.02, accept=[0.8] * 8)
    assert policy.depth(ctx(1, 8)) == 8
    assert policy.depth(ctx(1, 3)) == 3  # the user's depth is the most it ever drafts
    assert policy.depth(ctx(4, 0)) == 0


def test_goodput_switches_speculation_off_when_the_pass_is_compute_bound():
    policy = GoodputDepth(curve=COMPUTE_BOUND, max_depth=8, draft_cost_ratio=0.02, accept=[0.9] * 8)
    for batch in (1, 4, 32):
        assert policy.depth(ctx(batch, 8)) == 0
    knee = GoodputDepth(curve=KNEE_32, max_depth=6, draft_cost_ratio=0.02, accept=[0.7] * 6)
    depths = [knee.depth(ctx(b, 6)) for b in (1, 4, 8, 16, 32, 64)]
    assert depths[0] >= 4 and depths[-2:] == [0, 0]
    assert depths == sorted(depths, reverse=True)  # more load, less speculation


def _step(depth: int, rows: list[int], verify_ms: float, draft_ms: float) -> Step:
    """A decode step where row r accepted rows[r] of `depth` drafts."""
    seqs = [
        SeqStep(
            seq=i,
            drafted=[DraftToken(id=1, text="a", draft_prob=0.5, target_prob=0.5, accepted=j < a) for j in range(depth)],
            num_accepted=a,
            next_id=2,
            next_text="b",
            next_prob=0.5,
            next_kind="correction",
            emitted=[1] * a + [2],
            finished=False,
        )
        for i, a in enumerate(rows)
    ]
    return Step(
        index=1,
        kind="decode",
        depth=depth,
        batch=len(rows),
        tokens_per_pass=len(rows) * (depth + 1),
        t_start_s=0,
        t_end_s=0.01,
        draft_ms=draft_ms,
        verify_ms=verify_ms,
        overhead_ms=0,
        target_flops=0,
        draft_flops=0,
        target_bytes=0,
        draft_bytes=0,
        flops_wasted=0,
        seqs=seqs,
    )


def test_goodput_counts_the_policys_own_time_in_a_step_once():
    """A step's overhead already holds the policy's choice and its cut of a tree (both made inside the step), and the
    step's policy_ms holds them again: what goodput learns as a step's fixed cost is the overhead plus its own
    learning after the step, never overhead + policy_ms (that priced goodput's tree steps ~0.5 ms high)."""
    policy = GoodputDepth(curve=FLAT, max_depth=4, draft_cost_ratio=0.02)
    step = dataclasses.replace(_step(2, [1], verify_ms=10.0, draft_ms=3.0), overhead_ms=1.0, policy_ms=5.0)
    for _ in range(3):
        policy.observe(step)
    assert 1.0 <= policy.step_ms[1] < 1.5  # the overhead and a few microseconds of learning, not 6 ms
    assert policy.fixed_ms() == (0.0, policy.step_ms[1])


def test_goodput_learns_acceptance_and_cost_from_the_steps_it_sees():
    policy = GoodputDepth(curve=KNEE_32, max_depth=4, draft_cost_ratio=0.02)
    assert policy.depth(ctx(1, 4)) == 4  # the prior acceptance makes free passes worth filling
    for _ in range(30):  # every first draft rejected: position 1 acceptance falls towards 0
        policy.observe(_step(4, [0, 0], verify_ms=10.0, draft_ms=4.0))
    # position 1 falls to the floor the prior leaves (2 prior observations against ~50 rejections), and
    # position 2, never reached, stays at the prior
    assert policy.accept[0] < 0.05 and policy.accept[1] == pytest.approx(0.6)
    assert policy.depth(ctx(2, 4)) == 0
    assert policy.draft_ms[policy._bucket(2)] == pytest.approx(0.8)  # 4 ms for 4 positions and the catch-up pass
    slow = GoodputDepth(curve=FLAT, max_depth=4, draft_cost_ratio=0.0)
    slow.observe(_step(2, [2], verify_ms=30.0, draft_ms=0.0))  # this machine runs 3x the curve at 3 tokens
    assert slow.verify_ms(3) == pytest.approx(30.0)
    assert slow.verify_ms(1) == pytest.approx(30.0)  # a size not yet run: the correction over all sizes
    for _ in range(60):  # 1 token runs as the curve says, 3 tokens at 3x: each size learns its own factor
        slow.observe(_step(0, [0], verify_ms=10.0, draft_ms=0.0))
        slow.observe(_step(2, [2], verify_ms=30.0, draft_ms=0.0))
    assert slow.verify_ms(1) == pytest.approx(10.0, rel=0.05) and slow.verify_ms(3) == pytest.approx(30.0, rel=0.05)
    for _ in range(20):  # then the machine gets twice as slow, seen at 1 token only: 3 tokens is priced slower too
        slow.observe(_step(0, [0], verify_ms=20.0, draft_ms=0.0))
    assert slow.verify_ms(1) == pytest.approx(20.0, rel=0.05)
    assert slow.verify_ms(3) > 1.6 * 30.0  # mostly the shared (load) ratio moved; a ratio per size would have kept 30


@pytest.mark.parametrize("drafter", ["model", "ngram"])
@pytest.mark.parametrize("prompts", [PROMPTS[:1], PROMPTS], ids=["batch1", "ragged3"])
@pytest.mark.parametrize("policy", ["goodput", "batch_table"])
def test_load_aware_policies_are_lossless(tiny, drafter, prompts, policy):
    """They only change how many tokens are proposed: float32 greedy output equals plain decoding."""
    ar = generate(tiny, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=16))
    spec = generate(tiny, prompts, DecodeConfig(depth=4, drafter=drafter, policy=policy, max_new_tokens=16))
    assert spec.output_ids == ar.output_ids
    decode = [s for s in spec.steps if s.kind == "decode"]
    assert all(s.depth <= 4 for s in decode)
    assert all(len(q.drafted) <= s.depth for s in decode for q in s.seqs)  # each row's own k is in the trace


def test_batch_table_follows_its_rows_and_caps_at_depth(tiny):
    table = BatchTable(((1, 1, 6), (2, 4, 2), (5, 64, 0)))
    assert [table.depth(ctx(b, 4)) for b in (1, 2, 4, 5, 64, 65)] == [4, 2, 2, 0, 0, 4]
    cfg = DecodeConfig(depth=3, policy="batch_table", batch_table=[[1, 2, 3], [3, 8, 0]], max_new_tokens=8)
    assert cfg.batch_table == ((1, 2, 3), (3, 8, 0))
    trace = generate(tiny, PROMPTS, cfg)
    assert all(s.depth == 0 for s in trace.steps if s.kind == "decode" and s.batch == 3)
    assert any(s.depth == 3 for s in generate(tiny, PROMPTS[:1], cfg).steps)
    assert DecodeConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg  # survives a trace file


def test_derived_batch_table_turns_speculation_off_past_the_knee():
    table = derived_batch_table(KNEE_32, max_depth=6, draft_cost_ratio=0.02, accept=0.7)
    ks = {low: k for low, _, k in table}
    assert ks[1] >= 4 and ks[33] == 0 and ks[257] == 0
    assert table[0][0] == 1 and all(a[1] + 1 == b[0] for a, b in zip(table, table[1:]))  # covers every batch


@pytest.mark.parametrize(
    "table, message",
    [
        ("1-4:2", "non-empty list"),
        ([[1, 4]], r"\[min_batch, max_batch, k\]"),
        ([[0, 4, 2]], "1 <= min_batch <= max_batch"),
        ([[5, 4, 2]], "1 <= min_batch <= max_batch"),
        ([[1, 4, 17]], "k must be between 0 and 16"),
        ([[1, 4, 2], [4, 8, 1]], "overlap at batch 4"),
        ([[1, 4, True]], "integers"),
    ],
)
def test_bad_batch_tables_are_refused(table, message):
    with pytest.raises(ConfigError, match=message):
        DecodeConfig(policy="batch_table", batch_table=table)


def test_cli_batch_table_errors_are_one_line(capsys):
    from engine.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(["run", "--prompt", "hi", "--policy", "batch_table", "--batch-table", "1-4:x"])
    assert exc.value.code == 2
    assert "expected MIN-MAX:K rows" in capsys.readouterr().err
    assert main(["run", "--prompt", "hi", "--policy", "batch_table", "--batch-table", "1-4:2,3-8:0"]) == 2
    assert capsys.readouterr().err.startswith("error: batch_table ranges overlap at batch 3")


def test_pass_curve_is_measured_once_then_read_from_the_cache(tiny, tmp_path, monkeypatch):
    from engine.decoding import passcurve

    monkeypatch.setenv("SPECLAB_CACHE", str(tmp_path))
    monkeypatch.delenv("SPECLAB_DATA", raising=False)
    monkeypatch.setattr(formats, "SPACE_DATA", tmp_path / "no-persistent-storage")
    monkeypatch.setattr(passcurve, "_memory", {})
    first = passcurve.pass_curve(tiny)
    assert first.tokens[0] == 1 and list(first.ms) == sorted(first.ms)  # measured, and non-decreasing
    files = list((tmp_path / "pass_curves").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["key"] == passcurve.curve_key(tiny)

    def no_measuring(*args, **kwargs):
        raise AssertionError("measured again")

    monkeypatch.setattr(passcurve, "measure_curve", no_measuring)
    monkeypatch.setattr(passcurve, "_memory", {})
    assert passcurve.pass_curve(tiny) == first  # from the cache folder
    files[0].write_text("{not json")
    monkeypatch.setattr(passcurve, "_memory", {})
    with pytest.raises(AssertionError, match="measured again"):  # a corrupt cache file is measured afresh
        passcurve.pass_curve(tiny)


def test_bench_compares_policies_interleaved_and_runs_adaptive_ones_at_the_largest_depth(tiny):
    from engine.bench.harness import bench, format_table

    result = bench(
        tiny,
        [1, 3],
        [1, 3],
        drafter="ngram",
        prompt_set="extractive",
        max_new_tokens=6,
        repeats=1,
        policy=["fixed", "goodput", "batch_table"],
        log=lambda s: None,
    )
    cells = [(r["batch"], r["depth"], r["policy"]) for r in result["rows"]]
    assert cells == [(b, d, p) for b in (1, 3) for d, p in ((1, "fixed"), (3, "fixed"), (3, "goodput"), (3, "batch_table"))]
    assert all(r["same_output"] and 0 <= r["mean_depth"] <= r["depth"] for r in result["rows"])
    for r in result["rows"]:  # each lane's steps per k, which an adaptive lane's verdict lists at its (batch, context)
        assert sum(r["depth_steps"].values()) > 0 and all(0 <= k <= r["depth"] for k in r["depth_steps"])
    table = format_table(result)
    assert "goodput" in table and "mean k" in table and result["policy"] == "fixed,goodput,batch_table"
    assert "batch 3, context 0 -> steps per k (k " in table


def test_cli_bench_refuses_an_unknown_policy(capsys):
    from engine.__main__ import main

    assert main(["bench", "--batch", "1", "--depth", "2", "--policy", "fixed,fastest"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown policy 'fastest'")


def test_goodput_stops_unlikely_rows_at_the_break_even_confidence(tiny):
    """The drafter's own confidence ends rows early: the threshold is what one more position costs, in
    tokens per row at the chosen rate; free positions (flat curve, free drafter) stop no row."""
    free = GoodputDepth(curve=FLAT, max_depth=4, draft_cost_ratio=0.0, accept=[0.8] * 4)
    assert free.depth(ctx(1, 4)) == 4 and free.stop_below == 0.0
    priced = GoodputDepth(curve=KNEE_32, max_depth=4, draft_cost_ratio=0.1, accept=[0.8] * 4)
    k = priced.depth(ctx(1, 4))
    rate = priced.last_choice[1]
    cost = 0.1 * KNEE_32.time_ms(1) + KNEE_32.time_ms(k + 1) - KNEE_32.time_ms(k)
    assert k > 0 and priced.stop_below == pytest.approx(rate * cost)
    # in a run, rows really do stop at different depths, and the output stays exact
    trace = generate(tiny, PROMPTS, DecodeConfig(depth=6, drafter="model", policy="goodput", max_new_tokens=16))
    ar = generate(tiny, PROMPTS, DecodeConfig(mode="autoregressive", max_new_tokens=16))
    assert trace.output_ids == ar.output_ids


def test_goodput_at_batch_one_is_not_talked_out_of_speculating_by_a_short_bad_stretch():
    """Batch 1 sees one yes/no per draft position a step. A text that keeps 60% of first drafts has three
    rejections in a row now and then (one run in fifteen); that must not switch speculation off. A chain of 1
    here pays while a > 0.4: (1 + a) / (10 + 2 + 2) ms against plain's 1 / 10. A per-step average with weight
    0.2 would read 0.6 x 0.8^3 = 0.31 after the three and choose plain; the decayed counts read ~0.5."""
    policy = GoodputDepth(curve=FLAT, max_depth=1, draft_cost_ratio=0.2)
    for accepted in [1, 0, 1, 1, 0] * 4 + [0, 0, 0]:
        policy.observe(_step(1, [accepted], verify_ms=10.0, draft_ms=4.0))  # 2 ms a position, the catch-up one of them
    assert 0.4 < policy.accept[0] < 0.6
    assert policy.depth(ctx(1, 1)) == 1
    for _ in range(40):  # a really bad stretch: plain is the right choice
        policy.observe(_step(1, [0], verify_ms=10.0, draft_ms=4.0))
    low = policy.accept[0]
    assert low < 0.15 and policy.depth(ctx(1, 1)) == 0
    rising = []
    for _ in range(60):  # plain steps measure no acceptance: the estimate drifts back to the prior, never past it
        policy.observe(_step(0, [0], verify_ms=10.0, draft_ms=0.0))
        rising.append(policy.accept[0])
    assert rising == sorted(rising) and low + 0.2 < rising[-1] < PRIOR_ACCEPTANCE


def test_goodput_does_not_price_the_catch_up_after_plain_steps_as_drafting():
    """The first draft after plain steps also feeds the drafter every token those steps emitted; that time bounds
    the drafting cost from above: it may lower what is known (here the FLOPs prior, 2 x 10 ms), never raise it. The
    plain-step counter (exploration) survives into the next run with the same key (warm start)."""
    policy = GoodputDepth(curve=FLAT, max_depth=4, draft_cost_ratio=2.0, memory_key=("catch-up test",))
    policy.observe(_step(0, [0], verify_ms=10.0, draft_ms=0.0))
    policy.observe(_step(3, [3], verify_ms=10.0, draft_ms=40.0))  # below the prior's 20 ms: learnt (10 ms a position)
    assert policy.draft_ms[policy._bucket(1)] == pytest.approx(10.0)
    policy.observe(_step(3, [3], verify_ms=10.0, draft_ms=4.0))  # after a speculative step: 1 ms a position
    known = policy.draft_ms[policy._bucket(1)]
    assert known < 10.0
    for _ in range(5):
        policy.observe(_step(0, [0], verify_ms=10.0, draft_ms=0.0))
    policy.observe(_step(3, [3], verify_ms=10.0, draft_ms=40.0))  # the catch-up of five plain steps' tokens
    assert policy.draft_ms[policy._bucket(1)] == known
    for i in range(3):
        plain = _step(0, [0], verify_ms=10.0, draft_ms=0.0)
        plain.seqs[0].finished = i == 2  # the run ends: its state is stored (goodput.REMEMBER_STEPS)
        policy.observe(plain)
    warm = GoodputDepth(curve=FLAT, max_depth=4, draft_cost_ratio=0.0, memory_key=("catch-up test",))
    assert warm.plain_run == 3
    assert_warm_from(warm, policy.learnt())


def test_goodput_measures_the_position_after_its_chosen_depth_now_and_then():
    """A chain of k never reaches position k + 1, so its acceptance would stay the prior for ever: every
    EXPLORE_STEPS-th chain drafts one position deeper than the choice, and that position is measured."""
    rising = curve(lambda n: 10.0 + 2.0 * n)
    policy = GoodputDepth(curve=rising, max_depth=4, draft_cost_ratio=0.0)
    deeper = []
    for i in range(2 * EXPLORE_STEPS):
        k = policy.depth(ctx(1, 4))
        if k != policy.last_choice[0]:
            deeper.append((i, k - policy.last_choice[0]))
        policy.observe(_step(k, [min(k, 2)], verify_ms=rising.time_ms(k + 1), draft_ms=0.0))  # position 3 always rejected
    assert deeper == [(EXPLORE_STEPS - 1, 1), (2 * EXPLORE_STEPS - 1, 1)]
    assert policy.last_choice[0] == 2 and policy.accept[2] < 0.3  # position 3 was measured on those steps
    assert policy.accept[3] == pytest.approx(PRIOR_ACCEPTANCE)  # position 4 never reached


def test_goodput_prices_the_sizes_it_does_not_run_from_the_ones_it_does():
    """A size's steps pin down only shared ratio x its own factor. With one size run almost every step the split
    used to drift (seen: own factor 0.72, shared ratio 1.5), pricing every other size 1.5x the curve while the one
    run measured 1.08x. The own factors now average 1, so an unrun size gets what the runs measured."""
    policy = GoodputDepth(curve=FLAT, max_depth=4, draft_cost_ratio=0.0, verify_ratio={0: 1.5, 3: math.log(0.72)})
    for _ in range(5):
        policy.observe(_step(2, [2], verify_ms=10.8, draft_ms=0.0))  # 3 tokens a pass at 1.08x the curve's 10 ms
    for tokens in (1, 3, 5):
        assert policy.verify_ms(tokens) == pytest.approx(10.8, rel=0.02)


def test_a_size_not_run_fades_back_to_the_curve():
    """Per-size factors a former process learnt from a few noisy passes (4 tokens 1.16x the curve, 5 tokens 0.82x:
    seen on the 2-core EPYC) would price 4 tokens dear for ever, since a size priced dear is never run again. One
    not run here for REFRESH_STEPS decode steps fades back to the curve's shape; the size that runs keeps its own."""
    policy = GoodputDepth(curve=FLAT, max_depth=4, draft_cost_ratio=0.0, verify_ratio={0: 1.0, 4: math.log(1.16), 5: math.log(0.82)})
    assert policy.verify_ms(4) > 1.35 * policy.verify_ms(5)
    for _ in range(REFRESH_STEPS + 60):  # only chains of 4 (5 tokens a pass), at the curve's time
        policy.observe(_step(4, [4], verify_ms=10.0, draft_ms=0.0))
    assert policy.verify_ms(5) == pytest.approx(10.0, rel=0.02)
    assert policy.verify_ms(4) == pytest.approx(10.0, rel=0.05)  # not run: back at the curve (kept: 1.16 x 10 / 0.82)
