"""Lessons 1-3's notes (each record's `notes`) and the noise rules under them (app/lessons/kit/numbers.py) on plain data:
every sentence follows the numbers both ways, chart, table and words share one statistic, a round far outside the
others is named and kept, and a pass with more tokens is never called cheaper."""

from __future__ import annotations

from types import SimpleNamespace

from app.common import measurement
from app.lessons import l1_memory_bound, l2_more_flops, l3_past_the_ridge
from app.lessons.kit import numbers
from app.lessons.kit.experiment import findings
from app.lessons.kit.show import no_room
from app.lessons.l1_memory_bound import cheaper_notes, largest_pass, memory_bound_figure, memory_bound_table, pass_ratio, read_tokens
from app.lessons.l2_more_flops import more_flops_figure, per_token, seed_conclusion
from app.lessons.l3_past_the_ridge import large_batch_speedup, past_the_ridge_table, ridge_points, ridge_settings
from app.views import metrics


def _row(n, ms, rounds=None, peak_bw=10e9, bw_share=0.2, fl_share=0.02, peak_fl=100e9):
    """A pass_costs row with chosen shares of the peaks (the counts follow from them and the time), its rounds' ms."""
    s = ms / 1000
    row = {
        "batch": 1,
        "new_tokens": n,
        "tokens_per_pass": n,
        "context": 150,
        "ms": ms,
        "ms_per_token": ms / n,
        "bytes": bw_share * peak_bw * s,
        "flops": fl_share * peak_fl * s,
        "achieved_bandwidth": bw_share * peak_bw,
        "achieved_flops": fl_share * peak_fl,
    }
    return row | {"ms_runs": measurement.spread(rounds or [ms * 0.98, ms, ms * 1.02])}


def _lesson1(rows, ridge=20.0):
    return {"rows": rows, "peak_bandwidth": 10e9, "peak_flops": 100e9, "ridge_point": 10.0, "dtype": "float32", "ridge_tokens": ridge}


def test_lesson1_notes_read_the_pass_past_the_room_and_the_regimes_both_ways():
    # this CPU's shape: 4 tokens at 1.10x, 16 at 2.6x: the room is 4, the pass past it (16 tokens) costs real time
    rows = [_row(1, 8.5), _row(2, 8.6), _row(4, 9.4), _row(8, 13.5), _row(16, 22.4), _row(32, 55.0)]
    m = _lesson1(rows)
    lines = l1_memory_bound.notes(m, {})
    assert (
        lines[0] == "One token: 8.50 ms; 16 tokens (the measured pass nearest four times the room): 22.40 ms "
        "(medians). Round by round the 16-token pass took 2.64× the time for 16× the tokens "
        "(the typical round's ratio, the table's × column; it can differ from the ratio of the medians)."
    )
    assert read_tokens(m) == 16 and round(pass_ratio(m, {}), 2) == 2.64  # the prediction reads that row
    assert "2.64" in str([r["× one-token pass"] for r in memory_bound_table(m)])  # the table says the same
    assert lines[1].startswith("Against the probed peaks the one-token pass reached 20% of the bandwidth and 2% of the FLOP/s")
    # the probe's ridge beside the curve's room, both ways: the room read from these rows, as the prediction reads it
    assert lines[2].startswith("The probed peaks put the ridge at about 20 tokens per pass (weights alone); the curve's room is 5: ")
    assert "before the probe says the arithmetic would be full" in lines[2]
    assert "stays nearly flat at least as far as the probe predicts" in l1_memory_bound.ridge_note(_lesson1(rows, ridge=3.0))
    # the other way: a flat curve reads its largest pass, a steep one its second
    flat = _lesson1([_row(1, 10.0), _row(4, 10.2), _row(16, 11.0), _row(32, 12.0)])
    assert (
        l1_memory_bound.notes(flat, {})[0] == "One token: 10.00 ms; 32 tokens (the measured pass nearest four times the room): 12.00 ms "
        "(medians). Round by round the 32-token pass took 1.20× the time for 32× the tokens "
        "(the typical round's ratio, the table's × column; it can differ from the ratio of the medians)."
    )
    steep = _lesson1([_row(1, 10.0), _row(2, 19.0), _row(4, 38.0)])
    assert (
        l1_memory_bound.notes(steep, {})[0] == "One token: 10.00 ms; 4 tokens (the measured pass nearest four times the room): 38.00 ms "
        "(medians). Round by round the 4-token pass took 3.80× the time for 4× the tokens "
        "(the typical round's ratio, the table's × column; it can differ from the ratio of the medians)."
    )
    # lesson 1 measures the curve itself: no second room sentence from the cached curve beside its own table
    assert findings(l1_memory_bound.RECORD, m | {"curve": _curve(), "chosen": {"room": 4}}, {}) == lines


