"""Lessons 1-3's conclusions (app/lessons/pass_conclusions.py) and the noise rules under them (app/lessons/noise.py) on
plain data: every claim follows the numbers both ways, chart, table and words share one statistic, a round far
outside the others is named and left out, and a pass with more tokens is never called cheaper."""

from __future__ import annotations

from types import SimpleNamespace

from app.common import measurement
from app.lessons.kit import knee, noise
from app.lessons.kit.show import chosen_words, speedup_words, step_cost_words
from app.lessons.l1_memory_bound import cheaper_notes, counted_ridge, largest_pass, memory_bound_conclusion, pass_ratio, read_tokens
from app.lessons.l1_memory_bound.charts import memory_bound_figure, memory_bound_table
from app.lessons.l2_more_flops import decode_costs, more_flops_conclusion, more_flops_figure, per_token, seed_conclusion
from app.lessons.l3_past_the_ridge import large_batch_speedup, past_the_ridge_conclusion, past_the_ridge_table, ridge_points, ridge_settings


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


def test_lesson1_room_and_past_it_both_ways():
    # this CPU's shape: 4 tokens at 1.10x, 16 at 2.6x: the room is 4, the pass past it (16 tokens) costs real time
    rows = [_row(1, 8.5), _row(2, 8.6), _row(4, 9.4), _row(8, 13.5), _row(16, 22.4), _row(32, 55.0)]
    m = _lesson1(rows)
    text = "\n".join(memory_bound_conclusion(m))
    assert "Up to 4 tokens a pass cost at most 1.25× that (9.4 ms for 4)" in text
    assert "The 16-token pass (4× the room) cost 22.4 ms (rounds 22.0–22.8), 2.64× the one-token pass for 16× the tokens" in text
    assert "more than 1.25× (95% range " in text and "so past the room the extra tokens cost real time" in text
    assert read_tokens(m) == 16 and round(pass_ratio(m, {}), 2) == 2.64  # the prediction reads that row
    # the statements the issue found side by side on one recording are gone
    assert "not nearly free" not in text and "a fixed cost still set much of its time" not in text
    # the other way: a flat curve (a GPU-like room past every pass measured)
    flat = _lesson1([_row(1, 10.0), _row(4, 10.2), _row(16, 11.0), _row(32, 12.0)])
    text = "\n".join(memory_bound_conclusion(flat))
    assert "Up to 32 tokens a pass cost at most 1.25× that" in text and "past the room" not in text
    # and no room at all: already 2 tokens cost more than 1.25x
    steep = _lesson1([_row(1, 10.0), _row(2, 19.0), _row(4, 38.0)])
    text = "\n".join(memory_bound_conclusion(steep))
    assert "Already the 2-token pass cost more than 1.25× the one-token pass: on this machine there is no room" in text
    assert "The 4-token pass (4× the room) cost 38.0 ms" in text and "close to 4×" in text


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


def test_lesson1_segment_wording_follows_the_flops():
    rows = [_row(1, 30.0), _row(16, 35.0), _row(32, 50.0, fl_share=0.2), _row(64, 100.0, fl_share=0.2)]
    text = "\n".join(memory_bound_conclusion(_lesson1(rows)))
    assert "From 32 to 64 tokens its time grew 2.00× for 2.00× the FLOPs: in step with the arithmetic" in text
    flat = [_row(1, 30.0), _row(16, 35.0), _row(32, 50.0, fl_share=0.2), _row(64, 55.0, fl_share=0.2 * 100 / 55)]
    text = "\n".join(memory_bound_conclusion(_lesson1(flat)))
    assert "grew 1.10× for 2.00× the FLOPs: less than the arithmetic grew" in text and "in step with" not in text


def test_far_rounds_are_named_and_kept_so_they_widen_the_interval():
    """A round far outside the others (a cold start) is named, never dropped: dropping rounds after seeing them names
    winners inside the noise. Kept, it widens the interval, and the rule says "can't tell"."""
    assert noise.far_rounds([100.0, 104.0, 40.0]) == [2] and noise.far_rounds([100.0, 40.0]) == []
    assert noise.far_rounds([100.0, 110.0, 95.0, 105.0, 99.0]) == []
    run = _pair(ar=[100.0, 102.0, 98.0], spec=[150.0, 153.0, 20.0])  # the third speculative round: a cold start
    sp = noise.speedup(run)
    assert sp["far"] == [2] and sp["rounds"] == 3 and sp["lo"] < 1 < sp["hi"]
    assert noise.verdict(run) == 0 and sp["verdict"].kind == "can't tell"
    assert "round 3 of 3 far outside the others (a cold start or other load): kept, it widens the range" in noise.far_text(run)
    assert "round 3 of 3 far outside" in speedup_words(run)
    steady = _pair(ar=[100.0, 102.0, 98.0, 101.0], spec=[150.0, 153.0, 148.0, 151.0])
    assert noise.verdict(steady) == 1 and noise.speedup(steady)["far"] == []


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
    text = more_flops_conclusion(m)
    assert "speculation did 1.04× the FLOPs of plain decoding and moved 0.27× the bytes: more arithmetic, far fewer bytes" in text
    sp = noise.speedup(m)
    assert f"Decoding alone it ran {sp['value']:.2f}× (95% range {sp['lo']:.2f}–{sp['hi']:.2f}× over 3 rounds; whole run" in text
    assert "faster than plain by the rule" in text and "which is why speculation paid" in text
    assert "A verify pass cost 1.10× a plain step (within 1.25×)" in text
    fig = more_flops_figure(m, {}, "recorded on x")
    assert [round(y, 2) for y in fig.data[0].y] == [1.04, 0.27, 0.33]  # the chart's bars are the words' ratios
    # the other way: a doctored run where speculation moved as many bytes and lost every round
    slow = _lesson2([100.0, 104.0, 97.0], [60.0, 62.0, 58.0], moved=(3.0e8, 3.1e8))
    slow["m"] |= {"speedup": 0.6}
    slow["spec"]["step_ms"] = 500.0
    text = more_flops_conclusion(slow)
    assert "far fewer bytes" not in text and "read the bars above" in text
    assert "slower than plain by the rule" in text and "which is why speculation slowed decoding down" in text


