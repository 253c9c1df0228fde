"""The Lessons page in a class session: the teacher's desk, a student's seat, the class's one shared result and
its figures (drawn once per result by the lesson's own record), predictions and answers sent to the store.
"""

from __future__ import annotations

import html
import json
import sqlite3
from dataclasses import dataclass, field

import streamlit as st

from app.classroom import desk as class_desk
from app.classroom import panel
from app.classroom.inputs import ClassroomError
from app.classroom.panel import Seat
from app.classroom.store import ClassroomStore, ClassState
from app.common import resources
from app.common.page_helpers import last_resort, one_line
from app.lessons import registry
from app.lessons.kit import show
from app.lessons.kit.ask import prediction
from app.lessons.kit.experiment import Experiment
from app.lessons.kit.page import (
    load_recording,
    recorded_label,
    run_live,
    worksheet_button,
    worksheet_page,
)
from app.views import classroom as views
from app.views import worksheet
from app.views.safe import one_line as flat_text
from app.views.worksheet import guess_line

# What opening the store can raise: a refused file (a newer schema), an unwritable data folder, SQLite's errors.
STORE_ERRORS = (ClassroomError, OSError, sqlite3.Error)


SHARED_KEYS = ("measurement", "settings", "label", "source")


def open_store(raw: dict) -> ClassroomStore | None:
    """The server's class store, or None after one notice (only when the link asks for a class: the rest of
    the page needs no store)."""
    try:
        return resources.classroom_store()
    except STORE_ERRORS as exc:
        if "class" in raw or panel.seat() is not None:
            st.warning(f"Class sessions are not available on this server ({one_line(exc)}).", icon=":material/groups:")
        return None


def read_link(store: ClassroomStore | None, raw: dict, lessons: dict) -> None:
    """Before the lesson picker: a class link (`?class=CODE`, the teacher's with `&desk=TOKEN`) on the first run,
    then, for a student following the teacher, the teacher's lesson (a widget's value is set before it is drawn)."""
    if store is None:
        return
    panel.read_link(store, raw)
    to = panel.take_follow()
    if to is not None and to.isascii() and to.isdigit() and len(to) <= 3 and int(to) in lessons:
        st.session_state["lesson_pick"] = int(to)


def start_or_join(store: ClassroomStore | None) -> Seat | None:
    """This session's seat; with none, a student link's Join form or the teacher's 'Start a class' button."""
    me = panel.seat()
    if store is None or me is not None:
        return me
    if st.session_state.get(panel.PENDING):
        panel.join_form(store)
        st.stop()  # a student link before Join: the form alone (issue 41); once in, the page opens the teacher's lesson
    col, code = st.columns([3, 2], vertical_alignment="top")  # the button over its caption: never cut to "Sta…"
    with col:
        panel.start_button(store)
    col.caption(
        "Teachers: start a class, and your students open its link (or QR code) to follow your page, commit their "
        "predictions, and see one shared run when you press Reveal. Students with a code: type it here."
    )
    with code:
        panel.code_form()
    return None


# --- the teacher ---------------------------------------------------------------------------------------------
def shared_json(result: dict) -> str | None:
    """A shown result as the class's JSON (what every student draws), or None after a notice."""
    try:
        return json.dumps({key: result[key] for key in SHARED_KEYS}, allow_nan=False)
    except (TypeError, ValueError) as exc:
        st.warning(f"This result cannot be shared with the class ({one_line(exc)}).")
        return None


def run_for_class(i: int, name: str, experiment: Experiment, settings: dict, teacher: bool) -> str | None:
    """The class's one run: the recording in teacher mode (and always for a walkthrough: lesson 0), else the
    experiment live on this server, under the run lock. The result is the teacher's own result too. None after saying
    why not."""
    if teacher or experiment.walkthrough is not None:
        rec, problem, _ = load_recording(name)
        if rec is None:
            st.warning(f"No usable recording for this lesson: {problem}")
            return None
        if rec["settings"] != settings:
            st.warning("The shipped recording used the default settings: turn teacher mode off to reveal a live run with these.")
            return None
        return shared_json(
            {"measurement": rec["measurement"], "settings": rec["settings"], "source": "recorded", "label": recorded_label(rec)}
        )
    st.session_state.pop(f"lesson{i}", None)  # a failed run must not reveal an older one
    run_live(i, name, experiment, settings)
    result = st.session_state.get(f"lesson{i}")
    return None if result is None else shared_json(result)


def questions(lesson) -> list[tuple[str, list[str], int]]:
    """The lesson's check questions as the class counts them: (question, options, the right option)."""
    return [(c.question, list(c.options), c.answer) for c in lesson.checks]