def test_lesson1_a_larger_pass_never_reads_cheaper_than_a_smaller_one():
    rows = [_row(1, 8.55, [8.25, 8.55, 8.61]), _row(2, 8.25, [8.24, 8.25, 9.32]), _row(4, 9.4), _row(16, 22.4)]
    notes = cheaper_notes(rows)
    assert notes == ["The 2-token pass read 8.25 ms against 8.55 ms for 1: the same within noise (can't tell), not a cheaper pass."]
    table = memory_bound_table(_lesson1(rows))
    assert table[1]["note"] == "same within noise as the smaller pass" and table[2]["note"] == ""
    apart = [_row(1, 8.5, [8.4, 8.5, 8.6]), _row(2, 7.0, [6.9, 7.0, 7.1])]
    assert (
        "lower by the rule (1.21× (95% range 1.21–1.22×, 3 rounds)), a kernel path that suits that size, not cheaper tokens"
        in cheaper_notes(apart)[0]
    )


def test_far_rounds_are_named_and_kept_so_they_widen_the_interval():
    """A round far outside the others (a cold start) is named, never dropped: dropping rounds after seeing them names
    winners inside the noise. Kept, it widens the interval, and the rule says "can't tell"."""
    assert numbers.far_rounds([100.0, 104.0, 40.0]) == [2] and numbers.far_rounds([100.0, 40.0]) == []
    assert numbers.far_rounds([100.0, 110.0, 95.0, 105.0, 99.0]) == []
    run = _pair(ar=[100.0, 102.0, 98.0], spec=[150.0, 153.0, 20.0])  # the third speculative round: a cold start
    sp = numbers.speedup(run)
    assert sp["far"] == [2] and sp["rounds"] == 3 and sp["lo"] < 1 < sp["hi"]
    assert numbers.verdict(run) == 0 and sp["verdict"].kind == "can't tell"
    steady = _pair(ar=[100.0, 102.0, 98.0, 101.0], spec=[150.0, 153.0, 148.0, 151.0])
    assert numbers.verdict(steady) == 1 and numbers.speedup(steady)["far"] == []


def _lane(decode, whole, step_ms=100.0, verify_ms=110.0, draft_share=0.1, alpha=None):
    return {
        "decode_tokens_per_s_runs": measurement.spread(decode),
        "tokens_per_s_runs": measurement.spread(whole),
        "step_ms": step_ms,
        "verify_ms": verify_ms,
        "draft_share": draft_share,
        "summary": {"alpha": alpha},
        "depth": 3,
        "decode_steps": 10,
        "tpot_ms": 1000.0 / decode[0],
    }


def _pair(ar, spec, verify=1.1, step=1.3, alpha=0.6, kept=2.2, steps=(24, 12), whole=0.8):
    m = {
        "speedup": spec[0] / ar[0],
        "alpha": alpha,
        "kept_per_step": kept,
        "ar_decode_steps": steps[0],
        "spec_decode_steps": steps[1],
        "flops_ratio": 1.04,
        "flops_wasted": 1e9,
        "operations_factor": 1.05,
    }
    return {
        "m": m,
        "ar": _lane(ar, [x * whole for x in ar]),
        "spec": _lane(spec, [x * whole * 0.9 for x in spec], step_ms=100.0 * step, verify_ms=100.0 * verify, alpha=alpha),
    }