def test_a_verify_pass_with_more_tokens_is_never_called_cheaper_than_a_plain_step():
    assert step_cost_words(0.93) == (
        "a verify pass read 0.93× a plain step: the same as a plain step within noise (a pass with more tokens is not cheaper)"
    )
    assert "cost 1.31× a plain step (above 1.25×)" in step_cost_words(1.31)


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
    many = _pair([400.0, 410.0, 390.0, 405.0, 395.0], [250.0, 260.0, 245.0, 255.0, 248.0], verify=2.4, step=2.6, alpha=0.5, kept=1.8)
    ngram = _pair([370.0, 380.0, 360.0, 375.0, 365.0], [900.0, 930.0, 880.0, 910.0, 890.0], verify=2.4, step=2.45, alpha=1.0, kept=3.9)
    m = _lesson3(one, many, ngram)
    text = "\n".join(past_the_ridge_conclusion(m))
    assert "up to 4 tokens (the room); a 16-token pass costs 2.64×" in text
    assert "Batch 1 at depth 3 verifies 4 tokens per pass, inside the room; batch 4's verify pass carries 16 tokens, 4.0× the room" in text
    assert "At batch 1 a verify pass cost 1.10× a plain step (within 1.25×)" in text
    assert "at batch 4 a verify pass cost 2.40× a plain step (above 1.25×)" in text
    assert (
        "decoding alone: 1.41× (95% range 1.40–1.42× over 5 rounds; whole run, prefill included: 1.27×)" in text
        and "at batch 1, faster than plain by the rule" in text
    )
    assert "0.63× (95% range" in text and "at batch 4, slower than plain by the rule" in text
    assert "At the same pass size the drafter decided: cheap drafts accepted often still paid past the room, by the rule" in text
    # chart, table and words show the same number
    points = ridge_points(m, {"depth": 0})
    assert [round(p["speedup"], 2) for p in points] == [1.41, 0.63, 2.44]
    assert f"{points[1]['speedup']:.2f}×" in text and large_batch_speedup(m, {}) == points[1]["speedup"]
    table = past_the_ridge_table(m, {"depth": 0})
    assert [r["speedup, decoding alone"] for r in table] == [1.41, 0.63, 2.44] and table[1]["verdict"] == "slower"
    # the other way: the n-gram lookup no better than the EAGLE head, both inside the noise
    flat = _pair([370.0, 380.0, 360.0, 375.0, 365.0], [240.0, 400.0, 250.0, 380.0, 260.0], alpha=0.4, kept=1.5)
    text = "\n".join(past_the_ridge_conclusion(_lesson3(one, many, flat)))
    assert "still paid past the room" not in text and "can't tell with 5 rounds" in text


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
    assert "the same FLOPs to within 0.09% (1.40 GFLOP each: only the attention term differs, by +1.2 MFLOP for the batch)" in same
    assert "They took the same time within noise" in same
    overlap = seed_conclusion(seed(1.5e9, 1.4e9, (13.7, 10.8, 10.6), (12.3, 11.0, 9.0)))  # 1.0 apart, rounds overlap
    assert "the same time within noise" in overlap and "1.50 against 1.40 GFLOP (+7.1%" in overlap
    apart = seed_conclusion(seed(1.5e9, 1.4e9, (20.0, 20.5, 21.0), (10.0, 10.2, 10.4)))
    assert "The batch-5 pass took longer: 20.5 against 10.2 ms (2.01×), a difference the rule names" in apart


