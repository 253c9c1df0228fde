"""Lesson 0, one speculative step: the drawn stage pictures (app/views/step_pictures.py), the step's measurement
(app/views/stepthrough.py step_measurement) and what the page concludes from it (app/lessons/l0_one_step.py).
Pure functions on the shipped recorded step and on edited copies of it; no streamlit, no model."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from app.lessons import registry
from app.lessons.l0_one_step import measure, one_step_models, record_of, verdict
from app.lessons.registry import EXPERIMENTS
from app.views import step_pictures, stepthrough
from engine import Trace

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "assets" / "lessons" / "step-through.json"


@pytest.fixture(scope="module")
def trace():
    return Trace.from_json(RECORDED)


def test_the_chosen_step_keeps_some_drafts_and_rejects_one(trace):
    index = stepthrough.interesting_step(trace)
    q = trace.steps[index].seqs[0]
    assert 0 < q.num_accepted < len(q.drafted) and q.num_rejected  # not the 0-of-4 step the page used to show
    first_rejection = next(i for i in stepthrough.speculative_steps(trace) if trace.steps[i].seqs[0].num_rejected)
    assert index != first_rejection or trace.steps[first_rejection].seqs[0].num_accepted


def test_five_pictures_one_per_stage_drawn_from_the_step(trace):
    index = stepthrough.interesting_step(trace)
    q = trace.steps[index].seqs[0]
    k, a = len(q.drafted), q.num_accepted
    draft, verify, accept, own, roll = step_pictures.stage_pictures(trace, index)
    assert draft.count("sp-draft") == k + 1  # k dashed guesses (+ the CSS rule)
    assert f"k = {k}" in draft and "last token" in draft
    assert 'aria-label="causal mask"' in verify and verify.split("<table")[1].count("●") == (k + 1) * (k + 2) // 2  # the triangle
    assert verify.count("<tr>") == k + 2  # header + k + 1 query rows
    assert accept.count("✓ kept") == a and accept.count("✗ rejected") == 1 and accept.count("after a ✗") == k - a - 1
    assert own.count("✓ kept") == a and ("↺ correction" in own) == (q.next_kind == "correction")
    assert f"= {a + 1} tokens" in own
    assert roll.count(">hole<") == k - a and roll.count(">cached<") == a + 1 and "next step&#x27;s last" in roll


def test_a_bonus_step_draws_a_bonus_and_no_hole(trace):
    index = next(i for i in stepthrough.speculative_steps(trace) if trace.steps[i].seqs[0].next_kind == "bonus")
    q = trace.steps[index].seqs[0]
    _, _, accept, own, roll = step_pictures.stage_pictures(trace, index)
    assert accept.count("✓ kept") == len(q.drafted) and "✗" not in accept
    assert "+ bonus" in own and ">hole<" not in roll


def test_token_text_is_escaped_in_every_picture(trace):
    evil = copy.deepcopy(trace)
    index = stepthrough.interesting_step(evil)
    q = evil.steps[index].seqs[0]
    q.drafted[0].text = "<script>alert(1)</script>"
    q.next_text = "<img src=x onerror=alert(1)>"
    html = "".join(step_pictures.stage_pictures(evil, index))
    assert "<script>alert" not in html and "<img" not in html and "&lt;" in html
    assert step_pictures.token_text(" a\nb") == "␣a⏎b" and step_pictures.token_text("") == "∅"
    assert len(step_pictures.token_text("x" * 50)) == step_pictures.MAX_SHOWN


def test_a_tree_step_has_no_chain_pictures():
    tree = Trace.from_json(RECORDED.with_name("step-through-tree.json"))
    index = stepthrough.interesting_step(tree)
    assert step_pictures.stage_pictures(tree, index) == []
    with pytest.raises(ValueError, match="draft-tree"):
        step_pictures.draft_picture(tree, index)


def test_the_measurement_fits_its_schema_and_the_step(trace):
    m = measure(trace)
    registry.check_measurement("one_step", m)
    step = trace.steps[m["step"]]
    q = step.seqs[0]
    assert (m["k"], m["accepted"], m["gained"]) == (len(q.drafted), q.num_accepted, len(q.emitted))
    assert m["step_ms"] >= m["verify_ms"] + m["draft_ms"] - 1e-9  # a step never costs less than its own parts
    plain = [s.step_ms for s in trace.steps if s.kind == "decode" and s.depth == 0]
    assert m["plain_step_ms"] == sorted(plain)[len(plain) // 2] and "same_text" not in m
    predict = EXPERIMENTS["one_step"].predict
    assert predict.measured(m, {}) == float(q.num_accepted)
    ((name, expected),) = one_step_models(m, {})
    alpha = m["alpha"]
    assert expected == pytest.approx(sum(alpha**i for i in range(1, m["k"] + 1)))  # α + α² + … + α^k


def test_plain_steps_come_from_the_plain_run_when_given(trace):
    plain = copy.deepcopy(trace)
    for s in plain.steps:
        s.t_end_s = s.t_start_s + 0.010
    m = stepthrough.step_measurement(trace, stepthrough.interesting_step(trace), plain)
    assert m["plain_step_ms"] == pytest.approx(10.0) and m["same_text"] is True and "plain decoding of the same prompt" in m["plain_source"]
    plain.sequences[0]["text"] = "something else"
    assert stepthrough.step_measurement(trace, 7, plain)["same_text"] is False


BASE = {"k": 4, "accepted": 3, "gained": 4, "next_kind": "correction", "draft_ms": 7.0, "verify_ms": 31.0, "tokens_per_pass": 5}


def test_the_verdict_is_computed_both_ways():
    faster = verdict(BASE | {"step_ms": 40.0, "plain_step_ms": 28.0})
    assert "kept 3 of 4 drafts" in faster and "(a correction)" in faster and "112.0 ms" in faster and "2.80× less" in faster
    slower = verdict(BASE | {"step_ms": 40.0, "plain_step_ms": 9.0, "gained": 1, "accepted": 0})
    assert "no less" in slower and "less)" not in slower and "36.0 ms" not in slower and "9.0 ms" in slower
    unknown = verdict(BASE | {"step_ms": 40.0, "plain_step_ms": None})
    assert "cannot say whether the step saved time" in unknown
    assert "lossless" in verdict(BASE | {"step_ms": 40.0, "plain_step_ms": 28.0, "same_text": True})
    assert "different text" in verdict(BASE | {"step_ms": 40.0, "plain_step_ms": 28.0, "same_text": False})
    assert "(a bonus)" in verdict(BASE | {"step_ms": 40.0, "plain_step_ms": None, "next_kind": "bonus", "accepted": 4, "gained": 5})
    assert "one pass over 5 tokens cost 1.11× a whole plain step" in faster
    # checking five tokens never reads cheaper than making one: a verify below a plain step is "the same within noise"
    noisy = verdict(BASE | {"step_ms": 40.0, "plain_step_ms": 33.0})
    assert "read 0.94× a whole plain step: about one, since each was timed once (a pass with more tokens is not cheaper;" in noisy
    assert "cost 0.94×" not in noisy


def test_plain_beside_the_step_figure_and_rows(trace):
    m = measure(trace)
    fig = step_pictures.plain_vs_step_figure(m)
    plain_bars = [b for b in fig.data if b.y[0] == "plain decoding"]
    assert len(plain_bars) == m["gained"] and all(b.x[0] == m["plain_step_ms"] for b in plain_bars)
    spec = [b for b in fig.data if b.y[0] == "one speculative step"]
    assert sum(b.x[0] for b in spec) == pytest.approx(m["step_ms"])
    rows = step_pictures.plain_vs_step_rows(m)
    assert [r["target passes"] for r in rows] == [m["gained"], 1] and rows[1]["time (ms)"] == round(m["step_ms"], 1)
    none = step_pictures.plain_vs_step_figure(m | {"plain_step_ms": None})
    assert all(b.y[0] == "one speculative step" for b in none.data)
    assert step_pictures.plain_vs_step_rows(m | {"plain_step_ms": None})[0]["time (ms)"] is None


def test_lesson_0_recording_is_the_step_through_trace_labelled(trace):
    record = record_of(trace)
    assert record["experiment"] == "one_step" and record["settings"] == EXPERIMENTS["one_step"].defaults() == {}
    assert record["machine"] == trace.meta["probe"]["device_name"] and record["date"] == trace.meta["recorded_at"]
    assert record["dtype"] in ("float32", "bfloat16") and "noisy" in record["note"]
    assert record["measurement"] == measure(trace)
