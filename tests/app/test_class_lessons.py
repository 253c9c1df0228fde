"""A class session on the real Lessons page (AppTest, app/main.py; issue 29): the teacher starts a class, students
join by its link, follow the teacher's lesson, predict and answer; the teacher reveals one result (the recording,
in teacher mode: no model is loaded) that every student's page draws; bad links get one notice each and the
teacher's token is never echoed. The store is a fresh file per test ($SPECLAB_DATA)."""

from __future__ import annotations

import base64
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from app.lessons.registry import EXPERIMENTS

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from app.classroom.store import ClassroomStore  # noqa: E402
from app.common import resources  # noqa: E402
from app.lessons.kit.texts import load_lessons

ROOT = Path(__file__).resolve().parents[2]
LESSONS = load_lessons(ROOT / "lessons", EXPERIMENTS)
HOSTILE = "<img src=x onerror=alert(1)>[x](http://evil.example)"


def class_folder(tmp_path, monkeypatch):
    """A class session's data folder ($SPECLAB_DATA) of its own for one test, with the server-wide store cache cleared
    before and after, so the page opens this test's file (the `data` fixture here and in test_class_review.py)."""
    monkeypatch.setenv("SPECLAB_DATA", str(tmp_path))
    resources.classroom_store.clear()
    yield tmp_path
    resources.classroom_store.clear()


@pytest.fixture
def data(tmp_path, monkeypatch):
    yield from class_folder(tmp_path, monkeypatch)


def _app(**query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=300)
    for key, value in query.items():
        at.query_params[key] = value
    at.switch_page("lessons/lessons.py")
    return at.run()


def _html(at: AppTest) -> list[str]:
    """The page's HTML blocks: st.html's, and what the class watch shows (the class's result, or the frame waiting for it)."""
    shown = [h.value for h in at.get("html")]
    return shown + [p for c in at.get("bidi_component") if (p := json.loads(c.proto.json or "{}").get("page"))]


def _text(at: AppTest) -> str:
    kinds = ("markdown", "caption", "warning", "info", "success", "error", "code", "subheader")
    return "\n".join([*(str(e.value) for kind in kinds for e in getattr(at, kind)), *_html(at)])


def _picture(at: AppTest) -> str:
    """The SVG inside the class's result (an st.html block holding it as a data: image)."""
    (body,) = [h for h in _html(at) if "The class's result" in h]
    (src,) = re.findall(r'src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', body)
    return base64.b64decode(src).decode()


def _clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert "Traceback" not in _text(at)


def _button(at: AppTest, key: str):
    return next(b for b in at.button if b.key == key)


def _teacher(lesson: int) -> tuple[AppTest, str, str]:
    at = _app(teacher="true", lesson=str(lesson))
    _button(at, "class_start").click().run()
    _clean(at)
    me = at.session_state["classroom_seat"]
    assert me.role == "teacher"
    return at, me.code, me.secret


def _student(code: str, nickname: str = "") -> AppTest:
    at = _app(**{"class": code})
    assert not at.selectbox and not at.get("plotly_chart") and not at.number_input  # before Join: the form alone (issue 41)
    at.text_input(key="class_nickname").set_value(nickname)
    next(b for b in at.button if b.label == "Join").click().run()
    return at