def desk(store: ClassroomStore, me: Seat, i: int, lesson, experiment: Experiment, settings: dict, teacher: bool) -> bool:
    """The teacher's control desk for lesson `i` (desk.teacher_desk); whether the class's result is out (until then
    the page folds the teacher's own result: it is the answer, and the desk is projected)."""
    if experiment.walkthrough is not None:
        st.caption(experiment.walkthrough.class_note)
    return class_desk.teacher_desk(
        store,
        me,
        st.context.url or "",
        str(i),
        unit=experiment.predict.unit.strip(),
        questions=questions(lesson),
        run_result=lambda: run_for_class(i, lesson.experiment, experiment, settings, teacher),
        page_redraws=not (teacher or experiment.walkthrough is not None),  # a recording: the page shows it already
        result_page=result_page(i, lesson, lesson.experiment, experiment),  # each student's result, as a file at Reveal
    )


# --- the students --------------------------------------------------------------------------------------------
def shared_result(name: str, text: str) -> dict:
    """The class's result from its JSON, checked like a recording's measurement (ValueError, KeyError or TypeError
    saying why not)."""
    data = json.loads(text)
    result = {key: data[key] for key in SHARED_KEYS}
    result["measurement"] = registry.check_measurement(name, result["measurement"])
    if not isinstance(result["settings"], dict) or result["source"] not in ("live", "recorded"):
        raise ValueError("its settings or source are not what a lesson result holds")
    result["label"] = word_cut(result["label"], 200)
    return result


def word_cut(text: object, max_chars: int) -> str:
    """`text` as one line of at most `max_chars` characters: whole, or cut after its last whole word, with "…"."""
    flat = " ".join(str(text).split())
    if len(flat) <= max_chars:
        return flat
    head = flat[: max_chars - 1]
    if flat[max_chars - 1] != " " and " " in head:
        head = head.rsplit(" ", 1)[0]
    return head.rstrip(" ,;:") + "…"


def parse_shared(name: str, text: str) -> dict | None:
    """shared_result, or None after a notice."""
    try:
        return shared_result(name, text)
    except (ValueError, KeyError, TypeError) as exc:  # json's and measurement's errors are ValueErrors
        st.warning(f"The class's result could not be read ({one_line(exc)}).")
        return None


@st.cache_data(max_entries=32, show_spinner=False)
def draw_class_result(name: str, text: str) -> None:
    """The lesson's own figures of the class's result, on a student's request: drawn once per result for the whole
    class and replayed after (Streamlit keeps the elements a cached function drew and sends them again on a hit: ~1 ms
    a tick against 40-160 ms to build a lesson's figure)."""
    result = read_shared(name, text)
    if result is not None:
        with last_resort("Could not draw the class's result"):
            show.draw(registry.EXPERIMENTS[name], result["measurement"], result["settings"], label=result["label"])


def prediction_rows(experiment: Experiment, guess, m: dict, s: dict) -> list[dict]:
    """Guess vs measured vs models (show_prediction's rows)."""
    p = experiment.predict
    return worksheet.prediction_rows(guess, p.measured(m, s), p.models(m, s), p.unit, p.whole)


def source_line(result: dict) -> str:
    """Where the class's numbers come from, as an HTML paragraph (a recording marked disturbed says so first)."""
    mark = "⚠️ " if "DISTURBED" in result["label"] else ""
    label = html.escape(flat_text(result["label"], 200))
    return f"<p>{mark}{'📼' if result['source'] == 'recorded' else '⏱'} These numbers were {label}.</p>"


@st.cache_data(max_entries=256, show_spinner=False)
def numbers_html(i: int, name: str, text: str, guess, _experiment: Experiment, _lesson) -> tuple[str, str]:
    """The numbers under the class's picture as HTML (a student's browser draws no data grid and parses no Markdown:
    issue 41): where they come from, guess vs measured vs models, how far the guess was, the run's key numbers, every
    value escaped; and the worksheet's HTML page for the download button. Built once per (result, guess)."""
    result = read_shared(name, text)
    m, s = result["measurement"], result["settings"]
    rows = prediction_rows(_experiment, guess, m, s)
    line = guess_line(guess, _experiment.predict.measured(m, s), _experiment.predict.unit, _experiment.predict.whole)
    numbers = [{"measured": what, "value": value} for what, value in _experiment.numbers(m, s)]
    blocks = [source_line(result), "<p><strong>Your guess, the measurement and the models</strong></p>", views.table_html(rows)]
    blocks += [f"<p>{html.escape(flat_text(line, 400))}</p>"] if line else []
    body = "".join([*blocks, "<p><strong>The run's numbers</strong></p>", views.table_html(numbers)])
    return body, worksheet_page(_lesson, _experiment, name, result, rows)