def _lesson2(ar, spec, flops=(1.0e9, 1.04e9), moved=(3.0e8, 0.8e8)):
    run = _pair(ar, spec, steps=(31, 8))
    costs = {"ar": {"tokens": 31, "flops": 31 * flops[0], "bytes": 31 * moved[0], "flops_wasted": 0.0}}
    costs["spec"] = {"tokens": 31, "flops": 31 * flops[1], "bytes": 31 * moved[1], "flops_wasted": 31 * 0.04e9}
    return run | {"decode_costs": costs}


def test_lesson2_more_flops_fewer_bytes_faster_both_ways():
    m = _lesson2([100.0, 104.0, 97.0], [300.0, 310.0, 290.0])
    ratios = per_token(m)
    assert round(ratios["flops"], 2) == 1.04 and round(ratios["bytes"], 2) == 0.27 and round(ratios["time"], 2) == 0.33
    line = l2_more_flops.notes(m, {})[0]
    assert line == (
        "Per decoded token, speculation did 1.04× plain decoding's FLOPs and moved 0.27× its bytes: more arithmetic, "
        "fewer bytes. It took 10 decode passes against 10."
    )
    table = l2_more_flops.more_flops_table(m, {})
    assert table[1]["FLOPs per token × plain"] == 1.04 and table[1]["bytes per token × plain"] == 0.27
    fig = more_flops_figure(m, {}, "recorded on x")
    assert [round(y, 2) for y in fig.data[0].y] == [1.04, 0.27, 0.33]  # the chart's bars are the words' ratios
    # the other way: a doctored run where speculation moved as many bytes and lost every round
    slow = _lesson2([100.0, 104.0, 97.0], [60.0, 62.0, 58.0], moved=(3.0e8, 3.1e8))
    slow["m"] |= {"speedup": 0.6}
    slow["spec"]["step_ms"] = 500.0
    assert "read the bars above" in l2_more_flops.notes(slow, {})[0]


def _curve():
    return {
        "tokens": [1, 2, 4, 8, 16, 32],
        "ms": [8.5, 8.6, 9.4, 13.5, 22.4, 55.0],
        "knee_tokens": 8.0,
        "key": "x",
        "measured_at": "2026-12-03T08:00",
    }


def _lesson3(one, many, ngram):
    return {
        "drafter": "eagle",
        "ridge_tokens": 14.3,
        "runs": [one | {"batch": 1}, many | {"batch": 4}],
        "ngram": ngram,
        "curve": _curve(),
        "chosen": {"room": 4, "depth": 3, "batch": 4},
    }


def test_lesson3_inside_the_room_pays_past_it_the_drafter_decides_both_ways():
    one = _pair([100.0, 102.0, 98.0, 101.0, 99.0], [140.0, 145.0, 138.0, 142.0, 141.0])
    many = _pair(
        [400.0, 410.0, 390.0, 405.0, 395.0], [250.0, 260.0, 245.0, 255.0, 248.0], verify=2.4, step=2.6, alpha=0.5, kept=1.8, steps=(24, 20)
    )
    ngram = _pair(
        [370.0, 380.0, 360.0, 375.0, 365.0], [900.0, 930.0, 880.0, 910.0, 890.0], verify=2.4, step=2.45, alpha=1.0, kept=3.9, steps=(24, 6)
    )
    m = _lesson3(one, many, ngram)
    lines = l3_past_the_ridge.notes(m, {"depth": 0})
    assert lines[:3] == [
        "EAGLE head, batch 1: the run took 2.00× fewer steps than plain, each costing 1.30 plain steps (10% drafting).",
        "EAGLE head, batch 4: a row kept 1.80 tokens per step, but the run took 1.20× fewer steps than plain, each costing "
        "2.60 plain steps (10% drafting).",  # the run waited for its slowest row
        "n-gram lookup, copy-this-text prompts, batch 4: a row kept 3.90 tokens per step, and the run took 4.00× fewer steps "
        "than plain, each costing 2.45 plain steps (10% drafting).",
    ]
    # chart, table and words show the same number
    points = ridge_points(m, {"depth": 0})
    assert [round(p["speedup"], 2) for p in points] == [1.41, 0.63, 2.44]
    assert large_batch_speedup(m, {}) == points[1]["speedup"]
    table = past_the_ridge_table(m, {"depth": 0})
    assert [r["speedup, decoding alone"] for r in table] == [1.41, 0.63, 2.44] and table[1]["verdict"] == "slower"
    assert [r["tokens kept per row per step"] for r in table] == [2.2, 1.8, 3.9]  # the notes' numbers, in the table
    assert [r["decode steps, plain ÷ speculative"] for r in table] == [2.0, 1.2, 4.0]
    assert [r["a step's cost (plain steps)"] for r in table] == [1.3, 2.6, 2.45]


