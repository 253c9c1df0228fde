"""Every lesson's experiment runs on the real embedded pair at small settings, and what it returns fits the
recording schema, so a live run and a recorded one go through the same checks and drawing code. Lessons 1
and 2 run live through the page in tests/app/test_app_lessons.py; lessons 3-6 run here, each shrunk."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from app.common import measurement
from app.lessons import l7_width, registry
from app.lessons.kit import numbers, runs
from app.lessons.l7_width import (
    WIDTH_CONTENDERS,
    WIDTH_DEPTH,
    WIDTH_PROMPTS,
    WIDTH_ROUNDS,
    WIDTH_TOKENS,
    step_shapes,
    width,
    width_choice,
    width_configs,
    width_table,
)
from app.lessons.registry import EXPERIMENTS
from engine import DecodeConfig, load_pair
from engine.hardware import probe
from engine.options import tree_capacity
from engine.trace.records import decode_timing


@pytest.fixture(scope="module")
def live():
    pair = load_pair()
    return pair, probe(pair.device, pair.dtype, quick=True)


SMALL = {  # each experiment's settings, shrunk (the knobs' own options where one fits)
    "memory_bound": {"context": 64, "largest": 16},
    "more_flops": {"depth": 2, "tokens": 16},
    "past_the_ridge": {"depth": 1, "batch": 4, "tokens": 8},  # batch 0 would pick it from the pass curve
    "turn_it_off": {"batch": 4, "n": 1, "depth": 2, "tokens": 32},
    "adaptive": {"depth": 2, "conf": 0.5},
    "by_load": {"k": 2},
    "width": {"nodes": 8, "topk": 4, "batch": 4},
}


def test_small_settings_are_the_experiments_own_knobs():
    for name, settings in SMALL.items():
        experiment = EXPERIMENTS[name]
        assert set(settings) == set(experiment.defaults()), name
        for knob in experiment.knobs:
            assert settings[knob.key.split("_", 1)[1]] in knob.options, knob.key


@pytest.mark.slow
@pytest.mark.parametrize("name", ["past_the_ridge", "turn_it_off", "adaptive", "by_load", "width"])
def test_experiment_runs_live_and_fits_the_schema(live, monkeypatch, name, lesson_constant):
    pair, hw = live
    for name_, value in (("GATE_BATCHES", (2,)), ("GATE_TOKENS", (8, 8)), ("GATE_ROUNDS", 2), ("LOAD_TOKENS", 4), ("LOAD_ROUNDS", 2)):
        lesson_constant(name_, value)
    for name_, value in (("WIDTH_TOKENS", 8), ("WIDTH_PROMPTS", 2), ("WIDTH_ROUNDS", 2), ("TURN_OFF_ROUNDS", 2)):
        lesson_constant(name_, value)
    experiment = EXPERIMENTS[name]
    m = registry.check_measurement(name, experiment.run(pair, hw, SMALL[name]))
    measured = experiment.predict.measured(m, SMALL[name])
    assert measured is not None and measured > 0
    if name == "by_load":  # three batch sizes chosen from the room, four contenders; every policy's depth per step
        c = m["chosen"]
        assert [r["batch"] for r in m["rows"]] == [b for b in (1, c["mid"], c["past"]) for _ in range(4)]
        # every row starts at its batch; rows that reach their token budget sooner leave, so the live batch only shrinks
        assert all(len(r["steps"]) >= 1 and r["steps"][0][0] == r["batch"] for r in m["rows"])
        assert all(a[0] >= b[0] for r in m["rows"] for a, b in zip(r["steps"], r["steps"][1:]))
    if name == "adaptive":
        assert [b["batch"] for b in m["batches"]] == [1, 2] and m["chosen"]["depth"] == 2
    if name == "turn_it_off":  # the rows end at different lengths: the live batch shrinks within the run
        live = [b for b, _, _ in m["steps"]["ar"]]
        assert live[0] == 4 and live[-1] < live[0] and live == sorted(live, reverse=True)
        assert all(d == 0 for b, d, _ in m["steps"]["off"] if b > 1) and m["chosen"] == {
            "room": m["chosen"]["room"],
            "depth": 2,
            "batch": 4,
            "n": 1,
            "tokens": 32,
        }
    if name == "width":  # plain, chain, tree and goodput at batch 1 and 4; the tree's pass carries batch x (nodes + 1)
        fixed = [(r["batch"], r["contender"], r["tokens_per_pass"]) for r in m["rows"] if r["contender"] != "goodput"]
        k = m["depth"]  # the chain's depth, chosen from the room; the tree as deep holds at most tree_capacity(k, 4)
        n = min(8, tree_capacity(k, 4))  # 8 nodes where the room gives depth >= 2; 4 on a machine with room for depth 1
        assert m["nodes"] == n and m["topk"] == 4
        assert fixed == [
            (1, "plain decoding", 1),
            (1, "chain", k + 1),
            (1, "tree", n + 1),
            (4, "plain decoding", 4),
            (4, "chain", 4 * (k + 1)),
            (4, "tree", 4 * (n + 1)),
        ]
        good = [r for r in m["rows"] if r["contender"] == "goodput"]
        assert [r["batch"] for r in good] == [1, 4] and all(r["shapes"] and r["tokens_per_s_runs"] for r in good)
        lines = l7_width.notes(m, {})
        assert lines[0].startswith("Batch 1: a tree pass emitted") and lines[1].startswith("Batch 1: goodput chose")
        assert len(width_table(m)) == 8


def test_width_races_goodput_and_records_what_it_verified_at_each_step(tiny, monkeypatch, lesson_constant):
    """Lesson 7 on the tiny pair (its draft model): goodput runs as the fourth contender, interleaved like the
    others, and its row carries the shape of every decode step of its median run, which its numbers follow."""
    lesson_constant("WIDTH_TOKENS", 6)
    m = registry.check_measurement("width", width(tiny, probe(tiny.device, tiny.dtype, quick=True), SMALL["width"]))
    assert [r["contender"] for r in m["rows"]] == list(WIDTH_CONTENDERS) * 2 and WIDTH_CONTENDERS[-1] == "goodput"
    assert all(len(r["tokens_per_s_runs"]["values"]) == WIDTH_ROUNDS for r in m["rows"])  # the same rounds as the others
    for r in (r for r in m["rows"] if r["contender"] == "goodput"):
        shapes, rows_in_flight = r["shapes"], r["batch"]
        prompts = WIDTH_PROMPTS if r["batch"] == 1 else 1  # batch 1 decodes its prompts one after another
        assert prompts <= len(shapes) <= prompts * WIDTH_TOKENS  # each step writes at least one token per row
        for s in shapes:
            assert s["shape"] in ("plain", "chain", "tree") and (s["nodes"] == 0) == (s["shape"] == "plain")
            assert s["nodes"] <= (WIDTH_DEPTH if s["shape"] == "chain" else SMALL["width"]["nodes"]) and s["depth"] <= WIDTH_DEPTH
        assert r["mean_nodes"] == pytest.approx(sum(s["nodes"] for s in shapes) / len(shapes))
        assert r["tokens_per_pass"] == round(rows_in_flight * (r["mean_nodes"] + 1))

    assert len(width_table(m)) == 8 and any(line.startswith("Batch 4: goodput chose") for line in l7_width.notes(m, {}))


def test_step_shapes_follow_each_steps_own_pass(tiny):
    """step_shapes reads a trace alone: plain, a chain of k or a tree of n nodes per decode step, and each agrees
    with what that step's verify pass carried (tokens per pass = batch × (nodes + 1))."""
    from engine import generate

    prompts = ["Hello there, how are you?", "Hi"]
    spec = {"drafter": "model", "depth": 3, "max_new_tokens": 20}
    traces = {
        "plain": generate(tiny, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=20)),
        "chain": generate(tiny, prompts, DecodeConfig(**spec)),
        "tree": generate(tiny, prompts, DecodeConfig(tree_nodes=6, tree_topk=2, **spec)),
        "goodput": generate(tiny, prompts, DecodeConfig(policy="goodput", tree_nodes=6, tree_topk=2, **spec)),
    }
    for name, trace in traces.items():
        steps = [s for s in trace.steps if s.kind == "decode"]
        shapes = step_shapes([trace])
        assert len(shapes) == len(steps), name
        for s, step in zip(shapes, steps):
            assert step.tokens_per_pass == step.batch * (s["nodes"] + 1) and s["depth"] == step.depth, name
        if name != "goodput":
            assert {s["shape"] for s in shapes} == {name}, name
    assert {s["nodes"] for s in step_shapes([traces["tree"]])} == {6} and max(s["nodes"] for s in step_shapes([traces["chain"]])) == 3
    assert step_shapes([traces["plain"], traces["chain"]])[: len(step_shapes([traces["plain"]]))] == step_shapes([traces["plain"]])


