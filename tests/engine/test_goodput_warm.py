"""Goodput from the first step (issue 42): why a cold policy chose plain at batch 1, and what it starts from now.

- The cold choice: a run's first draft also reads the prompts into the drafter (and meets its first passes); that
  time, learnt as the drafter's cost per position, made every chain look slower than plain for the rest of the run.
  A draft after plain steps now bounds the cost from above (`goodput._bounded`), so a cold policy at batch 1 on a
  flat curve with a calibrated drafter keeps speculating, on synthetic steps and on the real EAGLE head.
- Plain when plain wins: where the curve says a bigger pass costs more than any acceptance can return, plain from
  the first step, and no exploring chain is ever paid for.
- Warm from the first step: the drafter's shipped calibration (its card's held-out per-position acceptance,
  engine/drafters/calibration.py) is the prior; what the policy learns is stored on disk and read back by the next
  process, with the project's strict checks: a corrupt or foreign file is ignored with a one-line notice."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from test_policies import FLAT, _step, assert_warm_from, ctx, curve
from test_tree import _eagle_pair

from engine import DecodeConfig, generate, generate_steps
from engine.decoding import goodput, passcurve, warmstart
from engine.decoding.goodput import EXPLORE_MAX, EXPLORE_STEPS, PRIOR_ACCEPTANCE, GoodputDepth
from engine.drafters import calibration
from engine.model.pair import SHIPPED_DRAFT, SHIPPED_EAGLE, Loaded

EAGLE_CARD = calibration.parse((SHIPPED_EAGLE / calibration.CALIBRATION_FILE).read_bytes(), "eagle")
# The 2-core EPYC's measured curve (2026-12-03, ms): flat to 9 tokens, then steep past the native pass's tiles.
EPYC = curve(lambda n: {1: 22.8, 2: 22.9, 4: 23.3, 8: 24.9, 16: 37.5, 32: 122.0, 64: 496.0, 128: 1136.0, 256: 1895.0}[n])


def test_the_shipped_cards_give_a_conditional_prior_per_position():
    """The card's per_position_acceptance is the fraction of row-steps kept through each position; the prior is the
    chance of keeping position j given 1..j-1 were kept."""
    kept = json.loads((SHIPPED_EAGLE / calibration.CALIBRATION_FILE).read_text())["per_position_acceptance"]
    assert len(kept) == 4 and kept == sorted(kept, reverse=True)  # the shipped head's card, depth 4
    assert EAGLE_CARD == pytest.approx([kept[0], kept[1] / kept[0], kept[2] / kept[1], kept[3] / kept[2]])
    draft = calibration.parse((SHIPPED_DRAFT / calibration.CALIBRATION_FILE).read_bytes(), "model")
    assert draft == pytest.approx([0.52, 0.29 / 0.52, 0.18 / 0.29, 0.12 / 0.18])
    policy = GoodputDepth(curve=FLAT, max_depth=6, draft_cost_ratio=0.05, prior=EAGLE_CARD)
    assert policy.accept == pytest.approx(EAGLE_CARD + [EAGLE_CARD[-1]] * 2)  # deeper than the card: its last


def test_a_cold_policy_at_batch_one_on_a_flat_curve_with_a_calibrated_drafter_speculates():
    """The run the issue traced, as steps: the first draft (3 positions) took 24 ms because it also read the prompts
    into the head; every later draft takes 0.8 ms a position. Learnt as the cost (6 ms a position), that first draft
    priced a chain of 1 at (1 + 0.65) / (10 + 2 x 6) tokens/ms against plain's 1 / 10, and the policy chose plain
    for the rest of the run. Now it is an upper bound on what is known, and the policy speculates on every step."""
    policy = GoodputDepth(curve=FLAT, max_depth=8, draft_cost_ratio=0.08, prior=EAGLE_CARD)
    chosen = []
    for i in range(48):
        k = policy.depth(ctx(1, 8))
        chosen.append(k)
        draft_ms = (24.0 if i == 0 else 0.8 * (k + 1)) if k else 0.0
        policy.observe(_step(k, [k], verify_ms=10.0, draft_ms=draft_ms))  # every draft accepted (alpha 1.00)
    assert chosen[0] > 0 and all(k > 0 for k in chosen)
    assert policy.draft_ms_per_position(1) == pytest.approx(0.8, rel=0.05)


def test_a_draft_after_plain_steps_lowers_the_drafters_cost_but_never_raises_it():
    policy = GoodputDepth(curve=FLAT, max_depth=4, draft_cost_ratio=0.1)  # the prior: 0.1 x 10 ms = 1 ms a position
    policy.observe(_step(3, [3], verify_ms=10.0, draft_ms=40.0))  # a run's first draft: 10 ms a position, one-off work
    assert policy.draft_ms == {} and policy.draft_ms_per_position(1) == pytest.approx(1.0)
    policy.observe(_step(3, [3], verify_ms=10.0, draft_ms=2.0))  # after a draft: 0.5 ms a position, learnt
    assert policy.draft_ms_per_position(1) == pytest.approx(0.5)
    policy.observe(_step(0, [0], verify_ms=10.0, draft_ms=0.0))
    policy.observe(_step(3, [3], verify_ms=10.0, draft_ms=1.2))  # after plain, faster still: a bound, so it lowers
    assert policy.draft_ms_per_position(1) == pytest.approx(0.3)


@pytest.mark.parametrize("batch", [16, 32])
def test_plain_from_the_first_step_where_verification_costs_more_than_acceptance_returns(batch):
    """On the EPYC's curve a pass of 2 x 16 tokens costs 3.3x one of 16 and 2 x 32 4x one of 32: even with every draft
    accepted a chain cannot pay. The cold policy chooses plain from the first step and never explores a chain."""
    policy = GoodputDepth(curve=EPYC, max_depth=8, draft_cost_ratio=0.07, prior=EAGLE_CARD)
    chosen = []
    for _ in range(3 * EXPLORE_MAX):
        chosen.append(policy.depth(ctx(batch, 8)))
        policy.observe(_step(0, [0] * batch, verify_ms=EPYC.time_ms(batch), draft_ms=0.0))
    assert chosen == [0] * len(chosen)


def test_where_acceptance_decides_plain_steps_still_explore_now_and_then():
    """The guard stops only hopeless exploration: where a well-accepted chain would pay, a policy talked into plain
    (a bad stretch) re-measures acceptance after EXPLORE_STEPS plain steps."""
    policy = GoodputDepth(curve=EPYC, max_depth=4, draft_cost_ratio=0.07, prior=[0.05] * 4)  # plain steps keep it low
    chosen = []
    for _ in range(EXPLORE_STEPS + 2):
        k = policy.depth(ctx(1, 4))
        chosen.append(k)
        policy.observe(_step(k, [0], verify_ms=EPYC.time_ms(k + 1), draft_ms=0.5 * (k + 1) if k else 0.0))
    assert chosen[0] == 0 and chosen[EXPLORE_STEPS] > 0


def test_a_cold_eagle_run_at_batch_one_speculates_and_stays_lossless(embedded_f32, monkeypatch):
    """The real embedded target and shipped head (float32), a fresh store, batch 1, priced on a flat curve: the first
    draft reads the prompt into the head, and the policy keeps drafting after it (it drafted once in 44 steps before
    the fix); greedy output equals plain decoding."""
    pair = _eagle_pair(embedded_f32)
    monkeypatch.setattr(passcurve, "pass_curve", lambda pair: FLAT)
    cfg = DecodeConfig(drafter="eagle", depth=8, policy="goodput", max_new_tokens=32)
    trace = generate(pair, ["Why does a lost key matter?"], cfg)
    decode = [s for s in trace.steps if s.kind == "decode"]
    drafted = [s for s in decode if s.depth > 0]
    assert decode[0].depth > 0 and len(drafted) >= 0.75 * len(decode)
    plain = generate(pair, ["Why does a lost key matter?"], DecodeConfig(mode="autoregressive", max_new_tokens=32))
    assert trace.output_ids == plain.output_ids


# --- calibration files: the card's numbers, or ignored with one line -----------------------------------------
GOOD = {
    "format": calibration.CALIBRATION_FORMAT,
    "drafter": "eagle",
    "per_position_acceptance": [0.6, 0.4],
    "prompts": "held-out",
    "measured": "test",
    "date": "2026-12-03",
}


@pytest.mark.parametrize(
    "raw, message",
    [
        (b'{"format": "speclab.drafter_calibration/1", "drafter": "eag', "not valid JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (json.dumps(GOOD | {"format": "speclab.drafter_calibration/2"}).encode(), "format is not"),
        (json.dumps(GOOD | {"drafter": "model"}).encode(), "another drafter's"),
        (json.dumps(GOOD | {"per_position_acceptance": [0.6, 1.4]}).encode(), "between 0 and 1"),
        (json.dumps(GOOD | {"per_position_acceptance": [0.4, 0.6]}).encode(), "must not exceed"),
        (json.dumps(GOOD | {"extra": 1}).encode(), "unknown field"),
        (b'{"format": "speclab.drafter_calibration/1", "per_position_acceptance": [NaN]}', "NaN"),
    ],
)
def test_a_corrupt_or_foreign_calibration_is_ignored_with_one_line(tmp_path, capsys, raw, message):
    (tmp_path / calibration.CALIBRATION_FILE).write_bytes(raw)

    class Pair:
        loaded = {"eagle": Loaded(object(), "an EAGLE head", folder=str(tmp_path), costs=object())}

    assert calibration.shipped_acceptance(Pair, "eagle") is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("speclab: ignored") and message in err
    (tmp_path / calibration.CALIBRATION_FILE).write_text(json.dumps(GOOD))
    assert calibration.shipped_acceptance(Pair, "eagle") == pytest.approx([0.6, 0.4 / 0.6])


def test_the_loaded_pair_knows_its_drafters_cards(embedded_f32):
    assert calibration.shipped_acceptance(embedded_f32, "eagle") == pytest.approx(EAGLE_CARD)
    assert calibration.shipped_acceptance(embedded_f32, "model") is not None
    assert calibration.shipped_acceptance(embedded_f32, "ngram") is None


# --- what the policy learnt, across processes ------------------------------------------------------------------
KEY = ("tiny-llama", "model", "tiny-draft", "float32", "cpu", "test curve", 4, 0, 0)


def learnt_policy() -> GoodputDepth:
    """A policy that has seen a few steps of every kind it learns from."""
    policy = GoodputDepth(curve=FLAT, max_depth=4, draft_cost_ratio=0.05, memory_key=KEY)
    for k, rows in [(3, [2, 3]), (0, [0, 0]), (2, [1, 0]), (4, [4, 1])]:
        policy.observe(_step(k, rows, verify_ms=11.0 + k, draft_ms=0.7 * (k + 1) if k else 0.0))
    policy.tree_gain = [[0.5 * d + 0.1 * n for n in range(8)] for d in range(1, 5)]  # the trees' curves, per depth
    return policy


def test_the_last_step_writes_the_state_and_a_fresh_store_reads_it_back():
    policy = learnt_policy()
    assert not warmstart.state_path(KEY).exists()  # every REMEMBER_STEPS-th step: memory only
    last = _step(1, [1], verify_ms=12.0, draft_ms=1.4)
    last.seqs[0].finished = True
    policy.observe(last)
    assert warmstart.state_path(KEY).exists()
    warmstart.forget()  # a new process: nothing in memory
    warm = GoodputDepth(curve=FLAT, max_depth=4, draft_cost_ratio=0.05, memory_key=KEY)
    assert warm.verify_ratio == policy.verify_ratio and warm.verify_ratio and warm.step_ms == policy.step_ms
    assert_warm_from(warm, policy.learnt())


def test_a_run_beside_other_work_keeps_its_state_in_memory_but_not_on_disk():
    """What a disturbed run learnt (the machine's load, not its costs) is not written for the next process: another
    process spins one core for the whole run. The quiet side is the test above (a run too short to judge writes)."""
    policy = GoodputDepth(curve=FLAT, max_depth=4, draft_cost_ratio=0.05, memory_key=KEY)
    spin = "import time\nt = time.perf_counter()\nwhile time.perf_counter() - t < 1.2: pass"
    subprocess.run([sys.executable, "-c", spin], check=True)  # while this process waits: only the other one runs
    for k, rows in [(3, [2, 3]), (2, [1, 0])]:
        policy.observe(_step(k, rows, verify_ms=30.0, draft_ms=0.7 * (k + 1)))
    last = _step(1, [1], verify_ms=30.0, draft_ms=1.4)
    last.seqs[0].finished = True
    policy.observe(last)
    assert policy.other_cores is not None and policy.other_cores > goodput.BUSY_CORES
    assert not warmstart.state_path(KEY).exists()  # not written for the next process ...
    assert warmstart.recall(KEY) == policy.learnt()  # ... but this process keeps it


def test_another_process_reads_the_stored_state(tmp_path, monkeypatch):
    """The file alone carries the state: a fresh interpreter pointed at the same $SPECLAB_DATA reads it back."""
    monkeypatch.setattr(warmstart, "state_dir", lambda: tmp_path / "goodput")
    policy = learnt_policy()
    warmstart.remember(KEY, policy.learnt(), durable=True)
    code = (
        "import json, sys; from engine.decoding import warmstart; "
        "print(json.dumps(warmstart.recall(tuple(json.loads(sys.argv[1])))['accept']))"
    )
    env = {k: v for k, v in os.environ.items() if k != "SPECLAB_DATA"} | {"SPECLAB_DATA": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code, json.dumps(KEY)], capture_output=True, text=True, env=env, check=True)
    assert json.loads(out.stdout) == pytest.approx(policy.accept)


def test_the_state_round_trips_through_its_file_exactly():
    state = learnt_policy().learnt()
    assert warmstart.decode(warmstart.encode(KEY, state), KEY) == state


def _stored(mutate) -> bytes:
    data = json.loads(warmstart.encode(KEY, learnt_policy().learnt()))
    mutate(data)
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    "raw, message",
    [
        (lambda: _stored(lambda d: None)[:-40], "not valid JSON"),
        (lambda: b"\x89PNG\r\n\x1a\n", "not UTF-8"),
        (lambda: b"[1, 2, 3]", "format is not"),
        (lambda: _stored(lambda d: d.update(format="speclab.goodput_state/0")), "format is not"),
        (lambda: _stored(lambda d: d.update(key=list(KEY[:-1]) + [8])), "another policy's"),
        (lambda: _stored(lambda d: d["state"]["accept"].__setitem__(0, 1.5)), "state.accept[0]"),
        (lambda: _stored(lambda d: d["state"]["counts"].pop()), "state.counts"),
        (lambda: _stored(lambda d: d["state"]["draft_ms"].append([3, -1.0])), "state.draft_ms"),
        (lambda: _stored(lambda d: d["state"].update(verify_ratio=[[0, 0.0]])), "above 0 ms"),
        (lambda: _stored(lambda d: d["state"].update(explore_every="16")), "state.explore_every"),
        (lambda: _stored(lambda d: d["state"].update(tree_gain=[0.5, 0.9])), "state.tree_gain[0]"),  # /3's one curve
        (lambda: _stored(lambda d: d["state"].update(stolen=1)), "unknown field"),
        (lambda: _stored(lambda d: None).replace(b'"accept": [', b'"accept": [NaN, ', 1), "NaN"),
        (lambda: b" " * (warmstart.MAX_STATE_BYTES + 1), "too large"),
    ],
)
def test_a_corrupt_or_foreign_state_file_is_ignored_with_one_line(capsys, raw, message):
    """Never trusted: the policy starts from its priors, and stderr says which file and why, in one line."""
    path = warmstart.state_path(KEY)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw())
    policy = GoodputDepth(curve=FLAT, max_depth=4, draft_cost_ratio=0.05, memory_key=KEY)
    assert policy.accept == [PRIOR_ACCEPTANCE] * 4 and policy.draft_ms == {} and policy.verify_ratio == {}
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"speclab: ignored {path}") and message in err


def test_a_goodput_run_leaves_its_state_for_the_next_process(tiny, monkeypatch):
    """Through generate(): the run's file holds what its policy learnt; with the memory emptied (a new process) the
    next run starts from it, and both stay lossless."""
    knee = curve(lambda n: 10.0 if n <= 8 else 10.0 * n / 8)
    monkeypatch.setattr(passcurve, "pass_curve", lambda pair: knee)
    monkeypatch.setattr(goodput, "BUSY_CORES", float("inf"))  # the file round trip, even beside other tests' servers
    cfg = DecodeConfig(depth=3, drafter="model", policy="goodput", max_new_tokens=12)
    first = generate(tiny, ["Hi", "What is the capital of France?"], cfg)
    key = warmstart.policy_key(tiny, cfg, knee, 2)
    stored = warmstart.decode(warmstart.state_path(key).read_bytes(), key)
    assert stored == warmstart.recall(key) and stored["verify_ratio"]
    warmstart.forget()
    stream = generate_steps(tiny, ["Hi", "What is the capital of France?"], cfg)
    for step in stream:
        if step.kind == "prefill":  # built, nothing observed yet: it holds the stored state
            assert_warm_from(stream.decoder.policy, stored)
    second = stream.trace
    plain = generate(tiny, ["Hi", "What is the capital of France?"], DecodeConfig(mode="autoregressive", max_new_tokens=12))
    assert first.output_ids == second.output_ids == plain.output_ids


def test_the_curve_takes_each_sizes_fastest_over_interleaved_sweeps(monkeypatch):
    """A burst of other work during one sweep lifts the sizes timed then, not the curve: each size keeps its fastest
    pass over all sweeps (the stored curve this replaced read 10x a 64-token pass after one such burst)."""
    sweeps = iter([{4: 50.0, 8: 60.0}, {1: 30.0}, {}])  # per sweep: the sizes a burst of other work slowed

    def timed(pair, batches, tokens, **kw):
        burst = next(sweeps)
        return [{"ms": burst.get(n, 10.0 + n / 4)} for n in tokens]

    monkeypatch.setattr(passcurve, "pass_costs", timed)
    monkeypatch.setattr(passcurve, "_grid", lambda pair, tokens, context: (1, 2, 4, 8, 16))
    monkeypatch.setattr(passcurve, "curve_key", lambda pair: "test")
    measured = passcurve.measure_curve(object())
    assert measured.ms == pytest.approx([10.25, 10.5, 11.0, 12.0, 14.0])
    assert next(sweeps, "done") == "done"  # exactly CURVE_SWEEPS sweeps


def test_each_batch_bucket_keeps_its_own_state(tiny, monkeypatch):
    """What a batch-4 run learnt is recalled by the next batch-4..7 run, never by a batch-1 run (issue 42: a state
    learnt where verify passes are dear made a warm batch-1 run choose plain)."""
    knee = curve(lambda n: 10.0 if n <= 8 else 10.0 * n / 8)
    monkeypatch.setattr(passcurve, "pass_curve", lambda pair: knee)
    cfg = DecodeConfig(depth=3, drafter="model", policy="goodput", max_new_tokens=6)
    assert [warmstart.batch_bucket(b) for b in (0, 1, 2, 3, 4, 7, 8, 16, 31, 32, 64)] == [0, 0, 1, 1, 2, 2, 3, 4, 4, 5, 6]
    generate(tiny, ["Hi", "Hello", "Tell me a story", "What is 2 + 2?"], cfg)
    four, one, five = (warmstart.policy_key(tiny, cfg, knee, b) for b in (4, 1, 5))
    assert four == five and four != one
    assert warmstart.recall(four) is not None and warmstart.recall(one) is None
    stream = generate_steps(tiny, ["Hi"], cfg)
    for step in stream:
        if step.kind == "prefill":  # a batch-1 run: built from the priors, not from batch 4's state
            assert stream.decoder.policy.memory_key == one and stream.decoder.policy.learnt() != warmstart.recall(four)


def test_an_exploring_chain_is_priced_with_what_a_draft_after_plain_steps_cost():
    """At batch 16 on the 2-core EPYC a chain of 1 drafted after plain steps took 25-85 ms (the drafter reads what the
    plain steps emitted, and at a run's first draft the prompts), against ~7 ms step after step; the steady price
    (from FLOPs, 1.5 ms a position) let every run explore again. Once such a draft is timed, exploring is priced with
    it: past the room the policy stays plain; at batch 1, where a chain's pass rides on idle compute, it still explores."""
    flat_then_dear = curve(lambda n: 20.0 if n <= 16 else 20.0 * (1 + (n - 16) / 24))  # 32 tokens: 1.67x, 80: 3.67x
    policy = GoodputDepth(curve=flat_then_dear, max_depth=4, draft_cost_ratio=0.07, prior=EAGLE_CARD)
    chosen = []
    for _ in range(4 * EXPLORE_STEPS):
        k = policy.depth(ctx(16, 4))
        chosen.append(k)
        policy.observe(_step(k, [k] * 16, verify_ms=flat_then_dear.time_ms(16 * (k + 1)), draft_ms=40.0 if k else 0.0))
    assert chosen[EXPLORE_STEPS] == 1  # the one exploration, priced on the prior (every draft accepted) ...
    assert not any(chosen[EXPLORE_STEPS + 2 :])  # ... then, priced with what it cost, plain for good (2 x EXPLORE_STEPS later too)
    assert policy.explore_draft_ms(16) == pytest.approx(40.0)
    warm = GoodputDepth(curve=flat_then_dear, max_depth=4, draft_cost_ratio=0.07, prior=EAGLE_CARD)
    warm.restore(policy.learnt())
    assert warm.explore_draft_ms(1) == pytest.approx(2.5)  # per row, from the nearest batch measured
    k1 = []
    for _ in range(EXPLORE_STEPS + 1):
        k = warm.depth(ctx(1, 4))
        k1.append(k)
        warm.observe(_step(k, [0], verify_ms=20.0, draft_ms=2.5 if k else 0.0))  # every draft rejected: plain, then explore
    assert k1[-1] > 0


def test_each_context_bucket_keeps_its_own_state(tokenizer, monkeypatch):
    """goodput's learnt state is a (batch, context) table: a batch-2 run over a long document is recalled by the next
    such run, never by one over short prompts at the same batch (a verify pass at long context reads far more KV)."""
    from conftest import tiny_pair

    pair = tiny_pair(tokenizer, draft_noise=0.01)
    pair.target.config.max_position_embeddings = pair.max_context = 2048
    knee = curve(lambda n: 10.0 if n <= 8 else 10.0 * n / 8)
    monkeypatch.setattr(passcurve, "pass_curve", lambda pair: knee)
    assert [warmstart.context_bucket(c) for c in (0, 150, 511, 512, 1023, 1024, 4095, 4096, 8191)] == [0, 0, 0, 1, 1, 2, 3, 4, 4]
    cfg = DecodeConfig(depth=3, drafter="model", policy="goodput", max_new_tokens=6)
    document = " ".join(f"Line {i}: the lamp at post {i} is lit at dusk." for i in range(90))  # ~1,300 tokens
    long_prompts = [f"{document}\n\nWhich post is first?", f"{document}\n\nWhen are they lit?"]
    stream = generate_steps(pair, long_prompts, cfg)
    for _ in stream:
        pass
    longest = max(q["prompt_tokens"] for q in stream.trace.sequences)
    assert 1024 <= longest < 2048 and stream.trace.meta["shared_prefix"] > 1000
    long_key, short_key = (warmstart.policy_key(pair, cfg, knee, 2, c) for c in (longest, 40))
    assert stream.decoder.policy.memory_key == long_key != short_key
    assert warmstart.recall(long_key) is not None and warmstart.recall(short_key) is None
    short = generate_steps(pair, ["Hi", "Hello there"], cfg)
    for step in short:
        if step.kind == "prefill":  # short prompts at the same batch: built from the priors, not the long run's state
            assert short.decoder.policy.memory_key == short_key
            assert short.decoder.policy.learnt() != warmstart.recall(long_key)


def test_one_slow_steps_overhead_cannot_make_plain_look_slow():
    """A plain step's overhead is learnt as a running average; one step that held a pause not its own (150 ms, a
    collection or another process) moves it by at most goodput_steps.SPIKE x the average + 1 ms, so a batch-16 run
    past the room stays plain, where an unclipped average (32 ms in a stored state) priced plain below drafting."""
    from engine.decoding import goodput_steps

    weight, linear = goodput_steps.EMA_WEIGHT, curve(lambda n: 20.0 if n <= 16 else 20.0 * n / 16)  # past 16 tokens every token costs
    policy = GoodputDepth(curve=linear, max_depth=3, draft_cost_ratio=0.05, prior=EAGLE_CARD)
    for _ in range(8):
        policy.observe(_step(0, [0] * 16, verify_ms=20.0, draft_ms=0.0))
    known = policy.step_ms[0]
    spike = _step(0, [0] * 16, verify_ms=20.0, draft_ms=0.0)
    spike.overhead_ms = 150.0
    policy.observe(spike)
    assert policy.step_ms[0] <= (1 - weight) * known + weight * (goodput_steps.SPIKE * known + 1.0) + 1e-9
    assert policy.depth(ctx(16, 3)) == 0
    unclipped = GoodputDepth(curve=linear, max_depth=3, draft_cost_ratio=0.05, prior=EAGLE_CARD)
    unclipped.step_ms = {0: (1 - weight) * known + weight * 150.0}
    assert unclipped.depth(ctx(16, 3)) > 0  # what the spike alone would have done