def test_a_class_predicts_sees_one_revealed_result_and_its_answers_reach_the_teacher(data):
    teacher, code, token = _teacher(2)
    assert "0 predictions" in _text(teacher) and f"lessons?class={code}" in _text(teacher)
    students = [_student(code, name) for name in ("Ann", "Bob", "")]
    for k, at in enumerate(students):
        _clean(at)
        assert at.selectbox(key="lesson_pick").value == 2  # moved to the teacher's lesson
        assert not any(b.key == "lesson2_run" for b in at.button)  # in class: no run of their own
        at.number_input(key="l2_guess").set_value(1.1 + k / 10).run()
        assert f"Your prediction, {1.1 + k / 10:g}, is in the class's count." in _text(at)
    teacher.run()
    assert "3 predictions" in _text(teacher) and "3 students joined" in _text(teacher)
    _button(teacher, "class_reveal").click().run()
    _clean(teacher)
    assert "Revealed" in _text(teacher)
    shared = ClassroomStore(data / "classes.sqlite3").state(code, token=token).result_json
    assert '"source": "recorded"' in shared  # teacher mode reveals the recording: no model was loaded
    for k, at in enumerate(students):
        at.run()
        _clean(at)
        text = _text(at)
        assert "The class's result" in text and "<strong>3 predictions</strong> in the class" in text and "recorded on" in text
        # the light class page (issue 41): one SVG of the class's guesses, this student's and the result; the
        # numbers as HTML tables (st.html: no Markdown to parse in the browser); no plotly, no data grid, no GPU panel
        # or details until the student asks
        svg = _picture(at)
        assert svg.count("<circle") == 3 and f"your guess {1.1 + k / 10:.3g}×" in svg and "measured " in svg
        (numbers,) = [h for h in _html(at) if "The run's numbers" in h]
        cells = [
            td.text
            for table in numbers.split("<table")[1:]
            for td in ET.fromstring("<table" + table.split("</table>")[0] + "</table>").iter("td")
        ]
        assert "your guess" in cells and "measured" in cells and len(cells) >= 6
        assert not any("<svg" in m.value or "The run's numbers" in m.value for m in at.markdown)  # no Markdown for it
        assert not at.get("plotly_chart") and not at.dataframe
        assert any(b.key == "l2_worksheet" for b in at.get("download_button"))  # the shared result fills the worksheet
        assert not any("On a GPU" in str(h.value) for h in at.subheader)
    late = students[1].number_input(key="l2_guess").set_value(9.0).run()  # a guess changed after the Reveal is refused
    _clean(late)
    assert "predictions for this lesson are closed" in _text(late) and "your guess 1.2×" in _picture(late)
    assert ClassroomStore(data / "classes.sqlite3").predictions(code, 2, token=token) == pytest.approx([1.1, 1.2, 1.3])
    students[0].toggle(key="class_figures").set_value(True).run()
    _clean(students[0])
    assert any(c.key == "more_flops_fig0" for c in students[0].get("plotly_chart"))  # the lesson's own figure, one click away
    students[0].toggle(key="class_whole_lesson2").set_value(True).run()
    _clean(students[0])
    assert any("On a GPU" in str(h.value) for h in students[0].subheader)  # the whole lesson, one click away
    assert "one dot per student" in _picture(students[0])  # the class's picture stays
    for at in students[:2]:
        at.radio(key="l2_check1").set_value(1).run()
    students[2].radio(key="l2_check1").set_value(0).run()
    teacher.run()
    rows = next(d.value for d in teacher.dataframe if "students" in d.value.columns)
    assert list(rows["students"][:2]) == [1, 2]
    assert token not in "\n".join(str(e.value) for kind in ("markdown", "caption", "warning", "info") for e in getattr(teacher, kind))


def test_a_student_in_a_class_sees_neither_the_plan_nor_teacher_mode_and_the_teachers_plan_folds(data):
    """The plan's "what to expect" holds each recording's answer, and teacher mode shows it before a prediction: a
    student in a class gets neither. The teacher's plan folds once the class starts, so the desk's link and QR code
    stay in view."""
    teacher, code, _ = _teacher(1)
    plans = [e for e in teacher.expander if "class plan" in e.label]
    assert plans and not plans[0].proto.expanded  # folded with the desk open, teacher mode on
    student = _student(code, "Ann")
    _clean(student)
    assert not any("class plan" in e.label for e in student.expander)
    assert not any("Teacher mode" in t.label for t in student.toggle)
    assert "answers “A pass carrying" not in _text(student) and "What to expect" not in _text(student)
    alone = _app(lesson="1", teacher="true")  # outside a class the page is the public one: plan and switch as before
    assert any("class plan" in e.label for e in alone.expander) and any("Teacher mode" in t.label for t in alone.toggle)


def test_a_student_whose_teacher_ends_the_class_is_told_so_not_that_the_code_is_wrong(data):
    teacher, code, token = _teacher(1)
    student = _student(code, "Ann")
    _clean(student)
    ClassroomStore(data / "classes.sqlite3").end_class(code, token)
    student.run()
    _clean(student)
    said = _text(student)
    assert "This class has ended: your teacher ended it, or it ran its 12 hours." in said
    assert "a wrong code" not in said and any(b.label == "Leave the class" for b in student.button)