def test_median_run_is_the_run_the_cell_reports(tiny):
    jobs = {"a": runs.Job(["Hello there", "Hi"], DecodeConfig(depth=2, drafter="model", max_new_tokens=6))}
    three = runs.interleaved(tiny, jobs, 3)["a"]
    cell, median = runs.cell_of_runs(three), runs.run_stats(runs.median_run(three))
    rate = measurement.decode_rate(median)  # the median run is picked by decoding-alone rate: an odd count, one middle run
    assert rate == cell["decode_tokens_per_s"] == cell["decode_tokens_per_s_runs"]["median"]
    whole = sorted(runs.run_stats(r)["tokens_per_s"] for r in three)  # the whole-run rate is its own median (prefill in)
    assert cell["tokens_per_s"] == cell["tokens_per_s_runs"]["median"] == whole[1]
    assert {k: median[k] for k in ("verify_ms", "flops", "tokens_per_step")} == {
        k: cell[k] for k in ("verify_ms", "flops", "tokens_per_step")
    }


def test_one_knee_definition_and_the_large_batch_past_the_room():
    tokens, ms = (1, 8, 16, 32, 64, 128), (40.0, 45.0, 54.0, 62.0, 100.0, 160.0)
    assert numbers.knee_tokens(tokens, ms) == pytest.approx(16 + 16 * (60.0 - 54.0) / (62.0 - 54.0))  # 1.5× on the line
    assert runs.knee_tokens(tokens, ms) == numbers.knee_tokens(tokens, ms)  # what a recording stores: the same number
    assert numbers.knee_tokens((1, 2, 4), (40.0, 41.0, 42.0)) is None  # never bent within the curve
    assert runs.knee_tokens((1, 2, 4), (40.0, 41.0, 42.0)) == 4  # stored as the last point measured
    room = numbers.room_tokens(tokens, ms)
    assert room == 12  # 1.25 x 40 = 50 ms: between 8 (45) and 16 (54) tokens, at 12.4
    assert numbers.past_batch(room, 3, runs.LARGE_BATCHES) == 16  # 16 × 4 = 64 tokens >= 4 × the room
    knob = next(k for k in EXPERIMENTS["past_the_ridge"].knobs if k.key == "l3_batch")
    assert 0 in knob.options and set(runs.LARGE_BATCHES) < set(knob.options)  # 0: chosen from the pass curve


