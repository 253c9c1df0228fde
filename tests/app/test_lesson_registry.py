"""What the lessons' registry needs of a lesson, listed: every lessons/NN-*.md names an experiment whose record
(app/lessons/experiments.py, an `Experiment`) declares its run, settings, prediction, verdict, table and claims, and
beside it stand its check questions, its shipped recording, its schema and its page drawing. A lesson that misses one
fails here by name, before a student meets the gap.

The places a new lesson touches today (issue 53 asks for at most four: its record, its Markdown, its checks, its
recording): its record in experiments.py (with its run's code), lessons/NN-*.md, lessons/NN-*.checks.json,
assets/lessons/<experiment>.json, the schema in app/common/measurement.py SPECS and the drawing in app/lessons/show.py
SHOW. `PLACES` below names them, so the count a change reaches is visible and tested."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.common import measurement
from app.lessons.experiments import EXPERIMENTS
from app.lessons.files import load_lessons
from app.lessons.show import SHOW

ROOT = Path(__file__).resolve().parents[2]
LESSONS = [lesson for lesson in load_lessons(ROOT / "lessons", EXPERIMENTS) if lesson.number >= 0]
PLACES = (
    "app/lessons/experiments.py",
    "lessons/NN-name.md",
    "lessons/NN-name.checks.json",
    "assets/lessons/<experiment>.json",
    "app/common/measurement.py SPECS",
    "app/lessons/show.py SHOW",
)


def test_the_lessons_are_numbered_0_to_7_each_with_its_own_experiment():
    assert [lesson.number for lesson in LESSONS] == list(range(8))
    assert len({lesson.experiment for lesson in LESSONS}) == len(LESSONS)
    assert all(lesson.problem is None for lesson in LESSONS), [lesson.problem for lesson in LESSONS if lesson.problem]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.source)
def test_each_lesson_has_everything_the_registry_needs(lesson):
    name = lesson.experiment
    e = EXPERIMENTS[name]
    assert callable(e.run) and e.predict.question and callable(e.predict.measured), name
    assert len(lesson.checks) == 3 and lesson.checks_problem is None, name  # its check questions
    assert name in measurement.SPECS, f"{name}: no schema for its measurement"
    if name == "one_step":  # lesson 0 steps through a recorded trace: no claims, no table, its own drawing
        assert (ROOT / "assets" / "lessons" / "step-through.json").is_file()
        return
    assert e.claims and any(c.lead for c in e.claims), f"{name}: no lead claim in its record"
    assert name in SHOW, f"{name}: nothing draws it on the page"
    rec = measurement.load_record(ROOT / "assets" / "lessons" / f"{name}.json")  # its recording, checked by its schema
    m, s = rec["measurement"], rec["settings"]
    assert e.verdict(m, s) and e.table(m, s), f"{name}: its record's verdict or table is empty on its recording"
    assert e.predict.measured(m, s) is not None, f"{name}: its prediction reads nothing from its recording"


def test_the_places_a_lesson_touches_are_named():
    """Six today (the goal is four: the schema and the drawing belong in the record)."""
    assert len(PLACES) == 6
    assert set(SHOW) | {"one_step"} == set(EXPERIMENTS) == set(measurement.SPECS)
