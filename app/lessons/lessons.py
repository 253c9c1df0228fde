"""Lessons: the thesis step by step, each checked by an experiment, for a class to run.

Page shape (docs/design.md §7): parse the link, draw the controls, then the chosen lesson (`?lesson=N`, N its file's
NN prefix) in the order a student meets it: title and lead, a prediction the student commits to, the
experiment's result (its figure first, then guess vs measured vs model), the GPU panel, the details as
expanders, three check questions, a printable worksheet and the sources. Lesson 0 is the mechanism: one
speculative step, stage by stage, beside the engine's code; the other lessons link to it. The parts are in
app/lessons/kit/page.py; each lesson's record (its run, claims, prediction and figures) in app/lessons/l<N>_*.py, found
by app/lessons/registry.py; every conclusion is computed from the measurement (app/lessons/kit/experiment.py). The
model is loaded only for a live run.
"""

from __future__ import annotations

import streamlit as st

from app.common.page_helpers import url_fallbacks
from app.common.url_keys import bound
from app.lessons.kit import class_page
from app.lessons.kit.ask import show_checks
from app.lessons.kit.page import (
    LESSONS_DIR,
    PAGE,
    draw_settings,
    experiment_block,
    pick_lesson,
    show_details,
    show_gpu_panel,
    show_lead,
    show_sources,
    show_worksheet,
    teacher_plan,
)
from app.lessons.kit.texts import load_lessons
from app.lessons.registry import EXPERIMENTS

st.title("🎓 Lessons")
st.markdown(
    "Why is speculative decoding fast, and when is it not? Lesson 0 shows one speculative step; each lesson after it "
    "checks one idea with an experiment. Commit to a number first, then see what this machine measures (live) "
    "or what was recorded (teacher mode: instant, labelled with its machine and date). After J. Barrow, "
    "[“Why is speculative decoding fast?”](https://jbarrow.ai/2026-10-08-why-is-speculative-decoding-fast), 2026. "
    "Teachers: the class plan opens at the top once **Teacher mode** is on (the switch beside the lesson picker keeps "
    "the lesson you are on), and **Start a class** "
    "lets a whole class follow your page, predict, and see one shared run."
)
lessons = {lesson.number: lesson for lesson in load_lessons(LESSONS_DIR, EXPERIMENTS) if lesson.number >= 0}
if not lessons:
    st.error(f"No lesson files (NN-name.md) were found in {LESSONS_DIR}.", icon=":material/error:")
    st.stop()

# --- the link and the controls --------------------------------------------------------------------
first_run = "lesson_seen" not in st.session_state
raw = st.query_params.to_dict() if first_run else {}  # read before any bound widget is drawn
st.session_state["lesson_seen"] = True
store = class_page.open_store(raw)  # a class session (issue 29): None where the store cannot be opened
class_page.read_link(store, raw, lessons)  # `?class=CODE` (and the teacher's `&desk=TOKEN`), before the picker
me = class_page.start_or_join(store)
notice_box = st.container()
notices: list[str] = []
c1, c2 = st.columns([3, 2], vertical_alignment="bottom")
with c1:
    i = pick_lesson(lessons, raw, notices)
in_class = me is not None and me.role == "student"  # a student in a class: no plan, no teacher mode (they hold the answers)
with c2:
    teacher = not in_class and st.toggle(
        "Teacher mode",  # a short label: a longer one was cut at a 1,024 px laptop's width; the help says what it does
        **bound(PAGE, "teacher"),
        help="Show each lesson's shipped recording without waiting for a prediction (the numbers are "
        "labelled with the machine and date they were measured on), and the class plan at the top.",
    )
if not in_class:
    teacher_plan(teacher, folded=me is not None)  # folded once the teacher's desk is open: the desk comes first
lesson = lessons[i]

# --- the lesson ----------------------------------------------------------------------------------
show_lead(lesson, lessons)
if lesson.problem:
    st.error(lesson.problem, icon=":material/error:")
    st.stop()
experiment = EXPERIMENTS[lesson.experiment]
settings = draw_settings(experiment, raw, notices)
notices += url_fallbacks(raw, {"teacher": teacher}, {"teacher": "Teacher mode"})
if first_run:  # a link's notices stay while its lesson is shown
    st.session_state["lesson_notices"] = (i, notices)
shown_for, kept = st.session_state.get("lesson_notices", (-1, []))
for notice in kept if shown_for == i else []:
    notice_box.warning(notice, icon=":material/link_off:")
folded = False  # a teacher's own result while the class predicts: the answer, on a projected page
if me is not None and me.role == "teacher":
    folded = not class_page.desk(store, me, i, lesson, experiment, settings, teacher)
class_state = class_page.student_state(store, me)  # a student's class, read once for the box and the checks
guess = class_page.predict(store, me, class_state, i, experiment, settings)  # in a class: sent on the teacher's lesson only
in_checks = class_page.checks(store, me, class_state, i)  # a student's class rules for the checks (first answer counts)
on_class_lesson, result, rows = False, None, []
if me is not None and me.role == "student":  # on the teacher's lesson: the class's one result, no run of one's own
    on_class_lesson, result = class_page.student(store, me, i, lesson, experiment, class_state)  # result, worksheet: live
if folded:
    with st.expander("🔒 The lesson's result: the answer (open it deliberately; it opens by itself at Reveal)"):
        experiment_block(i, lesson.experiment, experiment, settings, guess, teacher)
elif not on_class_lesson:
    result, rows = experiment_block(i, lesson.experiment, experiment, settings, guess, teacher)
elif not st.toggle("Show the whole lesson", key=f"class_whole_lesson{i}", help="The GPU panel, the details and the sources"):
    # the light class page (issue 41): the question, the prediction, the class's one result, the checks
    show_checks(i, lesson, in_checks)
    st.stop()
show_gpu_panel(lesson.experiment, settings, lesson.sections.gpu, result)  # re-timed on the H200, measured H200, model, cited
show_details(lesson)
if experiment.more is not None:  # one more section the lesson's record asks for (lesson 7: a recorded tree step)
    title, draw = experiment.more
    with st.expander(title):
        draw()
show_checks(i, lesson, in_checks)
if result is not None and not on_class_lesson:  # in class the live part draws the class result's worksheet
    show_worksheet(i, lesson, experiment, lesson.experiment, result, rows)
show_sources(lesson)