def _step(seqs, step_ms, kind="decode"):
    return SimpleNamespace(kind=kind, step_ms=step_ms, seqs=[SimpleNamespace(seq=i, emitted=[0] * n) for i, n in enumerate(seqs)])


def test_time_per_output_token_stops_a_rows_clock_when_it_ends():
    """One TPOT everywhere: the app reads the engine's (engine/trace/records.py decode_timing, wall clock), whose
    clock for a row stops at its last token."""
    # row 0 writes 1 token per step for 4 steps of 10 ms; row 1 writes 2 in the first step, then leaves the batch
    steps, clock = [], 5.0
    for seqs, ms_, kind in (
        ([1, 1], 5.0, "prefill"),
        ([1, 2], 10.0, "decode"),
        ([1], 10.0, "decode"),
        ([1], 10.0, "decode"),
        ([1], 10.0, "decode"),
    ):
        clock += ms_ if kind == "decode" else 0.0
        steps.append(_step(seqs, ms_, kind))
        steps[-1].t_end_s = clock / 1000.0
    timing = decode_timing(steps, wall_s=clock / 1000.0)
    assert timing["tpot_ms"] == pytest.approx((40.0 / 4 + 10.0 / 2) / 2)
    assert measurement.tpot_ms(SimpleNamespace(summary={"tpot_ms": timing["tpot_ms"]})) == timing["tpot_ms"]
    assert measurement.tpot_ms(SimpleNamespace(summary={})) is None


def test_spread_and_median_run():
    assert measurement.spread([3.0, 1.0, 2.0]) == {"values": [3.0, 1.0, 2.0], "median": 2.0, "min": 1.0, "max": 3.0}
    assert measurement.median_index([3.0, 1.0, 2.0]) == 2 and measurement.median_index([4.0, 1.0]) == 1
    with pytest.raises(ValueError):
        measurement.spread([])


def test_a_recording_beside_other_work_is_labelled_disturbed_both_ways():
    quiet = {"machine": "m", "dtype": "float32", "date": "2026-12-01", "note": "load average 0.9 to 1.4 on 2 cores"}
    quiet["measurement"] = {"ar": {"other_cores": 0.1}}
    assert not measurement.disturbed(quiet) and measurement.recorded_label(quiet).startswith("recorded on m")
    busy = quiet | {"note": "load average 3.1 to 6.9 on 2 cores"}
    assert measurement.disturbed(busy) and measurement.recorded_label(busy).startswith(
        "DISTURBED: recorded beside other work, timings noisy;"
    )
    others = quiet | {"measurement": {"runs": [{"spec": {"other_cores": 0.9}}]}}  # the load average was low, a run was not
    assert measurement.disturbed(others) and measurement.other_cores(others["measurement"]) == 0.9
    assert measurement.disturbed(quiet | {"note": "a shared 2-core machine with other work running: timings are noisy"})
    assert measurement.note_load("load average 1.2 to 3.4 on 2 cores") == (3.4, 2) and measurement.note_load("quiet") is None