def test_students_follow_the_teacher_to_the_next_lesson(data):
    teacher, code, _ = _teacher(1)
    student = _student(code)
    assert student.selectbox(key="lesson_pick").value == 1
    teacher.selectbox(key="lesson_pick").set_value(4).run()
    _clean(teacher)
    student.run()
    _clean(student)
    assert student.selectbox(key="lesson_pick").value == 4


def test_lesson_0_in_a_class_shares_the_recorded_step(data):
    teacher, code, _ = _teacher(0)
    student = _student(code)
    assert student.selectbox(key="lesson_pick").value == 0
    assert "lesson 0 shares the recorded step" in _text(teacher)
    _button(teacher, "class_reveal").click().run()
    _clean(teacher)
    student.run()
    _clean(student)
    text = _text(student)
    assert "lesson 0 shares the recorded step" in text and "The class's result" in text and "Plain decoding beside the step" in text


def test_the_private_link_opens_the_desk_and_leaves_the_address_bar(data):
    _, code, token = _teacher(1)
    again = _app(**{"class": code, "desk": token})
    _clean(again)
    assert again.session_state["classroom_seat"].role == "teacher" and "desk" not in again.query_params
    assert "0 predictions" in _text(again) and not again.warning


@pytest.mark.parametrize(
    "query, notice",
    [
        ({"desk": "x" * 43}, "teacher link is not valid"),
        ({"desk": "<script>"}, "teacher link is not valid"),
        ({"class": "ZZZZZZZZZZ", "desk": "x" * 43}, "No class with that code is running"),
        ({"class": "<img src=x>"}, "not a class code"),
        ({"class": "9" * 5000}, "not a class code"),
    ],
)
def test_bad_class_links_get_one_notice_and_never_echo_the_token(data, query, notice):
    _, code, _ = _teacher(1)
    at = _app(**({"class": code} | query))
    _clean(at)
    assert notice in _text(at) and "classroom_seat" not in at.session_state
    assert "x" * 43 not in _text(at) and "desk" not in at.query_params
    assert not any("Teacher mode" in w.value for w in at.warning)  # the token is not the teacher-mode toggle


def test_an_unknown_code_and_a_hostile_nickname_get_notices(data):
    _, code, _ = _teacher(1)
    unknown = _student("ZZZZZZZZZZ" if code != "ZZZZZZZZZZ" else "YYYYYYYYYY")
    _clean(unknown)
    assert "No class with that code is running" in _text(unknown) and "classroom_seat" not in unknown.session_state
    long = _student(code, HOSTILE)
    _clean(long)
    assert "Nicknames are at most 24 characters" in _text(long)
    short = _student(code, "<b>x</b>[a](http://e.x)")  # fits: joins, and is shown to the teacher as text only
    _clean(short)
    assert short.session_state["classroom_seat"].role == "student"
    assert not re.search(r"(?<!\\)<b>", _text(short))


def test_an_unusable_data_folder_is_one_notice_and_the_lesson_still_works(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("SPECLAB_DATA", str(blocker / "sub"))
    resources.classroom_store.clear()
    try:
        at = _app(**{"class": "ABCDE12345", "lesson": "1", "teacher": "true"})
        _clean(at)
        assert "Class sessions are not available on this server" in _text(at)
        assert not any(b.key == "class_start" for b in at.button) and any(c.key == "memory_bound_fig0" for c in at.get("plotly_chart"))
        plain = _app(lesson="1")
        _clean(plain)
        assert not plain.warning  # no class asked for: no notice
    finally:
        resources.classroom_store.clear()


def test_a_students_page_run_reads_the_class_once(data, monkeypatch):
    """The prediction box, the checks and the class bar share one read of the class per page run (a class of 30
    reruns its pages at every change: each read is a few indexed SELECTs on the one server)."""
    teacher, code, _ = _teacher(1)
    student = _student(code, "Ann")
    _clean(student)
    reads, real = [], ClassroomStore.state
    monkeypatch.setattr(ClassroomStore, "state", lambda self, *a, **k: reads.append(1) or real(self, *a, **k))
    student.run()
    _clean(student)
    assert student.selectbox(key="lesson_pick").value == 1
    assert len(reads) == 1, f"{len(reads)} reads of the class in one run"