def test_room_words_and_the_chosen_settings_come_from_the_curve():
    c = _curve()
    room = knee.room_tokens(c["tokens"], c["ms"])
    assert room == 4 and largest_pass(room) == 32 and largest_pass(64) == 128
    assert ridge_settings(room, {"depth": 0, "batch": 0}) == {"room": 4, "depth": 3, "batch": 4}
    assert ridge_settings(room, {"depth": 2, "batch": 16}) == {"room": 4, "depth": 2, "batch": 16}  # a knob wins
    assert ridge_settings(200, {"depth": 0, "batch": 0}) == {"room": 200, "depth": 3, "batch": 32}  # a GPU's room

    words = chosen_words({"curve": c, "chosen": {"room": 4, "depth": 3, "batch": 4}})
    assert words.startswith("On this machine a pass stays within 1.25× a one-token pass up to 4 tokens (the room)")
    assert (
        "depth k = 3 (4 tokens per verify pass at batch 1, inside the room) and a large batch of 4 (16 tokens per pass, 4.0× the room)"
        in words
    )


def test_decode_costs_leave_the_prompts_pass_out():
    step = SimpleNamespace
    trace = SimpleNamespace(
        steps=[
            step(kind="prefill", flops=50e9, bytes=3e8, flops_wasted=0.0, seqs=[step(emitted=[1])]),
            step(kind="decode", flops=1e9, bytes=3e8, flops_wasted=0.0, seqs=[step(emitted=[1, 2, 3])]),
            step(kind="decode", flops=1e9, bytes=3e8, flops_wasted=0.2e9, seqs=[step(emitted=[4])]),
        ]
    )
    assert decode_costs([trace]) == {"tokens": 4, "flops": 2e9, "bytes": 6e8, "flops_wasted": 0.2e9}


def test_lesson1_a_cold_round_is_shown_and_kept_in_the_range():
    rows = [_row(1, 8.2, [8.0, 8.2, 14.0, 8.1, 8.3]), _row(4, 9.0), _row(16, 15.0, [14.6, 15.0, 15.2, 14.9, 15.1])]
    text = "\n".join(memory_bound_conclusion(_lesson1(rows)))
    assert "One token: 8.2 ms (rounds 8.0–14.0; round 3 far outside the others, kept)" in text
    fig = memory_bound_figure(_lesson1(rows), {})
    cold = [tr for tr in fig.data if tr.name and tr.name.startswith("a round far outside")]
    assert cold and list(cold[0].y) == [14.0 / 8.2]
    assert memory_bound_table(_lesson1(rows))[0]["rounds (ms)"] == "8.0–14.0, round 3 far from the others"
    warm = [_row(1, 8.2, [8.0, 8.2, 8.4, 8.1, 8.3]), _row(4, 9.0), _row(16, 15.0, [14.6, 15.0, 15.2, 14.9, 15.1])]
    text = "\n".join(memory_bound_conclusion(_lesson1(warm)))
    assert "far outside" not in text and "more than 1.25× (95% range" in text  # 16 tokens: 1.83× every round


def test_lesson_1_places_the_ridge_with_its_own_kv_counts():
    """The ridge read from the passes' own counts (weights and the row's KV at the lesson's context): interpolated
    where the counted FLOP/byte crosses the probed ridge point; no sentence where the rows never reach it."""
    rows = [{"tokens_per_pass": n, "context": 100, "flops": 1e6 * n, "bytes": 1e6 + 1e3 * (100 + n)} for n in (1, 2, 4, 8, 16)]
    words = counted_ridge(rows, 6.0)
    assert words is not None and "100-token context" in words
    at4, at8 = (rows[i]["flops"] / rows[i]["bytes"] for i in (2, 3))
    crossing = 4 + (6.0 - at4) * 4 / (at8 - at4)
    assert f"at about {crossing:.0f} tokens" in words and "9.2% of a one-token pass's bytes" in words
    assert counted_ridge(rows, 50.0) is None  # never reached by these passes
    assert counted_ridge([{**r, "flops": None} for r in rows], 6.0) is None  # no counts, no claim


def test_a_verdict_is_round_by_round_so_a_drift_between_rounds_cancels():
    """Interleaved rounds are judged by each round's ratio: speculation steadily faster round by round wins even where
    the machine drifted so far that the two lanes' ranges overlap; rounds that disagree name no winner."""

    def lane(values):
        return {"decode_tokens_per_s_runs": measurement.spread(values)}

    drifting = {"ar": lane([120.0, 150.0, 105.0, 115.0]), "spec": lane([150.0, 186.0, 130.0, 144.0])}
    assert min(drifting["spec"]["decode_tokens_per_s_runs"]["values"]) < max(drifting["ar"]["decode_tokens_per_s_runs"]["values"])
    assert noise.verdict(drifting) == 1
    assert noise.verdict({"ar": drifting["spec"], "spec": drifting["ar"]}) == -1
    mixed = {"ar": lane([120.0, 150.0, 105.0, 115.0]), "spec": lane([150.0, 140.0, 126.0, 140.0])}
    assert noise.verdict(mixed) == 0
    assert noise.verdict({"ar": lane([100.0]), "spec": lane([200.0])}) == 0  # one round: no interval, no winner