def test_every_shipped_recording_loads_and_a_lane_without_its_decode_fields_is_refused():
    folder = Path(__file__).resolve().parents[2] / "assets" / "lessons"
    for name in EXPERIMENTS:
        if name == "one_step":  # lesson 0's recording is the step-through trace (app/lessons/l0_one_step.py)
            continue
        record = registry.load_record(folder / f"{name}.json")
        assert record["experiment"] == name
    spread = {"values": [1.0], "median": 1.0, "min": 1.0, "max": 1.0}
    lane = {
        "summary": dict.fromkeys(measurement.SUMMARY_KEYS, 1.0),
        "drafter": "",
        "depth": 0,
        "draft_share": 0.0,
        "verified_slots": [0, 0],
        "decode_steps": 3,
        "speculated_steps": 0,
        "ttft_s": 0.1,
        "decode_s": 0.5,
        "decode_tokens": 3,
        "decode_tokens_per_s": 6.0,
        "decode_tokens_per_s_runs": spread,
        "passes": [[1, 0, 3]],
    }
    measurement.check(lane, measurement.LANE)  # decoding timed apart from the prompt's pass: fits
    for key in ("ttft_s", "decode_tokens_per_s_runs", "passes"):  # a lane from before decoding was timed apart
        with pytest.raises(measurement.MeasurementError, match=f"missing {key}"):
            measurement.check({k: v for k, v in lane.items() if k != key}, measurement.LANE)
    with pytest.raises(measurement.MeasurementError, match="tokens_per_s_runs.median"):
        measurement.check(lane | {"decode_tokens_per_s_runs": spread | {"median": None}}, measurement.LANE)


@pytest.mark.parametrize("room", [1, 2, 3, 4, 8, 16, 32])
@pytest.mark.parametrize(
    "knobs", [{"nodes": 0, "topk": 0, "batch": 0}, {"nodes": 8, "topk": 4, "batch": 4}, {"nodes": 16, "topk": 2, "batch": 0}]
)
def test_width_shapes_are_valid_configs_in_any_room(room, knobs):
    """A small room (a slow CI machine measured room 2: depth 1) must still give lesson 7 shapes the engine accepts:
    the tree never holds more nodes than a tree as deep as the chain can draft."""
    c = width_choice(room, knobs)
    configs = width_configs("eagle", c["depth"], c["nodes"], c["topk"])
    assert [cfg.tree_nodes for cfg in configs] == [0, 0, c["nodes"], c["nodes"]]
    assert 1 <= c["nodes"] <= 64 and c["depth"] >= 1
    if knobs["nodes"] == 0 and room - 1 > c["depth"]:
        assert c["nodes"] <= room - 1  # the default tree fits the room where it can


def test_a_large_room_chooses_at_most_batch_16_and_a_student_may_still_pick_32():
    """A room of 17 tokens would put the past-the-room batch at 32 (4 × 17 = 68 > 16 × 4): the lessons choose up to
    runs.CHOSEN_MOST by themselves, so a live run stays short; 32 stays a knob option."""
    assert numbers.past_batch(17, 3, runs.LARGE_BATCHES) == 32
    assert numbers.past_batch(17, 3, runs.chosen(runs.LARGE_BATCHES)) == 16
    assert runs.chosen((32, 64)) == (32,)  # nothing up to 16 offered: the smallest option
    knob = next(k for k in EXPERIMENTS["past_the_ridge"].knobs if k.key == "l3_batch")
    assert 32 in knob.options


def test_rounds_read_the_prompts_pass_warm_except_in_the_lesson_that_shows_it(live, monkeypatch):
    """A lesson's rounds decode the same prompts again and again: after the warm-up (or the first run that meets a
    batch) each run reads the prompt's pass from the pair's store (runs.prompt_store) and times decoding alone; a job
    with warm off runs it every time. Lesson 2, whose table shows the whole run, runs it every time."""
    pair, hw = live
    prompts, cfg = ["Name three colours.", "Count to five."], DecodeConfig(mode="autoregressive", max_new_tokens=4)
    for warm, expect in ((True, [1, 1]), (False, [0, 0])):
        timed, _ = runs.timed_rounds(pair, {"a": runs.Job(prompts, cfg, warm=warm)}, 2)
        assert [r[0].meta["warm_prompts"] for r in timed["a"]] == expect, warm
        assert all((r[0].steps[0].target_flops > 0) == (not warm) for r in timed["a"])  # a warm prompt pass ran nothing
    from app.lessons import l2_more_flops

    seen = {}

    def capture(pair_, jobs, rounds):
        seen.update(jobs)
        raise StopIteration

    monkeypatch.setattr(l2_more_flops, "timed_rounds", capture)
    with pytest.raises(StopIteration):
        EXPERIMENTS["more_flops"].run(pair, hw, SMALL["more_flops"])
    assert seen and not any(job.warm for job in seen.values())
