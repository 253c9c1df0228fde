"""What the lessons' registry needs of a lesson, listed: every lessons/NN-*.md names an experiment whose record
(app/lessons/l<N>_<name>.py, an `Experiment` named `RECORD`) declares its run, settings, prediction, verdict, table,
claims, schema and drawing, and beside it stand its check questions and its shipped recording. A lesson that misses
one fails here by name, before a student meets the gap.

The places a new lesson touches (`PLACES`): its record module, lessons/NN-name.md, lessons/NN-name.checks.json and
assets/lessons/<experiment>.json. The registry (app/lessons/registry.py) finds the record by its file name, so no
other file names the lesson; `test_a_new_lesson_needs_only_its_four_files` shows it with a throwaway lesson."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.lessons import registry
from app.lessons.kit.texts import load_lessons
from app.lessons.registry import EXPERIMENTS

ROOT = Path(__file__).resolve().parents[2]
LESSONS = [lesson for lesson in load_lessons(ROOT / "lessons", EXPERIMENTS) if lesson.number >= 0]
PLACES = (
    "app/lessons/l<N>_<name>.py",
    "lessons/NN-name.md",
    "lessons/NN-name.checks.json",
    "assets/lessons/<experiment>.json",
)


def test_the_lessons_are_numbered_from_0_each_with_its_own_record():
    assert [lesson.number for lesson in LESSONS] == list(range(len(LESSONS))) and len(LESSONS) >= 9
    assert len({lesson.experiment for lesson in LESSONS}) == len(LESSONS)
    assert all(lesson.problem is None for lesson in LESSONS), [lesson.problem for lesson in LESSONS if lesson.problem]
    modules = sorted(
        (p.stem for p in (ROOT / "app" / "lessons").glob("l[0-9]*_*") if p.suffix == ".py" or p.is_dir()),
        key=lambda m: int(re.match(r"l(\d+)_", m)[1]),
    )
    assert [int(re.match(r"l(\d+)_", m)[1]) for m in modules] == [lesson.number for lesson in LESSONS]  # one module or folder each
    assert list(EXPERIMENTS) == [lesson.experiment for lesson in LESSONS]  # found in the lessons' order


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.source)
def test_each_lesson_has_everything_the_registry_needs(lesson):
    name = lesson.experiment
    e = EXPERIMENTS[name]
    assert e.name == name and e.schema, name
    assert callable(e.run) and e.predict.question and callable(e.predict.measured), name
    assert len(lesson.checks) == 3 and lesson.checks_problem is None, name  # its check questions
    if name == "one_step":  # lesson 0 steps through a recorded trace: no claims, no table, its own drawing
        assert (ROOT / "assets" / "lessons" / "step-through.json").is_file()
        return
    assert e.claims and any(c.lead for c in e.claims), f"{name}: no lead claim in its record"
    rec = registry.load_record(ROOT / "assets" / "lessons" / f"{name}.json")  # its recording, checked by its schema
    m, s = rec["measurement"], rec["settings"]
    assert [f for f in e.figures(m, s, "x") if f is not None], f"{name}: its record draws no chart of its recording"
    assert e.notes(m, s) and e.table(m, s), f"{name}: its record's notes or table are empty on its recording"
    assert e.predict.measured(m, s) is not None, f"{name}: its prediction reads nothing from its recording"
    assert e.numbers(m, s), f"{name}: its worksheet lists no numbers"


def test_no_table_outside_a_record_is_keyed_by_a_lessons_name():
    """The kit and the page never name a lesson: what differs per lesson is in its record."""
    names = "|".join(EXPERIMENTS)
    keyed = re.compile(rf"""["'](?:{names})["']""")
    shared = [ROOT / "app" / "lessons" / "lessons.py", ROOT / "app" / "lessons" / "registry.py"]
    shared += sorted((ROOT / "app" / "lessons" / "kit").glob("*.py"))
    found = [f"{p.relative_to(ROOT)}:{i}" for p in shared for i, line in enumerate(p.read_text().splitlines(), 1) if keyed.search(line)]
    assert found == [], found


@pytest.mark.slow
def test_a_new_lesson_needs_only_its_four_files(tmp_path):
    """A copy of the app with one more lesson, made of exactly PLACES (a copy of lesson 2 under a new name): the
    registry finds it, its recording loads through its own schema, and nothing else was edited."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "app", copy / "app", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "lessons", copy / "lessons")
    shutil.copytree(ROOT / "assets" / "lessons", copy / "assets" / "lessons")
    record = (ROOT / "app" / "lessons" / "l2_more_flops.py").read_text().replace('name="more_flops"', 'name="more_flops_again"')
    n = len(LESSONS)  # the next number
    (copy / "app" / "lessons" / f"l{n}_more_flops_again.py").write_text(record.replace('"l2_', f'"l{n}_'))
    text = (
        (ROOT / "lessons" / "02-more-flops.md")
        .read_text()
        .replace("experiment: more_flops", "experiment: more_flops_again")
        .replace("# 2 · ", f"# {n} · ")
    )
    (copy / "lessons" / f"{n:02d}-more-flops-again.md").write_text(text)
    shutil.copy(ROOT / "lessons" / "02-more-flops.checks.json", copy / "lessons" / f"{n:02d}-more-flops-again.checks.json")
    recording = (ROOT / "assets" / "lessons" / "more_flops.json").read_text().replace('"more_flops"', '"more_flops_again"', 1)
    (copy / "assets" / "lessons" / "more_flops_again.json").write_text(recording)
    probe = (
        "from app.lessons import registry; from app.lessons.kit.texts import load_lessons; from pathlib import Path; "
        "from app.lessons.kit.texts import plan_text; from app.common.url_keys import BOUND; "
        "e = registry.EXPERIMENTS['more_flops_again']; "
        "rec = registry.load_record(Path('assets/lessons/more_flops_again.json')); "
        "lessons = {l.number: l for l in load_lessons(Path('lessons'), registry.EXPERIMENTS)}; "
        f"new = lessons[{n}]; plan = plan_text(Path('lessons/teacher.md').read_text(), Path('assets/lessons'), list(lessons.values())); "
        f"print(len(registry.EXPERIMENTS), new.experiment, new.problem, bool(e.notes(rec['measurement'], rec['settings'])), "
        f"plan.count(new.title), 'l{n}_depth' in BOUND['lessons'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": f"{copy}{os.pathsep}{ROOT}"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    # the registry, the lesson list, its recording, its row of the teacher's plan and its knobs' URL keys: all found
    assert out.stdout.split() == [str(len(EXPERIMENTS) + 1), "more_flops_again", "None", "True", "1", "True"]