def test_seed_passes_the_same_within_noise_and_the_flops_difference():
    def seed(flops_wide, flops_deep, wide_ms=(40.0,), deep_ms=(40.0,)):
        p = {"label": "x", "new_tokens": 1, "tokens_per_pass": 5, "weight_bytes": 5e8}
        return {
            "passes": [
                p | {"batch": 5, "flops": flops_wide, "kv_bytes": 5e6, "ms": sorted(wide_ms)[len(wide_ms) // 2], "times_ms": list(wide_ms)},
                p
                | {
                    "batch": 1,
                    "new_tokens": 5,
                    "flops": flops_deep,
                    "kv_bytes": 1e6,
                    "ms": sorted(deep_ms)[len(deep_ms) // 2],
                    "times_ms": list(deep_ms),
                },
            ]
        }

    same = seed_conclusion(seed(1.4012e9, 1.4e9))
    assert "5 rows of context read 5.00 MB against 1.00 MB for one row (5.0×)" in same
    assert "The rule cannot tell them apart (40.0 against 40.0 ms, medians; round by round 1.00×)" in same  # one round each: no range
    level = seed_conclusion(seed(1.5e9, 1.4e9, (10.0, 10.1, 10.0, 10.05, 10.02), (10.01, 10.05, 10.02, 10.0, 10.04)))
    assert "They took the same time within noise (10.0 against 10.0 ms, medians; round by round 1.00×: level by the rule)" in level
    overlap = seed_conclusion(seed(1.5e9, 1.4e9, (13.7, 10.8, 10.6), (12.3, 11.0, 9.0)))  # 1.0 apart, rounds overlap
    assert "The rule cannot tell them apart" in overlap and "as Barrow's example says" in overlap
    apart = seed_conclusion(seed(1.5e9, 1.4e9, (20.0, 20.5, 21.0), (10.0, 10.2, 10.4)))
    assert (
        "The batch-5 pass took longer: 20.5 against 10.2 ms (medians; round by round 2.01×, 95% range 1.99–2.03×), "
        "a difference the rule names" in apart
    )
    # a gap the rule names but within SAME_TIME: named, not "the same time" (the shipped recording's 1.04×)
    close = seed_conclusion(seed(1.5e9, 1.4e9, (13.3, 13.4, 13.2), (12.9, 13.0, 12.8)))
    assert "took longer" in close and "a gap the rule names, yet within the 1.10×" in close and "same time within" not in close
    # far apart, yet the rounds scatter too widely for the rule (a busy live run): not "the same time", and not Barrow's
    busy = seed_conclusion(seed(1.5e9, 1.4e9, (598.1, 345.3, 497.9), (142.8, 289.1, 30.3)))
    assert "This run cannot tell: 497.9 against 142.8 ms (medians; round by round 4.35×)" in busy and "not tested here" in busy
    assert "same time" not in busy and "as Barrow's example says" not in busy


def test_room_words_and_the_chosen_settings_come_from_the_curve():
    c = _curve()
    room = numbers.room_tokens(c["tokens"], c["ms"])
    assert room == 5  # 1.25 x 8.5 = 10.6 ms: between 4 (9.4) and 8 (13.5) tokens, at 5.2
    assert largest_pass(4) == 32 and largest_pass(room) == 64 and largest_pass(64) == 128
    assert ridge_settings(room, {"depth": 0, "batch": 0}) == {"room": 5, "depth": 3, "batch": 8}  # 32 tokens >= 4 x 5
    assert ridge_settings(room, {"depth": 2, "batch": 16}) == {"room": 5, "depth": 2, "batch": 16}  # a knob wins
    assert ridge_settings(200, {"depth": 0, "batch": 0}) == {"room": 200, "depth": 3, "batch": 16}  # a GPU's room: at most 16 chosen
    assert ridge_settings(200, {"depth": 0, "batch": 32}) == {"room": 200, "depth": 3, "batch": 32}  # 32 by the knob


def test_decode_costs_leave_the_prompts_pass_out():
    step = SimpleNamespace
    trace = SimpleNamespace(
        steps=[
            step(kind="prefill", flops=50e9, bytes=3e8, flops_wasted=0.0, seqs=[step(emitted=[1])]),
            step(kind="decode", flops=1e9, bytes=3e8, flops_wasted=0.0, seqs=[step(emitted=[1, 2, 3])]),
            step(kind="decode", flops=1e9, bytes=3e8, flops_wasted=0.2e9, seqs=[step(emitted=[4])]),
        ]
    )
    assert metrics.decode_totals([trace]) == {"tokens": 4, "flops": 2e9, "bytes": 6e8, "flops_wasted": 0.2e9}


def test_lesson1_a_cold_round_is_shown_and_kept_in_the_range():
    rows = [_row(1, 8.2, [8.0, 8.2, 14.0, 8.1, 8.3]), _row(4, 9.0), _row(16, 15.0, [14.6, 15.0, 15.2, 14.9, 15.1])]
    fig = memory_bound_figure(_lesson1(rows), {})
    cold = [tr for tr in fig.data if tr.name and tr.name.startswith("a round far outside")]
    assert cold and list(cold[0].y) == [14.0 / 8.2]
    assert memory_bound_table(_lesson1(rows))[0]["rounds (ms)"] == "8.0–14.0, round 3 far from the others"
    warm = [_row(1, 8.2, [8.0, 8.2, 8.4, 8.1, 8.3]), _row(4, 9.0), _row(16, 15.0, [14.6, 15.0, 15.2, 14.9, 15.1])]
    assert "far from" not in memory_bound_table(_lesson1(warm))[0]["rounds (ms)"]


def test_a_verdict_is_round_by_round_so_a_drift_between_rounds_cancels():
    """Interleaved rounds are judged by each round's ratio: speculation steadily faster round by round wins even where
    the machine drifted so far that the two lanes' ranges overlap; rounds that disagree name no winner."""

    def lane(values):
        return {"decode_tokens_per_s_runs": measurement.spread(values)}

    drifting = {"ar": lane([120.0, 150.0, 105.0, 115.0]), "spec": lane([150.0, 186.0, 130.0, 144.0])}
    assert min(drifting["spec"]["decode_tokens_per_s_runs"]["values"]) < max(drifting["ar"]["decode_tokens_per_s_runs"]["values"])
    assert numbers.verdict(drifting) == 1
    assert numbers.verdict({"ar": drifting["spec"], "spec": drifting["ar"]}) == -1
    mixed = {"ar": lane([120.0, 150.0, 105.0, 115.0]), "spec": lane([150.0, 140.0, 126.0, 140.0])}
    assert numbers.verdict(mixed) == 0
    assert numbers.verdict({"ar": lane([100.0]), "spec": lane([200.0])}) == 0  # one round: no interval, no winner


def test_a_room_of_one_token_says_no_draft_fits_and_a_room_of_several_says_nothing():
    assert "No room here" in no_room(1) and "k = 1" in no_room(1)
    assert no_room(2) == "" and no_room(13) == ""
