"""The Lessons page's conclusions (app/lessons/conclusions.py) on plain data: every claim follows the numbers,
both ways, and the removed claims stay removed. Lessons 1-3's: tests/app/test_pass_conclusions.py."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

from app.common import measurement
from app.common.drafters import label as drafter_label
from app.lessons import registry
from app.lessons.kit import noise
from app.lessons.kit.rows import load_table
from app.lessons.l4_turn_it_off import turn_it_off_conclusion
from app.lessons.l5_adaptive import adaptive_conclusion, alpha_words, verified_slots, wasted_text
from app.lessons.l6_by_load import conclusion
from app.lessons.l7_width import width_conclusion
from app.lessons.l7_width.charts import width_table


def test_noise_names_a_winner_only_by_the_one_rule():
    a, b = measurement.spread([10.0, 11.0, 12.0]), measurement.spread([12.5, 13.0, 14.0])
    assert noise.sign(b, a) == 1 and noise.sign(a, b) == -1
    assert noise.sign(a, measurement.spread([10.5, 11.0, 13.0])) == 0  # the interval reaches 1: can't tell
    assert noise.sign(measurement.spread([10.0]), measurement.spread([20.0])) == 0  # one run: no interval
    assert noise.sign(None, b) == 0 and noise.word(None, b) == "not told apart from"
    assert a == {"values": [10.0, 11.0, 12.0], "median": 11.0, "min": 10.0, "max": 12.0}


def _summary(drafted, accepted, tps, alpha):
    return {"drafted_tokens": drafted, "accepted_tokens": accepted, "tokens_per_s": tps, "alpha": alpha}


def test_lesson5_reports_what_a_run_can_measure():
    def trace(summary, steps=()):
        """A lane as app/common/measurement.py reduces a trace: its summary and its verified draft slots."""
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
    assert verified_slots(result["batches"][1]["gated"]) == (64, 30)
    text = adaptive_conclusion(result, 6)
    assert "at batch 1 it drafted 50% fewer tokens (decoding alone: medians 24.0 against 20.0 tokens/s): one run each" in text
    assert "accepted at α 0.660, higher than the 0.500" in text and "accepted at α 0.380, lower than the 0.400" in text
    assert "medians 57.0 against 60.0 tokens/s" in text and "faster than drafting" not in text
    assert alpha_words(0.6004, 0.5996) == "the same as"  # equal at the digits shown: never "0.600, higher than 0.600"
    assert "still carried 34 padded positions of 64 draft slots (53%)" in text
    assert "never verified" in text
    assert "mostly ones the target would have rejected" not in text


@pytest.mark.parametrize("kind", ["eagle", "model", "ngram"])
def test_drafter_labels_are_the_registrys(kind):
    from engine.drafters import DRAFTERS

    assert drafter_label(kind) == DRAFTERS[kind].display
    assert drafter_label("medusa") == "medusa" and drafter_label(None) == "drafter"


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
    paid_then_cost = width_conclusion(_width(70.0, 60.0, 200.0, 340.0, ridge=38.0))
    assert paid_then_cost[0].startswith("Batch 1: the tree (24 nodes, top-6, depth 4) decoded 70.0 tokens/s, 1.17×")
    assert "(faster than the chain: 1.17× (95% range 1.17–1.17×, 3 rounds))" in paid_then_cost[0]
    assert "(slower than the chain: 0.59× (95% range 0.59–0.59×, 3 rounds))" in paid_then_cost[1]
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
    both = width_conclusion(_width(70.0, 60.0, 400.0, 340.0))
    assert both[2].startswith("The tree was faster than the chain at batch 1 and faster than it at batch 16")
    # the tree won only at the large batch: said as measured, no unmeasured cause asserted
    late = width_conclusion(_width(55.0, 60.0, 400.0, 340.0))
    assert late[2].startswith("The tree was slower than the chain at batch 1 and faster than it at batch 16")
    assert "cost more here than the extra accepted tokens bought" not in "\n".join(late)
    # rounds that disagree: no winner named
    noisy_m = _width(62.0, 60.0, 330.0, 340.0, spread=0.1)
    for r in noisy_m["rows"]:  # the chain's rounds in the other order: no round-by-round winner either
        if r["contender"] == "chain":
            r["tokens_per_s_runs"]["values"].reverse()
    noisy = width_conclusion(noisy_m)
    assert "(not told apart from the chain with 3 rounds (can't tell): " in noisy[0] and noisy[2].startswith(
        "The tree was not named faster or slower than the chain at batch 1 and not named faster or slower than it at "
        "batch 16: the rule named no winner at either."
    )
    # level overall: whether width paid per verify pass is said from the pass's own numbers, never as a winner
    assert "(1.36×), and its verify pass of 25 tokens took 35.0 ms against 30.0 ms for the chain's 5 (1.17×)" in noisy[0]
    assert "per verify pass the extra tokens outweighed the longer pass" in noisy[0]  # 1.36x the tokens for 1.17x the pass
    heavy = copy.deepcopy(noisy_m)
    next(r for r in heavy["rows"] if r["contender"] == "tree" and r["batch"] == 1)["verify_ms"] = 45.0  # 1.50x > 1.36x
    assert "outweighed" not in width_conclusion(heavy)[0]
    assert "the extra tokens outweighed the longer pass." not in noisy[0] and "the longer pass outweighed" not in noisy[0]
    drifted = _width(63.0, 60.0, 330.0, 340.0, spread=0.1)  # overlapping runs, but the tree 5% ahead in every round
    line = width_conclusion(drifted)[0]
    assert "(faster than the chain: 1.05× (95% range 1.05–1.05×, 3 rounds))" in line
    close = width_conclusion(_width(61.0, 60.0, 330.0, 340.0, spread=0.1))[0]  # 1.7% ahead: under the 3% gap
    assert "(level with the chain: 1.02× (95% range 1.02–1.02×, 3 rounds), within 3%)" in close


def test_width_table_and_the_recording_fit_the_schema():
    from pathlib import Path

    table = width_table(_width(70.0, 60.0, 200.0, 340.0))
    assert [r["FLOPs × plain"] for r in table] == [1.0, 1.7, 5.0, 1.0, 1.7, 5.0]
    assert table[2]["tokens per pass"] == 25 and table[5]["tokens per pass"] == 400
    assert table[0]["tokens emitted per pass"] == 1.0 and table[2]["tokens emitted per pass"] == 3.4
    record = registry.load_record(Path(__file__).resolve().parents[2] / "assets" / "lessons" / "width.json")
    raced = any(r["contender"] == "goodput" for r in record["measurement"]["rows"])  # lesson 7's fourth contender
    lines = width_conclusion(record["measurement"])
    room = 1 if record["measurement"].get("chosen") else 0  # a recording that chose its shapes opens with the room
    assert len(lines) == (6 if raced else 3) + room  # per batch tree vs chain, the width line; then goodput per batch and overall
    assert lines[room].startswith("Batch 1: the tree") and (not raced or lines[3 + room].startswith("Batch 1: goodput"))


def test_lesson4_verdicts_only_beyond_the_spread_and_latency():
    def lane(rates, tpot, steps=(0, 20)):
        return {
            "decode_tokens_per_s_runs": measurement.spread(rates),
            "tpot_ms": tpot,
            "speculated_steps": steps[0],
            "decode_steps": steps[1],
        }

    m = {"ar": lane([100.0, 101.0, 99.0], 50.0), "on": lane([80.0, 82.0, 79.0], 60.0), "off": lane([98.0, 100.0, 99.5], 51.0, (3, 20))}
    lines = turn_it_off_conclusion(m, {"batch": 16, "n": 8, "tokens": 32})
    assert lines[0].startswith("Decoding alone at batch 16 over the whole run (tokens/s, median of the runs): plain 100.0")
    assert "Always-on was slower than plain: 0.80× (95% range" in lines[0]
    assert (
        "the switch not told apart from plain with 3 rounds (can't tell): 0.99× (95% range" in lines[0]
        and "and faster than always-on: 1.23× (95% range" in lines[0]
    )
    assert lines[1].startswith("The switch speculated on 3 of 20 decode steps, once the batch had shrunk.")
    assert "60.0 ms per output token (TPOT) speculating against 50.0 ms plain (longer waits" in lines[2]
    m["off"] = lane([79.0, 83.0, 81.0], 60.0)
    lines = turn_it_off_conclusion(m, {"batch": 16, "n": 8, "tokens": 32})
    assert "the switch slower than plain: 0.81×" in lines[0] and "not told apart from always-on with 3 rounds" in lines[0]
    assert "more than 8 rows decoded at every step, so it never came back on" in lines[1]


def test_lesson5_explains_its_wasted_flops():
    lane = {
        "summary": {"drafted_tokens": 275, "accepted_tokens": 139, "tokens_per_s": 50.0, "alpha": 0.5, "flops_wasted": 91.6e9},
        "verified_slots": [465, 275],
    }
    text = wasted_text(lane, "the gated run")
    assert text == (
        "; the gated run's 91.6 GFLOP on rejected drafts paid for 326 verified positions past the accepted prefix "
        "(190 of them padding) and 136 rejected draft tokens"
    )
    assert wasted_text({"summary": {"flops_wasted": 0.0}, "verified_slots": [0, 0]}, "x") == ""


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
    lines = conclusion(_policy_rows(0.05))
    assert lines[0].startswith("Batch 1: no winner named. **off above batch 8** had the highest median (30.6 tokens/s), fixed k = 4")
    assert "level with fixed k = 4: 1.02× (95% range 1.02–1.02×, 3 rounds), within 3%." in lines[0]
    assert "The two ran identical settings at this batch" in lines[0] and "was fastest" not in lines[0]
    assert lines[1].startswith("Batch 16: no winner named. **plain decoding** had the highest median (200.0 tokens/s)")
    assert "fixed k = 4 0.60× (batch 16)" in lines[2] and "against plain decoding at the same batch" in lines[2]
    assert "plain decoding 80.0 ms; fixed k = 4 120.0 ms" in lines[3] and "continuous batching" in lines[3]
    apart = _policy_rows(0.05)
    apart[1] |= {"tokens_per_s": 24.0, "tokens_per_s_runs": measurement.spread([23.0, 24.0, 25.0])}
    won = conclusion(apart)[0]
    assert won.startswith("Batch 1: **off above batch 8** was fastest (30.6 tokens/s): faster than fixed k = 4: 1.27× (95% range")
    rows = _policy_rows(0.05)
    rows[-1] |= {"mean_depth": 0.0, "alpha": None}  # the switch never acted at batch 16: plain decoding's own work
    assert "The two ran identical settings at this batch" in conclusion(rows)[1]
    table = load_table(_policy_rows(0.05), "plain decoding")
    assert table[0]["TPOT ms"] is None and table[3]["TPOT ms"] == 80.0 and table[1]["runs (decoding tokens/s)"] == "28.5, 30.0, 31.5"
