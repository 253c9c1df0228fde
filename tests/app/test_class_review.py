"""A class session on the real Lessons page, as a reviewed class met it (2026-12-07: a teacher, a second desk and
three students in Chromium): a second desk joins the class where it is, a reload keeps a student's seat, the first
answer counts and right or wrong waits for the teacher, a prediction counts only on the teacher's lesson and the
box shows what the class counts, the teacher's own result is folded until the Reveal, an ended class says so with a
way out, and a code can be typed. AppTest on app/main.py and the real store ($SPECLAB_DATA, a fresh file per test)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")

from app.classroom.store import ClassroomStore  # noqa: E402
from app.lessons.kit import class_page  # noqa: E402
from app.lessons.kit.page import load_recording, recorded_label  # noqa: E402
from tests.app.test_class_lessons import LESSONS, _app, _button, _clean, _student, _teacher, _text, class_folder  # noqa: E402


@pytest.fixture
def data(tmp_path, monkeypatch):
    yield from class_folder(tmp_path, monkeypatch)


def _store(folder) -> ClassroomStore:
    return ClassroomStore(folder / "classes.sqlite3")


def test_a_second_desk_joins_the_class_where_it_is_and_every_desk_follows_the_class(data):
    teacher, code, token = _teacher(2)
    _button(teacher, "class_reveal").click().run()
    second = _app(**{"class": code, "desk": token})  # the private link carries no lesson: it opens the class's
    _clean(second)
    assert second.selectbox(key="lesson_pick").value == 2 and _store(data).state(code, token=token).lesson == "2"
    assert _button(second, "class_reveal").label.startswith("Reveal again")  # it reads the class: lesson 2 is revealed
    second.selectbox(key="lesson_pick").set_value(3).run()  # a lesson picked on a desk moves the class
    _clean(second)
    assert _store(data).state(code, token=token).lesson == "3"
    teacher.run()  # the first desk follows the class, and its buttons are lesson 3's
    _clean(teacher)
    assert teacher.selectbox(key="lesson_pick").value == 3 and _button(teacher, "class_reveal").label == "Reveal"
    assert _store(data).state(code, token=token).lesson == "3"
    third = _app(**{"class": code, "desk": token, "lesson": "4"})  # a desk link that names a lesson: the teacher's choice
    _clean(third)
    assert third.selectbox(key="lesson_pick").value == 4 and _store(data).state(code, token=token).lesson == "4"


def test_a_reload_keeps_the_seat_and_one_nickname_is_one_student(data):
    teacher, code, token = _teacher(2)
    bob = _student(code, "Bob")
    seat = bob.query_params["seat"]
    bob.number_input(key="l2_guess").set_value(1.5).run()
    reloaded = _app(**{"class": code, "seat": seat})  # a reload: a new session with the page's own link
    _clean(reloaded)
    me = reloaded.session_state["classroom_seat"]
    assert me.role == "student" and me.secret == seat and reloaded.selectbox(key="lesson_pick").value == 2
    assert reloaded.number_input(key="l2_guess").value == 1.5 and "Your prediction, 1.5, is in the class's count." in _text(reloaded)
    twin = _student(code, "Bob")
    _clean(twin)
    assert "Someone in this class already goes by “Bob”" in _text(twin) and "classroom_seat" not in twin.session_state
    assert _store(data).roster(code, token) == ["Bob"]
    stranger = _app(**{"class": code, "seat": "x" * 16})  # a seat that is not this class's: one line, then the Join form
    _clean(stranger)
    assert "You are not in this class" in _text(stranger) and stranger.text_input(key="class_nickname")


def test_in_a_class_the_first_answer_counts_and_right_or_wrong_waits_for_the_teacher(data):
    teacher, code, token = _teacher(2)
    assert _button(teacher, "class_reveal_answers").disabled and "No answers yet" in _text(teacher)
    ann = _student(code, "Ann")
    right = LESSONS[2].checks[0].answer
    wrong = (right + 1) % len(LESSONS[2].checks[0].options)
    ann.radio(key="l2_check1").set_value(wrong).run()
    _clean(ann)
    assert not ann.success and not ann.error and "Your answer is in the class's count" in _text(ann)
    assert ann.radio(key="l2_check1").disabled  # locked at once: a change would not be counted (the store refuses it)
    ann.run()
    assert ann.radio(key="l2_check1").value == wrong and ann.radio(key="l2_check1").disabled and not ann.success
    assert _store(data).answer_counts(code, 2, token=token) == {1: {wrong: 1}}
    teacher.run()
    _button(teacher, "class_reveal").click().run()
    _button(teacher, "class_reveal_answers").click().run()
    _clean(teacher)
    rows = next(d.value for d in teacher.dataframe if "students" in d.value.columns)
    assert list(rows["right answer"]).count("✓") == len(LESSONS[2].checks)
    assert list(rows["question"]).count("") == len(rows) - len(LESSONS[2].checks)  # each question once
    ann.run()
    _clean(ann)
    assert any("Not quite" in e.value for e in ann.error) and "✓" in _text(ann)


def test_the_box_shows_what_the_class_counts_and_off_the_teachers_lesson_nothing_is_sent(data):
    teacher, code, token = _teacher(2)
    ann = _student(code, "Ann")
    ann.number_input(key="l2_guess").set_value(1.3).run()
    for lesson in (3, 2):  # the teacher moves on and back: the box still shows what the class counts
        teacher.selectbox(key="lesson_pick").set_value(lesson).run()
        ann.run()
    _clean(ann)
    assert ann.number_input(key="l2_guess").value == 1.3 and "Your prediction, 1.3, is in the class's count." in _text(ann)
    ann.number_input(key="l2_guess").set_value(1e9).run()  # refused in one line; the class keeps what it had
    assert [w.value for w in ann.warning] == ["A prediction lies between 0 and 1000; 1e+09 was not taken."]
    assert "The class keeps your earlier prediction, 1.3." in _text(ann) and "is in the class's count" not in _text(ann)
    ann.number_input(key="l2_guess").set_value(None).run()  # cleared: withdrawn
    assert "Cleared: your prediction is out of the class's count" in _text(ann)
    assert _store(data).predictions(code, 2, token=token) == []
    ann.toggle(key="class_follow").set_value(False).run()
    ann.selectbox(key="lesson_pick").set_value(4).run()
    ann.number_input(key="l4_guess").set_value(2.0).run()
    _clean(ann)
    assert "Not sent: the class is on lesson `2`" in _text(ann) and _store(data).predictions(code, 4, token=token) == []
    assert "you are on lesson `4`, where nothing is sent" in _text(ann)
    assert not any("Follow" in b.label for b in ann.button)  # the switch alone, no second "follow" button


def test_the_teachers_own_result_is_folded_until_the_reveal(data):
    teacher, _, _ = _teacher(2)
    (folded,) = [e for e in teacher.expander if "The lesson's result: the answer" in e.label]
    assert not folded.proto.expanded and any("These numbers were recorded" in i.value for i in folded.info)
    _button(teacher, "class_reveal").click().run()
    _clean(teacher)
    assert not any("The lesson's result: the answer" in e.label for e in teacher.expander)
    assert any("These numbers were recorded" in i.value for i in teacher.info)


def test_an_ended_class_says_so_on_every_desk_and_page_with_a_way_out(data):
    teacher, code, token = _teacher(1)
    second = _app(**{"class": code, "desk": token})
    ann = _student(code, "Ann")
    _button(teacher, "class_end").click().run()
    for page, leave in ((second, "Close the desk"), (ann, "Leave the class")):
        page.run()
        _clean(page)
        assert "This class has ended" in _text(page) and "No class with that code" not in _text(page)
        assert not any(b.key in ("class_end", "class_reveal") for b in page.button) and not page.code
        next(b for b in page.button if b.label == leave).click().run()
        _clean(page)
        assert "classroom_seat" not in page.session_state and "seat" not in page.query_params


def test_a_student_with_only_the_code_types_it(data):
    _, code, _ = _teacher(1)
    plain = _app()
    plain.text_input(key="class_code_typed").set_value("<b>")
    next(b for b in plain.button if b.label == "Join a class").click().run()
    _clean(plain)
    (said,) = [w.value for w in plain.warning]
    assert "That is not a class code" in said and "10 letters and digits" in said
    typed = f"{code[:4].lower()}-{code[4:]}"
    plain.text_input(key="class_code_typed").set_value(typed)
    next(b for b in plain.button if b.label == "Join a class").click().run()
    _clean(plain)
    plain.text_input(key="class_nickname").set_value("Cat")
    next(b for b in plain.button if b.label == "Join").click().run()
    _clean(plain)
    assert plain.session_state["classroom_seat"].role == "student" and plain.selectbox(key="lesson_pick").value == 1


def test_show_the_whole_lesson_is_off_again_on_each_lesson(data):
    teacher, code, _ = _teacher(2)
    ann = _student(code, "Ann")
    ann.toggle(key="class_whole_lesson2").set_value(True).run()
    teacher.selectbox(key="lesson_pick").set_value(3).run()
    ann.run()
    _clean(ann)
    assert not ann.toggle(key="class_whole_lesson3").value


def test_a_long_source_line_is_cut_at_a_word_with_an_ellipsis():
    name = LESSONS[2].experiment
    rec, _, _ = load_recording(name)
    text = json.dumps(
        {"measurement": rec["measurement"], "settings": rec["settings"], "source": "recorded", "label": recorded_label(rec) + " word" * 80}
    )
    label = class_page.shared_result(name, text)["label"]
    assert len(label) <= 200 and label.endswith("…") and label[:-1].endswith(" word")
