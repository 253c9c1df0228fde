"""Every lesson's GPU view draws: for each shipped recording the run re-timed on the H200 is drawn, or the panel says
exactly why not (a recording made before its experiment kept per-step pass shapes, and only then); every re-timed
bar either has its drafting priced (measured, or a model) or says on the bar that it is a ceiling. Lessons 6 and 7
run live (the tiny pair) keep their pass shapes, so their H200 view appears."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.common import measurement
from app.lessons import registry
from app.lessons.l1_memory_bound import pass_figure
from app.lessons.l5_adaptive import gate_lines
from app.lessons.registry import EXPERIMENTS
from app.views.h200 import (
    CEILING,
    DRAFTING,
    LABEL,
    MEASURED,
    MODEL,
    PLAIN,
    drafting_lines,
    figure,
    h200_lane,
    is_lane,
    lanes_of,
    rows,
    why_not,
)
from engine.hardware import probe

ROOT = Path(__file__).resolve().parents[2]
LESSONS = [name for name in EXPERIMENTS if name != "one_step"]  # lesson 0's recording is a step-through trace


def recorded(name: str) -> tuple[dict, str]:
    record = registry.load_record(ROOT / "assets" / "lessons" / f"{name}.json")
    return record["measurement"], measurement.recorded_label(record)


def has_shapes(m) -> bool:
    if isinstance(m, dict):
        return is_lane(m) or any(has_shapes(v) for v in m.values())
    return isinstance(m, list) and any(has_shapes(v) for v in m)


def check_bars(fig) -> int:
    """Every re-timed bar: drafting priced (its trace says how) or labelled a ceiling on the bar. Returns the count."""
    count = 0
    for trace in fig.data:
        if not str(trace.name or "").startswith(LABEL) and trace.showlegend is not False:
            continue
        if trace.customdata is None:  # this machine's bars
            continue
        for y, text, how in zip(trace.y, trace.text, trace.customdata):
            if y is None:
                continue
            count += 1
            if how == DRAFTING[CEILING]:
                assert text.startswith("≤") and "drafting not priced" in text, text
            else:
                assert how in (DRAFTING[k] for k in (PLAIN, MEASURED, MODEL)), how
    return count


@pytest.mark.parametrize("name", LESSONS)
def test_each_recordings_gpu_view_draws_or_says_exactly_why_not(name):
    m, label = recorded(name)
    if name == "memory_bound":  # lesson 1 re-times its pass sizes, not decode steps: no drafting in it
        assert pass_figure(m["rows"], label) is not None
        return
    fig = figure(m, label)
    if fig is None:
        assert not has_shapes(m)  # true: nothing in the recording carries the shapes
        assert "recorded before this experiment kept them" in why_not(m, label)
        return
    assert check_bars(fig) > 0
    for row, entry in zip(rows(m), lanes_of(m)):
        priced = h200_lane(entry["lane"], entry["drafter"])
        if priced.drafting in (MEASURED, MODEL):
            assert priced.draft_ms > 0 and row["drafting on the H200"] == DRAFTING[priced.drafting]


def test_the_old_recording_message_is_said_only_of_a_recording():
    m = {"rows": [{"batch": 1, "contender": "plain decoding", "tokens_per_s": 3.0}]}
    assert "recorded before" in why_not(m, "recorded on AMD EPYC (2 threads), bfloat16, 2026-12-04 (quiet)")
    live = why_not(m, "measured live on this machine")
    assert "recorded before" not in live and "cannot be re-timed" in live
    assert "recorded before" in why_not(m, "📼 shipped", recorded=True)  # the page's result says its source
    assert "recorded before" not in why_not(m, "recorded on X, but run live", recorded=False)
    outside = {"ar": {"passes": [[9000, 0, 2]], "decode_tokens": 2}}
    assert "outside the recorded" in why_not(outside, "recorded on X") and "recorded before" not in why_not(outside, "recorded on X")


def test_a_drafter_that_cannot_be_priced_is_drawn_as_a_ceiling_in_the_chart():
    m, label = recorded("past_the_ridge")
    if not has_shapes(m):
        pytest.skip("this recording carries no pass shapes")
    for run in m["runs"]:
        run["spec"] = run["spec"] | {"drafter": "a drafter nobody timed"}
    fig = figure(m, label)
    ceiling = [t for t in fig.data if "a ceiling" in str(t.name)]
    assert ceiling and any(t and "drafting not priced" in t for t in ceiling[0].text)
    assert check_bars(fig) > 0
    assert any("not priced" in line for line in drafting_lines(m))


def test_lesson_5s_gpu_lines_follow_what_is_priced():
    m, _ = recorded("adaptive")
    if not has_shapes(m):
        pytest.skip("this recording carries no pass shapes")
    lines = gate_lines(m)
    assert len(lines) == len(m["batches"])
    b = m["batches"][0]
    fixed, gated = (h200_lane(b[k], m["drafter"]) for k in ("fixed", "gated"))
    saved_draft = fixed.draft_ms / fixed.tokens - gated.draft_ms / gated.tokens
    saved_target = fixed.target_ms / fixed.tokens - gated.target_ms / gated.tokens
    assert f"{abs(saved_draft):.2f} ms" in lines[0] and f"{abs(saved_target):.2f} ms" in lines[0]
    most = "drafting" if abs(saved_draft) >= abs(saved_target) else "the target's passes"
    assert f"what it changed most there was {most}" in lines[0]
    unpriced = json.loads(json.dumps(m))
    for batch in unpriced["batches"]:
        for key in ("fixed", "gated"):
            batch[key]["drafter"] = "a drafter nobody timed"
    assert all("not in these numbers" in line and "drafting not priced" in line for line in gate_lines(unpriced))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["by_load", "width"])
def test_lessons_6_and_7_run_live_keep_their_pass_shapes_and_draw_the_h200_view(tiny, monkeypatch, name, lesson_constant):
    for attr, value in (("LOAD_TOKENS", 4), ("LOAD_ROUNDS", 2), ("WIDTH_TOKENS", 6), ("WIDTH_ROUNDS", 2), ("WIDTH_PROMPTS", 2)):
        lesson_constant(attr, value)
    settings = {"by_load": {"k": 2}, "width": {"nodes": 8, "topk": 4, "batch": 4}}[name]
    m = registry.check_measurement(name, EXPERIMENTS[name].run(tiny, probe(tiny.device, tiny.dtype, quick=True), settings))
    assert all(is_lane(row) for row in m["rows"])
    for row in m["rows"]:
        assert sum(n for _, _, n in row["passes"]) >= 1 and row["decode_tokens"] >= 1
    fig = figure(m, "measured live on this machine")
    assert fig is not None and check_bars(fig) > 0
    entries = lanes_of(m)
    assert len(entries) == len(m["rows"]) and all(e["drafter"] == m["drafter"] for e in entries)
