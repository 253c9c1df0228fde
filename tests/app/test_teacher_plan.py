"""The teacher's plan states no measured number of its own: its expectations are computed from the shipped
recordings (app/lessons/kit/texts.py), so a re-recording cannot leave the plan contradicting the page."""

from __future__ import annotations

import json
import re
from pathlib import Path

from app.lessons import registry
from app.lessons.kit.experiment import claim_rows
from app.lessons.kit.page import LESSONS_DIR, RECORDINGS, TEACHER_FILE
from app.lessons.kit.texts import H200, PLACEHOLDER, SEGMENT_KEYS, expectation, expectations, load_lessons, plan_text, segments
from app.lessons.registry import EXPERIMENTS

LESSONS = [lesson for lesson in load_lessons(LESSONS_DIR, EXPERIMENTS) if lesson.number >= 0]
SHIPPED = TEACHER_FILE.read_text(encoding="utf-8")
PLAN = SHIPPED.replace("{segments}", segments(LESSONS)).replace("{expectations}", expectations(LESSONS))  # before the recordings
CITED = {"1.25×", "1.38×", "1×"}  # the room's definition, the EAGLE-3 paper's batch-64 gain, "toward 1×"


def test_the_plan_writes_no_measured_ratio_of_its_own():
    ratios = set(re.findall(r"\d+(?:\.\d+)?×", PLAN))
    assert ratios <= CITED, f"canned ratios in lessons/teacher.md: {sorted(ratios - CITED)}"
    assert not re.search(r"\d+(?:\.\d+)? ?ms\b", PLAN), "a canned time in lessons/teacher.md"


def test_every_expectation_comes_from_a_shipped_recording_with_its_machine_and_date():
    names = PLACEHOLDER.findall(PLAN)
    assert set(names) == set(EXPERIMENTS) | {H200}  # lesson 0 too: its recording is the step-through trace
    text = plan_text(SHIPPED, RECORDINGS, LESSONS)
    assert not PLACEHOLDER.search(text) and "no readable recording" not in text
    walked = EXPERIMENTS["one_step"].walkthrough.recorded()[0]
    assert f"({walked['machine']}, {walked['dtype']}, {walked['date']})" in text
    assert f"with {walked['measurement']['accepted']} draft" in text  # a count, written as one
    for name in set(names) - {H200, "one_step"}:
        record = registry.load_record(RECORDINGS / f"{name}.json")
        value = EXPERIMENTS[name].predict.measured(record["measurement"], record["settings"])
        said = expectation(name, RECORDINGS, EXPERIMENTS, lambda: "")
        assert f"({record['machine']}, {record['dtype']}, {record['date']})" in said
        assert value is None or f"{value:.2f}{EXPERIMENTS[name].predict.unit}" in said
        assert said in text or said.split(" What it shows:")[0] in text
        # what the recording shows is the lesson's own notes (lesson 3's batch 16 too), and every claim, not the lead alone
        assert all(line in said for line in EXPERIMENTS[name].notes(record["measurement"], record["settings"]))
        assert all(row["claim"] in said for row in claim_rows(EXPERIMENTS[name].claims, record["measurement"]))


def test_the_plan_follows_a_re_recording(tmp_path):
    """Change the shipped recording's measured number and the plan's sentence changes with it."""
    name = "more_flops"
    record = json.loads((RECORDINGS / f"{name}.json").read_text())
    before = expectation(name, RECORDINGS, EXPERIMENTS, lambda: "")
    costs = record["measurement"]["decode_costs"]  # the answer: FLOPs per decoded token, speculative ÷ plain
    costs["spec"]["flops"] = 7.25 * costs["ar"]["flops"] / costs["ar"]["tokens"] * costs["spec"]["tokens"]
    (tmp_path / f"{name}.json").write_text(json.dumps(record))
    after = expectation(name, tmp_path, EXPERIMENTS, lambda: "")
    assert "7.25×" in after and "7.25×" not in before


def test_a_missing_or_broken_recording_is_named_in_one_line(tmp_path):
    (tmp_path / "adaptive.json").write_text("{not json")
    broken = expectation("adaptive", tmp_path, EXPERIMENTS, lambda: "")
    missing = expectation("width", tmp_path, EXPERIMENTS, lambda: "")
    unknown = expectation("nonsense", tmp_path, EXPERIMENTS, lambda: "")
    assert broken.startswith("(no readable recording") and "\n" not in broken
    assert missing.startswith("(no readable recording") and "width.json" in missing
    assert "does not have: nonsense" in unknown
    assert Path(RECORDINGS).is_dir()


def test_a_question_reads_the_values_the_run_chose_from_its_curve():
    """A knob left at 0 ("from the curve") is asked about with the value the recording chose, never as "batch 0"."""
    record = registry.load_record(RECORDINGS / "turn_it_off.json")
    said = expectation("turn_it_off", RECORDINGS, EXPERIMENTS, lambda: "")
    chosen = record["measurement"]["chosen"]["batch"]
    assert record["settings"]["batch"] == 0 and chosen > 0
    if "{batch}" in EXPERIMENTS["turn_it_off"].predict.question:
        assert f"at batch {chosen}" in said
    assert "batch 0" not in said and "0: from the curve" not in said


def test_every_lesson_brings_its_own_segment_of_the_plan():
    """A lesson file's front matter holds its row of the plan (minutes, what to ask, the mistake to listen for) and,
    with a recording, what to look for in it: the plan lists every lesson, in order, with no edit to teacher.md."""
    assert "{segments}" in SHIPPED and "{expectations}" in SHIPPED
    for lesson in LESSONS:
        assert lesson.field("minutes").isdigit() and all(lesson.field(k) for k in SEGMENT_KEYS), lesson.source
        assert lesson.field("look_for"), lesson.source  # every lesson has a recording to look at, lesson 0's step too
    rows = [line for line in segments(LESSONS).splitlines() if line.startswith("- **")]
    assert [re.match(r"- \*\*\d+ min · (.*?)\.\*\* \*Ask:\*", row)[1] for row in rows] == [lesson.title for lesson in LESSONS]
    assert "\n|" not in PLAN, "the plan's segments are a list that wraps at any width, not a table that scrolls sideways"
    assert sum(int(lesson.field("minutes")) for lesson in LESSONS) >= 50  # the segments cover at least one class


def test_the_plan_inside_its_expander_has_no_page_sized_headings():
    """The expander's label names the plan: the shown plan drops its own title and its sections are small headings."""
    from app.lessons.kit.page import inside_expander

    shown = inside_expander(PLAN)
    assert PLAN.startswith("# ") and not re.search(r"^#{1,3} ", shown, flags=re.M)
    assert "#### The segments" in shown and shown.lstrip().startswith("**Goal.**")