def result_page(i: int, lesson, name: str, experiment: Experiment):
    """panel.ResultPage for lesson `i`: (the class's result JSON, its predictions, the student's own) -> the HTML of
    the class's picture (panel.predictions_html: the predictions, the student's guess, the result) and the numbers
    (numbers_html), or None when the result cannot be read. The same function builds each student's file at a Reveal
    (on the teacher's run) and the student's page at every tick, from caches, so the two are the same text."""
    unit = experiment.predict.unit.strip()

    def page(text: str, values: tuple, mine) -> str | None:
        result = read_shared(name, text)
        if result is None:
            return None
        with last_resort("Could not draw the class's result"):
            measured = experiment.predict.measured(result["measurement"], result["settings"])
            numbers, _ = numbers_html(i, name, text, mine, experiment, lesson)
            return panel.predictions_html(values, unit, mine, measured) + numbers
        return None  # the failure is on the page (and in the log)

    return page


def draw_shared(i: int, lesson, name: str, experiment: Experiment):
    """`draw_result` for panel.student_view: what a student's live fragment draws under the class's result (the watch
    shows the result itself: result_page), light for the browser (issue 41): the lesson's own figures on request
    (lesson 0: its recorded step), the worksheet."""

    def draw(text: str, mine) -> None:
        result = read_shared(name, text)
        if result is None:
            parse_shared(name, text)  # its notice
            return
        with last_resort("Could not draw the class's result"):
            _, page = numbers_html(i, name, text, mine, experiment, lesson)
            if experiment.walkthrough is not None:
                st.caption(experiment.walkthrough.class_note)
                _, _, trace = load_recording(name)
                if trace is not None:
                    experiment.walkthrough.draw(result | {"trace": trace}, trace, False)
            elif st.toggle("Show the lesson's figures", key="class_figures"):
                draw_class_result(name, text)
            worksheet_button(i, page)

    return draw


def student(store: ClassroomStore, me: Seat, i: int, lesson, experiment: Experiment, state: ClassState | None) -> tuple[bool, dict | None]:
    """A student's class view for lesson `i` (panel.student_view), from the class as this run read it (`state`,
    student_state: the page reads it once). Returns (is this the teacher's lesson: there the
    page runs nothing itself, and the class's result, drawn in the live part, brings its own worksheet; that result
    as this run read it, for the whole lesson's GPU panel, or None)."""
    on_lesson, text = panel.student_view(
        store,
        me,
        str(i),
        result_page=result_page(i, lesson, lesson.experiment, experiment),
        draw_result=draw_shared(i, lesson, lesson.experiment, experiment),
        questions=questions(lesson),
        state=state,
    )
    return on_lesson, (read_shared(lesson.experiment, text) if text is not None else None)


@st.cache_data(max_entries=32, show_spinner=False)
def read_shared(name: str, text: str) -> dict | None:
    """shared_result once per result, or None (the live part has already said why it could not be read)."""
    try:
        return shared_result(name, text)
    except (ValueError, KeyError, TypeError):
        return None


def student_state(store: ClassroomStore | None, me: Seat | None) -> ClassState | None:
    """A student's class as this run finds it (one read, shared by `predict` and `checks`), else None."""
    return panel.student_state(store, me) if store is not None else None


def predict(store: ClassroomStore | None, me: Seat | None, state: ClassState | None, i: int, experiment: Experiment, settings: dict):
    """The prediction box (ask.prediction) and, for a student in a class (`state`, from student_state), where that
    prediction stands: the box shows what the class counts (after a reload or a lesson left and come back to), and
    only on the teacher's lesson is it sent (panel.commit_prediction). Returns the checked guess, or None."""
    key = f"l{i}_guess"
    panel.seed_prediction(state, str(i), key)
    guess = prediction(i, experiment, settings)
    if store is not None:
        panel.commit_prediction(store, me, state, str(i), guess, typed=st.session_state.get(key) is not None)
    return guess


@dataclass
class ClassChecks:
    """A class's hold on lesson `lesson`'s check questions, for ask.show_checks: `mine` the student's first answers
    (the ones counted: a radio answered is locked), `revealed` whether the teacher has revealed the answers (no right
    or wrong shown before), `on_lesson` whether the class is on this lesson (answers are sent only there); `send`
    sends a first answer and says whether it was taken; `note` one line under the heading."""

    mine: dict[int, int]
    revealed: bool
    on_lesson: bool
    send: object = field(repr=False)
    note: str = ""


def checks(store: ClassroomStore | None, me: Seat | None, state: ClassState | None, i: int) -> ClassChecks | None:
    """What show_checks needs in a class (None outside one, or for the teacher: the checks as on the public page)."""
    if state is None:
        return None
    try:
        mine, revealed = store.my_answers(me.code, me.secret, str(i))
    except ClassroomError:
        return None  # the class bar says why
    on_lesson = state.lesson == str(i)
    if revealed:
        note = "The teacher has revealed the answers: each question shows the right one."
    elif on_lesson:
        note = "Your first answer to each question is the one the class counts; the teacher reveals the right ones."
    else:
        note = "Off the teacher's lesson nothing is sent; the right answers show once the teacher reveals them in class."

    def send(question: int, option: int) -> bool:
        return on_lesson and not revealed and panel.commit_answer(store, me, str(i), question, option)

    return ClassChecks(mine, revealed, on_lesson, send, note)
