"""The Lessons page's conclusions (app/views/conclusions.py) on plain data: every claim follows the numbers,
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
    assert "Sixteen tokens in one pass: 40.0 ms" in text and "less than half" in text
    assert "20% of peak bandwidth and 2% of peak FLOP/s, so it was **overhead/latency-bound**" in text
    assert "the 16-token pass reached 20% and 30%: **overhead/latency-bound**" in text
    assert "is below it" in text and "Up to 16 tokens a pass cost at most 1.25×" in text
    # a pass near peak bandwidth that grows with every token: memory-bound, then compute-bound past the ridge
    steep = _lesson1([_row(1, 32.0, bw_share=0.8), _row(16, 400.0, bw_share=0.1, fl_share=0.7)], ridge=8.0)
    text = "\n".join(conclusions.memory_bound_conclusion(steep))
    assert "so it was **memory-bound**" in text and "**compute-bound**" in text
    assert "at least half, so on this machine the extra tokens were not nearly free" in text
    assert "is at or above it" in text and "Already the 16-token pass cost more than 1.25× the one-token pass" in text
    assert "used compute that was idle" not in text + "\n".join(lines)


def _steps(draft_ms, step_ms, n=3):
    return [SimpleNamespace(kind="prefill", draft_ms=0.0, step_ms=50.0)] + [
        SimpleNamespace(kind="decode", draft_ms=draft_ms, step_ms=step_ms) for _ in range(n)
    ]


def _run(speedup, alpha, verify, step, kept, draft_ms, step_ms, steps=(24, 12), batch=1):
    """One plain-vs-speculative pair as the experiment records it: compare numbers and the speculative lane
    (its draft share computed by app/measurement.py from steps, as a live run's is)."""
    m = {
        "speedup": speedup,
        "alpha": alpha,
        "median_verify_ratio": verify,
        "step_cost_ratio": step,
        "kept_per_step": kept,
        "tokens_per_step": kept,
        "ar_decode_steps": steps[0],
        "spec_decode_steps": steps[1],
    }
    return {"batch": batch, "m": m, "spec": {"draft_share": measurement.draft_share(SimpleNamespace(steps=_steps(draft_ms, step_ms)))}}


def test_lesson3_compares_the_run_with_the_ridge_and_explains_the_ngram_run():
    result = {
        "drafter": "eagle",
        "ridge_tokens": 22.0,
        "runs": [_run(1.5, 0.6, 1.1, 1.4, 2.2, 10.0, 40.0), _run(0.8, 0.55, 1.9, 2.5, 2.0, 30.0, 300.0, steps=(24, 14), batch=16)],
        "ngram": _run(2.1, 0.96, 1.8, 1.9, 4.0, 1.0, 200.0),
    }
    lines = conclusions.past_the_ridge_conclusion(result, 4)
    text = "\n".join(lines)
    assert "ridge is ≈ 22 tokens per pass: batch 1's verify pass (5 tokens) is below it, batch 16's (80 tokens) at or above it" in text
    assert (
        "cost 1.10× a plain step of the same batch at batch 1 (within 1.25×: nearly free) and 1.90× at batch 16 (above 1.25×: not free)"
    ) in text
    assert "With the EAGLE head, the speedup went from 1.50× at batch 1 to 0.80× at batch 16" in text
    assert "at batch 16 it took 14 decode steps against 24 (1.71× fewer), and a speculative step cost 2.50" in text
    assert "which is why speculation slowed decoding down" in text
    assert "ran 2.10× plain decoding (better than the EAGLE head's 0.80×): its drafts took 0% of a step against 10%" in text
    assert "α 0.96 against 0.55" in text
    assert "because 80 tokens per pass is past the ridge point" not in text
    # the other way: the EAGLE run still wins at batch 16 and its verify stays nearly free
    result["runs"][1] = _run(1.2, 0.7, 1.2, 1.5, 2.4, 30.0, 300.0, batch=16)
    result["ngram"] = _run(1.1, 0.5, 1.8, 1.9, 1.5, 1.0, 200.0)
    text = "\n".join(conclusions.past_the_ridge_conclusion(result, 4))
    assert "1.20× at batch 16 (within 1.25×: nearly free)" in text
    assert "which is why speculation paid" in text
    assert "(no better than the EAGLE head's 1.20×). Its drafts took 0% of a step" in text
    line = conclusions.ridge_run_line("EAGLE head", 16, result["runs"][1], 4)
    assert line.startswith("- EAGLE head, batch 16: 80 tokens per pass") and "10% of it drafting" in line
    assert "12 decode steps against 24 plain; speedup 1.20×" in line


def _summary(drafted, accepted, tps, alpha):
    return {"drafted_tokens": drafted, "accepted_tokens": accepted, "tokens_per_s": tps, "alpha": alpha}


def test_lesson5_reports_what_a_run_can_measure():
    def trace(summary, steps=()):
        """A lane as app/measurement.py reduces a trace: its summary and its verified draft slots."""
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
    assert "at batch 1 it drafted 50% fewer tokens and ran 1.20× as fast as drafting all 6" in text
    assert "accepted at α 0.66, higher than the 0.50" in text and "accepted at α 0.38, not higher than the 0.40" in text
    assert "ran 0.95× as fast" in text
    assert "still carried 34 padded positions of 64 draft slots (53%)" in text
    assert "never verified" in text
    assert "mostly ones the target would have rejected" not in text


def test_lesson2_conclusion_decides_faster_or_not():
    m = {
        "flops_ratio": 1.3,
        "operations_factor": 1.25,
        "flops_wasted": 2e9,
        "speedup": 2.4,
        "median_verify_ratio": 1.1,
        "step_cost_ratio": 1.2,
        "kept_per_step": 3.1,
        "ar_decode_steps": 63,
        "spec_decode_steps": 21,
    }
    text = conclusions.more_flops_conclusion(m)
    assert "1.30× the FLOPs of plain decoding (Leviathan's operations factor for this run's α and k: 1.25×" in text
    assert (
        "It ran 2.40× as fast as plain decoding: here it took 21 decode steps against 63 (3.00× fewer), and a "
        "speculative step cost 1.20 plain steps"
    ) in text
    assert "which is why speculation paid" in text
    slow = conclusions.more_flops_conclusion(m | {"speedup": 0.8, "step_cost_ratio": 2.0, "spec_decode_steps": 42})
    assert "which is why speculation slowed decoding down" in slow


@pytest.mark.parametrize("kind, label", [("eagle", "EAGLE head"), ("model", "draft model"), ("ngram", "n-gram lookup")])
def test_drafter_labels(kind, label):
    assert conclusions.drafter_label(kind) == label


# --- lesson 7: width ----------------------------------------------------------------------------------
def _width(b1_tree, b1_chain, big_tree, big_chain, big=16, nodes=24):
    rows = []
    for batch, tree, chain in ((1, b1_tree, b1_chain), (big, big_tree, big_chain)):
        rows += [
            {
                "batch": batch,
                "contender": "plain decoding",
                "tokens_per_s": 30.0 * batch,
                "tokens_per_step": None,
                "tokens_per_pass": batch,
                "verify_ms": 28.0,
                "flops": 1e9 * batch,
            },
            {
                "batch": batch,
                "contender": "chain",
                "tokens_per_s": chain,
                "tokens_per_step": 2.5,
                "tokens_per_pass": batch * 5,
                "verify_ms": 30.0,
                "flops": 1.7e9 * batch,
            },
            {
                "batch": batch,
                "contender": "tree",
                "tokens_per_s": tree,
                "tokens_per_step": 3.4,
                "tokens_per_pass": batch * (nodes + 1),
                "verify_ms": 35.0,
                "flops": 5e9 * batch,
            },
        ]
    return {"drafter": "eagle", "depth": 4, "nodes": nodes, "topk": 6, "rows": rows}


def test_width_conclusion_follows_the_numbers_both_ways():
    paid_then_cost = conclusions.width_conclusion(_width(70.0, 60.0, 200.0, 340.0))
    assert paid_then_cost[0].startswith("Batch 1: the tree (24 nodes, top-6, depth 4) ran 70.0 tokens/s, 1.17×")
    assert "(faster)" in paid_then_cost[0] and "(slower)" in paid_then_cost[1]
    assert "its verify pass of 25 tokens took 35.0 ms against 30.0 ms for the chain's 5 (1.17×)" in paid_then_cost[0]
    assert paid_then_cost[2].startswith("Width paid at batch 1 and cost at batch 16")
    assert "90% of the tree's nodes were rejected at batch 16" in paid_then_cost[2]  # 1 - (3.4 - 1) / 24
    both = conclusions.width_conclusion(_width(70.0, 60.0, 400.0, 340.0))
    assert both[2].startswith("Width paid at both batch sizes")
    never = conclusions.width_conclusion(_width(55.0, 60.0, 200.0, 340.0))
    assert never[2].startswith("Width did not pay at batch 1") and "(slower)" in never[0]


def test_width_table_and_the_recording_fit_the_schema():
    from pathlib import Path

    table = conclusions.width_table(_width(70.0, 60.0, 200.0, 340.0))
    assert [r["FLOPs × plain"] for r in table] == [1.0, 1.7, 5.0, 1.0, 1.7, 5.0]
    assert table[2]["tokens per pass"] == 25 and table[5]["tokens per pass"] == 400
    assert table[0]["tokens emitted per pass"] == 1.0 and table[2]["tokens emitted per pass"] == 3.4
    record = measurement.load_record(Path(__file__).resolve().parents[2] / "assets" / "lessons" / "width.json")
    assert len(conclusions.width_conclusion(record["measurement"])) == 3
