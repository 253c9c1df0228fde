"""The lessons' notes under their charts (each record's `notes`) on plain data: every sentence follows the numbers,
both ways, and states nothing the table beside it does not show. The verdicts are the claims table's
(tests/app/test_lesson_claims.py); lessons 1-3's notes: tests/app/test_pass_conclusions.py."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

from app.common import measurement
from app.common.drafters import label as drafter_label
from app.lessons import l4_turn_it_off, l5_adaptive, l6_by_load, l7_width
from app.lessons.kit import numbers
from app.lessons.kit.numbers import load_table
from app.lessons.l5_adaptive import verified_slots
from app.lessons.l7_width import width_table


def test_noise_names_a_winner_only_by_the_one_rule():
    a, b = measurement.spread([10.0, 11.0, 12.0]), measurement.spread([12.5, 13.0, 14.0])
    assert numbers.sign(b, a) == 1 and numbers.sign(a, b) == -1
    assert numbers.sign(a, measurement.spread([10.5, 11.0, 13.0])) == 0  # the interval reaches 1: can't tell
    assert numbers.sign(measurement.spread([10.0]), measurement.spread([20.0])) == 0  # one run: no interval
    assert numbers.sign(None, b) == 0 and numbers.word(None, b) == "not told apart from"
    assert a == {"values": [10.0, 11.0, 12.0], "median": 11.0, "min": 10.0, "max": 12.0}


def _summary(drafted, accepted, tps, alpha, kept=None):
    return {"drafted_tokens": drafted, "accepted_tokens": accepted, "tokens_per_s": tps, "alpha": alpha, "tokens_per_step": kept}


def test_lesson5_notes_what_the_gate_drafted_and_kept_and_its_padding():
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
    m = {
        "drafter": "eagle",
        "batches": [
            {"batch": 1, "fixed": trace(_summary(300, 150, 20.0, 0.5, 1.9)), "gated": trace(_summary(150, 100, 24.0, 0.66, 1.7))}
            | {"m_fixed": {"drafted_depth": 3.0}, "m_gated": {"drafted_depth": 1.5}},
            {
                "batch": 8,
                "fixed": trace(_summary(800, 300, 60.0, 0.4, 1.8)),
                "gated": trace(_summary(400, 150, 57.0, 0.38, 1.6), gated_steps),
            }
            | {"m_fixed": {"drafted_depth": 3.0}, "m_gated": {"drafted_depth": 2.4}},
        ],
    }
    assert verified_slots(m["batches"][1]["gated"]) == (64, 30)
    one, eight = l5_adaptive.notes(m, {})
    assert one == "Batch 1: the gate drafted 1.50 tokens per step against 3.00 (50% fewer) and kept 1.70 per step against 1.90."
    assert "against 3.00 (20% fewer)" in eight and "still carried 34 padded slots of 64" in eight  # padding only where rows differ
    assert "padded" not in one
    m["batches"][0]["m_gated"]["drafted_depth"] = 3.3  # drafted more: said so
    assert "(10% more)" in l5_adaptive.notes(m, {})[0]


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
    for r in rows:  # decoding alone: here the same rates as the whole run
        r |= {"decode_tokens_per_s": r["tokens_per_s"], "decode_tokens_per_s_runs": r["tokens_per_s_runs"]}
    return {"drafter": "eagle", "depth": 4, "nodes": nodes, "topk": 6, "rows": rows, "ridge_tokens": ridge}


def test_lesson7_notes_state_the_passes_of_the_table_both_ways():
    m = _width(70.0, 60.0, 200.0, 340.0)
    lines = l7_width.notes(m, {})
    assert lines == [
        "Batch 1: a tree pass emitted 3.40 tokens per row against the chain's 2.50, for a verify pass of 35.0 ms against 30.0.",
        "Batch 16: a tree pass emitted 3.40 tokens per row against the chain's 2.50, for a verify pass of 90.0 ms against 30.0.",
    ]
    next(r for r in m["rows"] if r["contender"] == "tree" and r["batch"] == 16)["verify_ms"] = 45.0
    assert "45.0 ms against 30.0" in l7_width.notes(m, {})[1]
    good = {"batch": 1, "contender": "goodput", "tokens_per_s": 65.0, "tokens_per_step": 2.8, "tokens_per_pass": 4, "flops": 2e9}
    good["shapes"] = [{"shape": "plain", "nodes": 0, "depth": 0}] + [{"shape": "tree", "nodes": n, "depth": 3} for n in (4, 6)]
    m["rows"].append(good)
    assert "Batch 1: goodput chose plain decoding at 1 and a tree at 2 (4 to 6 nodes) of 3 decode steps." in l7_width.notes(m, {})


def test_width_table_and_the_recording_fit_the_schema():
    m = _width(70.0, 60.0, 200.0, 340.0)  # an older recording: the whole run's FLOPs only, and named so
    assert [r["FLOPs × plain (whole run, prefill included)"] for r in width_table(m)] == [1.0, 1.7, 5.0, 1.0, 1.7, 5.0]
    for r in m["rows"]:  # a newer one keeps the decode steps' FLOPs too (the prompt's pass read warm): the table reads those
        r["decode_flops"] = r["flops"] * (0.5 if r["contender"] == "plain decoding" else 0.8)
    table = width_table(m)
    assert [r["decoding FLOPs × plain"] for r in table] == [1.0, 2.72, 8.0, 1.0, 2.72, 8.0]
    assert not any("FLOPs × plain (whole run, prefill included)" in r for r in table)
    assert table[2]["tokens per pass"] == 25 and table[5]["tokens per pass"] == 400
    assert table[0]["tokens kept per step"] == 1.0 and table[2]["tokens kept per step"] == 3.4


def test_lesson4_notes_when_the_switch_speculated_both_ways():
    def lane(steps):
        return {"speculated_steps": steps[0], "decode_steps": steps[1]}

    m = {"off": lane((3, 20)), "chosen": {"n": 2, "batch": 8, "depth": 3, "tokens": 32, "room": 8}}
    m["steps"] = {"off": [[8, 0, 5.0]] * 17 + [[2, 3, 4.0], [1, 3, 3.0], [1, 3, 3.0]]}
    assert l4_turn_it_off.notes(m, {}) == [
        "The switch speculated on 3 of 20 decode steps, at a live batch of 1, 2: it came back on as rows finished."
    ]
    m["off"], m["steps"] = lane((0, 20)), {"off": [[8, 0, 5.0]] * 20}
    assert l4_turn_it_off.notes(m, {}) == ["The switch speculated on 0 of 20 decode steps: more than 2 rows decoded at every step."]


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
            "decode_tokens_per_s": rate,
            "decode_tokens_per_s_runs": runs,
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


def test_lesson6_notes_read_the_tables_ratios_and_depths():
    rows = _policy_rows(0.05)
    lines = l6_by_load.notes({"rows": rows}, {})
    table = load_table(rows, "plain decoding")
    assert lines[0].startswith("Against plain decoding at batch 1, 16 (the × plain column): fixed k = 4 ")
    stated = [row["× plain"] for row in table if row["policy"] == "fixed k = 4"]
    assert lines[0].split(";")[0].endswith(", ".join(f"{x:.2f}×" for x in stated))  # the column's numbers, in order
    assert lines[1] == "Mean depth k drafted at batch 1, 16: fixed k = 4 4.00, 4.00; off above batch 8 4.00, 0.40."
    faster = copy.deepcopy(rows)
    faster[4] |= {"decode_tokens_per_s": 260.0, "decode_tokens_per_s_runs": measurement.spread([250.0, 260.0, 270.0])}
    assert l6_by_load.notes({"rows": faster}, {})[0] != lines[0]  # other rates, other words
    table = load_table(_policy_rows(0.05), "plain decoding")
    assert table[0]["TPOT ms"] is None and table[3]["TPOT ms"] == 80.0 and table[1]["runs (decoding tokens/s)"] == "28.5, 30.0, 31.5"
