"""The Lessons page's conclusions (app/lessons/conclusions.py) on plain data: every claim follows the numbers,
both ways, and the removed claims stay removed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from app.lessons import conclusions, measurement


def _row(n, ms, peak_bw=10e9, bw_share=0.2, fl_share=0.02, peak_fl=100e9):
    """A pass_costs row with chosen shares of the peaks (the counts follow from them and the time)."""
    s = ms / 1000
    return {
        "batch": 1,
        "new_tokens": n,
        "tokens_per_pass": n,
        "ms": ms,
        "ms_per_token": ms / n,
        "bytes": bw_share * peak_bw * s,
        "flops": fl_share * peak_fl * s,
        "achieved_bandwidth": bw_share * peak_bw,
        "achieved_flops": fl_share * peak_fl,
    }


def _lesson1(rows, ridge=20.0):
    return {"rows": rows, "peak_bandwidth": 10e9, "peak_flops": 100e9, "ridge_point": 10.0, "dtype": "float32", "ridge_tokens": ridge}


def test_lesson1_names_the_regime_from_the_numbers():
    # a flat curve that streams a fifth of the peak bandwidth: overhead/latency-bound, extra tokens nearly free
    flat = _lesson1([_row(1, 32.0), _row(2, 33.0), _row(16, 40.0, bw_share=0.2, fl_share=0.3)])
    lines = conclusions.memory_bound_conclusion(flat)
    text = "\n".join(lines)
    assert "Sixteen tokens in one pass: 40.0 ms" in text and "79% of the 16-token pass, so most of a pass's time did not" in text
    assert "20% of peak bandwidth and 2% of peak FLOP/s, so it was **overhead/latency-bound**" in text
    assert "the 16-token pass reached 20% and 30%: **overhead/latency-bound**" in text
    assert "is below it" in text and "Up to 16 tokens a pass cost at most 1.25×" in text
    # a pass near peak bandwidth that grows with every token: memory-bound, then compute-bound past the ridge
    steep = _lesson1([_row(1, 32.0, bw_share=0.8), _row(16, 400.0, bw_share=0.1, fl_share=0.7)], ridge=8.0)
    text = "\n".join(conclusions.memory_bound_conclusion(steep))
    assert "so it was **memory-bound**" in text and "**compute-bound**" in text
    assert "only 2% of the 16-token pass, so most of its time went on the tokens it carried" in text
    assert "is at or above it" in text and "Already the 16-token pass cost more than 1.25× the one-token pass" in text
    assert "used compute that was idle" not in text + "\n".join(lines)


def test_lesson1_counter_example_a_pass_whose_time_grows_with_its_tokens():
    # 10 ms at 1 token and 80 ms at 16: each extra token adds 4.7 ms, under half the first token's 10 ms, yet only
    # 5.3 ms of the 80 do not depend on the tokens: the old test (extra < half a one-token pass) called it "most"
    text = "\n".join(conclusions.memory_bound_conclusion(_lesson1([_row(1, 10.0), _row(16, 80.0)])))
    assert "most of a pass's time did not depend on how many tokens it carried" not in text
    assert "about 5.3 ms of a pass did not depend on its tokens: only 7% of the 16-token pass" in text
    # the other way: 10 ms and 14 ms: 9.7 ms of the 14 do not depend on the tokens
    text = "\n".join(conclusions.memory_bound_conclusion(_lesson1([_row(1, 10.0), _row(16, 14.0)])))
    assert "about 9.7 ms of a pass did not depend on its tokens: 70% of the 16-token pass" in text
    assert "so most of a pass's time did not depend on how many tokens it carried" in text


def test_lesson1_largest_pass_whose_time_doubles_with_its_flops_is_not_left_overhead_bound():
    # from 32 to 64 tokens the time doubled with the FLOPs while the 50%-of-peak rule still says overhead-bound
    rows = [_row(1, 30.0), _row(16, 35.0), _row(32, 50.0, fl_share=0.2), _row(64, 100.0, fl_share=0.2)]
    text = "\n".join(conclusions.memory_bound_conclusion(_lesson1(rows)))
    assert "**overhead/latency-bound** by that rule" in text
    assert "From 32 to 64 tokens its time grew 2.00× for 2.00× the FLOPs: in step with the arithmetic, so the arithmetic" in text
    flat = [_row(1, 30.0), _row(16, 35.0), _row(32, 50.0, fl_share=0.2), _row(64, 55.0, fl_share=0.2 * 100 / 55)]
    text = "\n".join(conclusions.memory_bound_conclusion(_lesson1(flat)))
    assert "grew 1.10× for 2.00× the FLOPs: far less than the arithmetic grew, so a fixed cost" in text
    assert "in step with the arithmetic" not in text


def _steps(draft_ms, step_ms, n=3):
    return [SimpleNamespace(kind="prefill", draft_ms=0.0, step_ms=50.0)] + [
        SimpleNamespace(kind="decode", draft_ms=draft_ms, step_ms=step_ms) for _ in range(n)
    ]


def _run(speedup, alpha, verify, step, kept, draft_ms, step_ms, steps=(24, 12), batch=1, spread=0.02, tpot=(50.0, 40.0)):
    """One plain-vs-speculative pair as the experiment records it: compare numbers and both lanes (the draft share
    computed by app/lessons/measurement.py from steps, as a live run's is; mean step and verify ms, a plain step being
    100 ms; three interleaved runs each, spread ±`spread` around the median)."""
    m = {
        "speedup": speedup,
        "alpha": alpha,
        "median_verify_ratio": 0.5,  # a median of other steps: the conclusions must not mix it with mean step costs
        "step_cost_ratio": 0.1,
        "kept_per_step": kept,
        "tokens_per_step": kept,
        "ar_decode_steps": steps[0],
        "spec_decode_steps": steps[1],
    }

    def runs(rate):
        return measurement.spread([rate * (1 - spread), rate, rate * (1 + spread)])

    ar = {"step_ms": 100.0, "tpot_ms": tpot[0], "tokens_per_s_runs": runs(10.0)}
    spec = {
        "draft_share": measurement.draft_share(SimpleNamespace(steps=_steps(draft_ms, step_ms))),
        "verify_ms": 100.0 * verify,
        "step_ms": 100.0 * step,
        "tpot_ms": tpot[1],
        "tokens_per_s_runs": runs(10.0 * speedup),
    }
    return {"batch": batch, "m": m, "ar": ar, "spec": spec}


def test_lesson3_compares_the_run_with_the_ridge_and_explains_the_ngram_run():
    result = {
        "drafter": "eagle",
        "ridge_tokens": 22.0,
        "runs": [_run(1.5, 0.6, 1.1, 1.4, 2.2, 10.0, 40.0), _run(0.8, 0.55, 1.9, 2.5, 2.0, 30.0, 300.0, steps=(24, 14), batch=16)],
        "ngram": _run(2.1, 0.96, 1.8, 1.9, 4.0, 1.0, 200.0),
        "curve": {
            "tokens": [1, 16, 32, 64, 128],
            "ms": [40.0, 42.0, 60.0, 100.0, 180.0],
            "knee_tokens": 32.0,
            "key": "x",
            "measured_at": "2026-12-01T10:00",
        },
    }
    lines = conclusions.past_the_ridge_conclusion(result, 4)
    text = "\n".join(lines)
    assert "ridge is ≈ 22 tokens per pass: batch 1's verify pass (5 tokens) is below it, batch 16's (80 tokens) at or above it" in text
    assert (
        "from 32 tokens a pass costs 1.5× a one-token pass or more (its knee). Batch 16's verify pass carries 80 tokens, 2.5× the knee"
        in text
    )
    assert "the curve prices it at 2.86× a plain pass of the same batch (16 tokens)" in text  # 120 ms / 42 ms
    assert (
        "cost 1.10× a plain step of the same batch at batch 1 (within 1.25×: nearly free) and 1.90× at batch 16 (above 1.25×: not free)"
    ) in text
    assert "a whole step cost 1.40× and 2.50×" in text
    assert "With the EAGLE head, the speedup went from 1.50× at batch 1 to 0.80× at batch 16" in text
    assert "at batch 16 it took 14 decode steps against 24 (1.71× fewer), and a speculative step cost 2.50" in text
    assert "which is why speculation slowed decoding down" in text
    assert "At batch 16, speculation against plain decoding: slower in every run" in text
    assert "the lookup kept 4.00 tokens per sequence per step for a step of 1.90 plain steps (drafting 0% of it, α 0.96)" in text
    assert "the EAGLE head kept 2.00 for 2.50 (drafting 10%, α 0.55)" in text
    assert "Its speedup in every round was above the EAGLE head's in every round." in text
    assert "40.0 ms per output token speculating against 50.0 ms plain" in text
    assert "runs a batch until its slowest row ends" in text and "continuous batching" in text
    assert "because 80 tokens per pass is past the ridge point" not in text
    # the other way: the EAGLE run still wins at batch 16 and its verify stays nearly free; runs overlap
    result["runs"][1] = _run(1.2, 0.7, 1.2, 1.5, 2.4, 30.0, 300.0, batch=16, spread=0.3)
    result["ngram"] = _run(1.1, 0.5, 1.8, 1.9, 1.5, 1.0, 200.0)
    text = "\n".join(conclusions.past_the_ridge_conclusion(result, 4))
    assert "1.20× at batch 16 (within 1.25×: nearly free)" in text
    assert "which is why speculation paid" in text
    assert "At batch 16, speculation against plain decoding: no clear winner, the runs overlap" in text
    assert "Its speedup in every round was below the EAGLE head's in every round." in text  # 1.1× each round against 1.2×
    line = conclusions.ridge_run_line("EAGLE head", 16, result["runs"][1], 4)
    assert line.startswith("- EAGLE head, batch 16: 80 tokens per pass") and "10% of it drafting" in line
    assert "12 decode steps against 24 plain; speedup 1.20×" in line


def test_a_step_never_reads_cheaper_than_its_own_verify_pass():
    # the live lesson 3: median verify 1.30× against a mean whole step 0.90×; both now come from the means
    run = _run(1.6, 0.7, 1.3, 1.45, 2.5, 20.0, 200.0, batch=16)
    run["m"] |= {"median_verify_ratio": 1.30, "step_cost_ratio": 0.90}
    verify, step = conclusions.step_costs(run)
    assert (verify, step) == (1.3, 1.45) and step >= verify
    line = conclusions.ridge_run_line("EAGLE head", 16, run, 4)
    assert "a verify pass cost 1.30× a plain step of the same batch, a whole step 1.45×" in line and "0.90" not in line
    # an older recording without the means: its median verify stays, the mixed-statistics step is left out
    old = {"m": run["m"], "ar": {}, "spec": {"draft_share": 0.1}}
    assert conclusions.step_costs(old) == (1.30, None)
    assert "a whole step —×" in conclusions.ridge_run_line("EAGLE head", 16, old, 4)


def test_lesson3_live_against_the_recording_says_why_they_differ():
    def measured(speedup, batch, knee, verify):
        return {
            "runs": [_run(1.5, 0.6, 1.1, 1.4, 2.2, 10.0, 40.0), _run(speedup, 0.6, verify, verify + 0.2, 2.2, 10.0, 40.0, batch=batch)],
            "curve": {"knee_tokens": knee},
        }

    live, rec = measured(1.60, 16, 96.0, 1.3), measured(0.95, 16, 20.0, 2.4)
    text = conclusions.live_against_recording(live, rec, 4, "AMD EPYC", "Intel Xeon")
    assert text.startswith(
        "Live on AMD EPYC speculation ran 1.60× plain decoding at batch 16; the recording from Intel Xeon measured 0.95×"
    )
    assert "A verify pass cost 1.30× a plain step here against 2.40× there" in text
    assert "knee is at 96 tokens per pass, the recording machine's at 20: 80 tokens per pass is 0.8× the knee here, 4.0× there" in text
    assert conclusions.live_against_recording(live, measured(1.2, 16, 20.0, 1.1), 4, "a", "b") is None  # both paid: they agree


def test_noise_names_a_winner_only_beyond_the_spread():
    a, b = measurement.spread([10.0, 11.0, 12.0]), measurement.spread([12.5, 13.0, 14.0])
    assert conclusions.clear_winner(b, a) == 1 and conclusions.clear_winner(a, b) == -1
    assert conclusions.clear_winner(a, measurement.spread([11.5, 12.5, 13.0])) == 0  # overlapping runs
    assert conclusions.clear_winner(measurement.spread([10.0]), measurement.spread([20.0])) == 0  # one run: no spread
    assert conclusions.clear_winner(None, b) == 0
    assert a == {"values": [10.0, 11.0, 12.0], "median": 11.0, "min": 10.0, "max": 12.0}


def _summary(drafted, accepted, tps, alpha):
    return {"drafted_tokens": drafted, "accepted_tokens": accepted, "tokens_per_s": tps, "alpha": alpha}


def test_lesson5_reports_what_a_run_can_measure():
    def trace(summary, steps=()):
        """A lane as app/lessons/measurement.py reduces a trace: its summary and its verified draft slots."""
        return {"summary": summary, "verified_slots": list(measurement.verified_slots(SimpleNamespace(steps=list(steps))))}

    gated_steps = [  # batch 8 at width 6: 48 slots, 20 real drafts; then batch 8 at width 2: 16 slots, 10 real drafts
        SimpleNamespace(
            kind="decode",
            depth=6,
            batch=8,
            tokens_per_pass=56,
            seqs=[SimpleNamespace(drafted=[0] * 5)] * 4 + [SimpleNamespace(drafted=[])] * 4,
        ),
        SimpleNamespace(
            kind="decode",
            depth=2,
            batch=8,
            tokens_per_pass=24,
            seqs=[SimpleNamespace(drafted=[0] * 2)] * 5 + [SimpleNamespace(drafted=[])] * 3,
        ),
    ]
    result = {
        "drafter": "eagle",
        "batches": [
            {"batch": 1, "fixed": trace(_summary(300, 150, 20.0, 0.5)), "gated": trace(_summary(150, 100, 24.0, 0.66))},
            {"batch": 8, "fixed": trace(_summary(800, 300, 60.0, 0.4)), "gated": trace(_summary(400, 150, 57.0, 0.38), gated_steps)},
        ],
    }
    assert conclusions.verified_slots(result["batches"][1]["gated"]) == (64, 30)
    text = conclusions.adaptive_conclusion(result, 6)
    assert "at batch 1 it drafted 50% fewer tokens and decoded 1.20× as fast as drafting all 6" in text
    assert "accepted at α 0.660, higher than the 0.500" in text and "accepted at α 0.380, lower than the 0.400" in text
    assert "decoded 0.95× as fast" in text
    assert conclusions.alpha_words(0.6004, 0.5996) == "the same as"  # equal at the digits shown: never "0.600, higher than 0.600"
    assert "still carried 34 padded positions of 64 draft slots (53%)" in text
    assert "never verified" in text
    assert "mostly ones the target would have rejected" not in text


@pytest.mark.parametrize("kind, label", [("eagle", "EAGLE head"), ("model", "draft model"), ("ngram", "n-gram lookup")])
def test_drafter_labels(kind, label):
    assert conclusions.drafter_label(kind) == label


# --- lesson 7: width ----------------------------------------------------------------------------------
def _width(b1_tree, b1_chain, big_tree, big_chain, big=16, nodes=24, spread=0.02, ridge=None):
    rows = []

    def runs(rate):
        return measurement.spread([rate * (1 - spread), rate, rate * (1 + spread)])

    for batch, tree, chain in ((1, b1_tree, b1_chain), (big, big_tree, big_chain)):
        rows += [
            {"batch": batch, "contender": "plain decoding", "tokens_per_s": 30.0 * batch, "tokens_per_step": None}
            | {"tokens_per_pass": batch, "verify_ms": 28.0, "flops": 1e9 * batch, "tokens_per_s_runs": runs(30.0 * batch)},
            {"batch": batch, "contender": "chain", "tokens_per_s": chain, "tokens_per_step": 2.5, "tokens_per_pass": batch * 5}
            | {"verify_ms": 30.0, "flops": 1.7e9 * batch, "tokens_per_s_runs": runs(chain)},
            {"batch": batch, "contender": "tree", "tokens_per_s": tree, "tokens_per_step": 3.4, "tokens_per_pass": batch * (nodes + 1)}
            | {"verify_ms": 35.0 if batch == 1 else 90.0, "flops": 5e9 * batch, "tokens_per_s_runs": runs(tree)},
        ]
    return {"drafter": "eagle", "depth": 4, "nodes": nodes, "topk": 6, "rows": rows, "ridge_tokens": ridge}


def test_width_conclusion_follows_the_numbers_both_ways():
    paid_then_cost = conclusions.width_conclusion(_width(70.0, 60.0, 200.0, 340.0, ridge=38.0))
    assert paid_then_cost[0].startswith("Batch 1: the tree (24 nodes, top-6, depth 4) decoded 70.0 tokens/s, 1.17×")
    assert "(faster: every run above every run of the chain)" in paid_then_cost[0]
    assert "(slower: every run below every run of the chain)" in paid_then_cost[1]
    assert (
        "its verify pass of 25 tokens took 35.0 ms against 30.0 ms for the chain's 5 (1.17×): the extra tokens outweighed"
        in paid_then_cost[0]
    )
    assert "(3.00×): the longer pass outweighed the extra tokens" in paid_then_cost[1]
    last = paid_then_cost[2]
    assert last.startswith("The tree was faster than the chain at batch 1 and slower than it at batch 16")
    # plain batch 16 is 16 tokens per pass, below the ridge: what overflowed was the tree's own 400
    assert "had already filled it" not in last and "the batch" + " had" not in last
    assert (
        "a plain pass carried 16 tokens, the chain's verify pass 80 and the tree's 400: what grew the pass was the tree's own width" in last
    )
    assert "the plain pass is below it and the tree's at or above it" in last
    assert "90% of the tree's nodes were rejected at batch 16" in last  # 1 - (3.4 - 1) / 24
    both = conclusions.width_conclusion(_width(70.0, 60.0, 400.0, 340.0))
    assert both[2].startswith("The tree was faster than the chain at batch 1 and faster than it at batch 16")
    # the tree won only at the large batch: said as measured, no unmeasured cause asserted
    late = conclusions.width_conclusion(_width(55.0, 60.0, 400.0, 340.0))
    assert late[2].startswith("The tree was slower than the chain at batch 1 and faster than it at batch 16")
    assert "cost more here than the extra accepted tokens bought" not in "\n".join(late)
    # overlapping runs: no winner named
    noisy = conclusions.width_conclusion(_width(62.0, 60.0, 330.0, 340.0, spread=0.1))
    assert "(no clear winner: their runs overlap)" in noisy[0] and noisy[2].startswith("The tree was level with the chain at batch 1 and level with it at batch 16: their runs overlapped at both.")
    assert "outweighed" not in noisy[0]


def test_width_table_and_the_recording_fit_the_schema():
    from pathlib import Path

    table = conclusions.width_table(_width(70.0, 60.0, 200.0, 340.0))
    assert [r["FLOPs × plain"] for r in table] == [1.0, 1.7, 5.0, 1.0, 1.7, 5.0]
    assert table[2]["tokens per pass"] == 25 and table[5]["tokens per pass"] == 400
    assert table[0]["tokens emitted per pass"] == 1.0 and table[2]["tokens emitted per pass"] == 3.4
    record = measurement.load_record(Path(__file__).resolve().parents[2] / "assets" / "lessons" / "width.json")
    raced = any(r["contender"] == "goodput" for r in record["measurement"]["rows"])  # lesson 7's fourth contender
    lines = conclusions.width_conclusion(record["measurement"])
    assert len(lines) == (6 if raced else 3)  # per batch tree vs chain, the width line; then goodput per batch and overall
    assert lines[0].startswith("Batch 1: the tree") and (not raced or lines[3].startswith("Batch 1: goodput"))


def test_lesson4_verdicts_only_beyond_the_spread_and_latency():
    def lane(rates, tpot, steps=(0, 20)):
        return {
            "decode_tokens_per_s_runs": measurement.spread(rates),
            "tpot_ms": tpot,
            "speculated_steps": steps[0],
            "decode_steps": steps[1],
        }

    m = {"ar": lane([100.0, 101.0, 99.0], 50.0), "on": lane([80.0, 82.0, 79.0], 60.0), "off": lane([98.0, 100.0, 99.5], 51.0, (3, 20))}
    lines = conclusions.turn_it_off_conclusion(m, {"batch": 16, "n": 8, "tokens": 32})
    assert lines[0].startswith("Decoding alone at batch 16 over the whole run (tokens/s, median of the runs): plain 100.0")
    assert "Always-on was slower than plain decoding, the switch level with plain and faster than always-on" in lines[0]
    assert lines[1].startswith("The switch speculated on 3 of 20 decode steps, once the batch had shrunk.")
    assert "60.0 ms per output token speculating against 50.0 ms plain (longer waits" in lines[2]
    m["off"] = lane([79.0, 83.0, 81.0], 60.0)
    lines = conclusions.turn_it_off_conclusion(m, {"batch": 16, "n": 8, "tokens": 32})
    assert "the switch slower than plain and level with always-on" in lines[0]
    assert "more than 8 rows decoded at every step, so it never came back on" in lines[1]


def test_lesson5_explains_its_wasted_flops():
    lane = {
        "summary": {"drafted_tokens": 275, "accepted_tokens": 139, "tokens_per_s": 50.0, "alpha": 0.5, "flops_wasted": 91.6e9},
        "verified_slots": [465, 275],
    }
    text = conclusions.wasted_text(lane, "the gated run")
    assert text == (
        "; the gated run's 91.6 GFLOP on rejected drafts paid for 326 verified positions past the accepted prefix "
        "(190 of them padding) and 136 rejected draft tokens"
    )
    assert conclusions.wasted_text({"summary": {"flops_wasted": 0.0}, "verified_slots": [0, 0]}, "x") == ""


def _policy_rows(spread):
    def row(batch, name, rate, depth, alpha, tpot=None):
        runs = measurement.spread([rate * (1 - spread), rate, rate * (1 + spread)])
        return {
            "batch": batch,
            "contender": name,
            "tokens_per_s": rate,
            "mean_depth": depth,
            "alpha": alpha,
            "tokens_per_s_runs": runs,
            "tpot_ms": tpot,
        }

    return [
        row(1, "plain decoding", 20.0, 0.0, None),
        row(1, "fixed k = 4", 30.0, 4.0, 0.6),
        row(1, "off above batch 8", 30.6, 4.0, 0.6),
        row(16, "plain decoding", 200.0, 0.0, None, 80.0),
        row(16, "fixed k = 4", 120.0, 4.0, 0.6, 120.0),
        row(16, "off above batch 8", 198.0, 0.4, 0.6, 81.0),  # it speculated once the batch had shrunk
    ]


def test_policy_view_names_no_winner_without_a_margin_and_says_identical():
    from app.lessons import load

    lines = load.conclusion(_policy_rows(0.05))
    assert lines[0].startswith("Batch 1: **off above batch 8** and **fixed k = 4** (identical settings at this batch")
    assert "were fastest (30.6 tokens/s, 53% ahead of plain decoding" in lines[0]
    assert "2% ahead of" not in lines[0] and "was fastest" not in lines[0]
    assert lines[1].startswith("Batch 16: no clear winner: **plain decoding** had the highest median")  # 200 vs 198, overlapping
    assert "fixed k = 4 0.60× (batch 16)" in lines[2] and "against plain decoding at the same batch" in lines[2]
    assert "plain decoding 80.0 ms; fixed k = 4 120.0 ms" in lines[3] and "continuous batching" in lines[3]
    tight = load.conclusion(_policy_rows(0.001))
    assert tight[1].startswith("Batch 16: **plain decoding** was fastest (200.0 tokens/s, 1% ahead of off above batch 8, every run above")
    rows = _policy_rows(0.05)
    rows[-1] |= {"mean_depth": 0.0, "alpha": None}  # the switch never acted at batch 16: plain decoding's own work
    assert "**plain decoding** and **off above batch 8** (identical settings at this batch" in load.conclusion(rows)[1]
    table = load.load_table(_policy_rows(0.05), "plain decoding")
    assert table[0]["TPOT ms"] is None and table[3]["TPOT ms"] == 80.0 and table[1]["runs (decoding tokens/s)"] == "28.5, 30.0, 31.5"
