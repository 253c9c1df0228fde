"""The class-session views (app/views/classroom.py, pure) and panel (app/classroom/panel.py, AppTest on a small
page that wires it the way the Lessons page will): a teacher and students in separate sessions, one store file."""

from __future__ import annotations

import base64
import html
import json
import re
import xml.etree.ElementTree as ET

import pytest
import segno
from streamlit.testing.v1 import AppTest

from app.classroom.store import ClassroomStore
from app.views import classroom as views

HOSTILE = "<img src=x onerror=1>"


# --- pure views ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "page_url,expected",
    [
        ("http://h:8501/lessons?lesson=2&teacher=1", "http://h:8501/lessons?class=ABCDE12345"),
        ("http://h:8501/", "http://h:8501/lessons?class=ABCDE12345"),
        ("http://h:8501", "http://h:8501/lessons?class=ABCDE12345"),
        ("https://x.hf.space/app/playground#top", "https://x.hf.space/app/lessons?class=ABCDE12345"),
        ("https://x.hf.space/app/", "https://x.hf.space/app/lessons?class=ABCDE12345"),
    ],
)
def test_the_student_link_is_the_lessons_page_with_the_code_only(page_url, expected):
    assert views.lessons_url(page_url, "ABCDE12345") == expected


def test_the_teacher_link_carries_the_token_url_encoded():
    url = views.lessons_url("http://h/lessons", "ABCDE12345", "a-b_c+/=")
    assert url == "http://h/lessons?class=ABCDE12345&desk=a-b_c%2B%2F%3D"


def test_the_qr_code_is_one_svg_of_the_link():
    url = "http://h:8501/lessons?class=ABCDE12345"
    svg = views.qr_svg(url, scale=5)
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg") and not root.findall(".//{*}script") and "class=" not in (root.text or "")
    side = len(segno.make(url, error="m", micro=False).matrix) + 4  # modules + 2-module border on each side
    assert int(root.get("width")) == side * 5  # the same symbol segno makes for this URL, at scale 5
    assert int(ET.fromstring(views.qr_svg(url + "X" * 60)).get("width")) > side * 5  # a longer link, a bigger code


def test_count_labels():
    assert [views.count_label(n) for n in (0, 1, 3)] == ["0 predictions", "1 prediction", "3 predictions"]
    assert views.count_label(2, "student") == "2 students"


def test_the_predictions_figure_stacks_equal_guesses_and_marks_guess_and_result():
    fig = views.predictions_figure([1.0, 2.0, 2.0, 2.0, 3.5], "×", mine=2.0, result=1.7)
    assert fig.layout.title.text == "5 predictions"
    strip = [t for t in fig.data if t.type == "scatter"][0]
    assert list(strip.y) == [1, 1, 2, 3, 1]  # equal guesses stack instead of hiding each other
    assert sorted(s.x0 for s in fig.layout.shapes) == [1.7, 2.0]
    assert {a.text for a in fig.layout.annotations} == {"your guess", "measured"}
    empty = views.predictions_figure([], "×")
    assert empty.layout.title.text == "0 predictions" and not empty.data


def test_the_predictions_picture_is_one_svg_with_stacked_dots_and_labelled_lines():
    svg = views.predictions_svg([1.0, 2.0, 2.0, 2.0, 3.5], "×", mine=2.0, result=1.7)
    assert ET.fromstring(svg).tag.endswith("svg") and svg.count("<circle") == 5  # well-formed, one dot per student
    heights = {}
    for cx, cy in re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)"', svg):
        heights.setdefault(cx, []).append(float(cy))
    assert sorted(len(ys) for ys in heights.values()) == [1, 1, 3]  # the three 2.0s stack in one column
    assert all(len(set(ys)) == len(ys) for ys in heights.values())  # one above the other, none hidden
    assert "your guess 2×" in svg and "measured 1.7×" in svg and 'stroke-dasharray="6 4"' in svg  # the guess dashed
    assert "<title>5 predictions (×), one dot each; your guess 2; measured 1.7</title>" in svg
    bare = views.predictions_svg([], "<b>&")  # no guesses, no result: an empty axis, the unit as text
    assert "<circle" not in bare and "your guess" not in bare and "0 predictions" in bare
    assert "<b>" not in bare and "&lt;b&gt;&amp;" in bare and ET.fromstring(bare) is not None
    assert views.nice_ticks(0.5, 4.2) == [1.0, 2.0, 3.0, 4.0] and views.nice_ticks(0.0, 0.06) == [0.0, 0.02, 0.04, 0.06]


def test_the_waiting_frame_is_the_pictures_size_and_well_formed():
    frame, picture = ET.fromstring(views.waiting_svg()), ET.fromstring(views.predictions_svg([1.0], "×"))
    assert frame.get("viewBox") == picture.get("viewBox") and frame.get("style") == picture.get("style")  # no jump
    assert "<circle" not in views.waiting_svg() and "reveals them" in views.waiting_svg()


def _image_svg(body: str) -> tuple[str, str]:
    """(the alternative text, the SVG) of the one data: image in an HTML block."""
    ((src, alt),) = re.findall(r'<img src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)" alt="([^"]*)"', body)
    return html.unescape(alt), base64.b64decode(src).decode()


def test_the_class_result_is_plain_html_with_the_picture_as_an_image():
    body = views.result_html([1.0, 2.0, 2.0], "<b>×", mine=2.0, result=1.7)
    alt, svg = _image_svg(body)
    assert svg == views.predictions_svg([1.0, 2.0, 2.0], "<b>×", mine=2.0, result=1.7)  # the picture, unchanged
    assert alt == "3 predictions (<b>×), one dot each; your guess 2; measured 1.7"  # said in words, escaped in the tag
    assert "<b>" not in body and "&lt;b&gt;×" in body  # the unit: escaped text in the alt, never a tag
    assert "<svg" not in body and "<strong>3 predictions</strong> in the class" in body and "The class's result" in body
    root = ET.fromstring(f"<div>{body}</div>")  # well-formed: what the browser's sanitizer keeps as it is
    assert [e.tag for e in root] == ["p", "img", "p"]
    frame_alt, frame = _image_svg(views.waiting_html())
    assert "reveals them" in frame_alt and ET.fromstring(frame).get("viewBox") == ET.fromstring(svg).get("viewBox")
    hostile = views.svg_image("<svg/>", '" onerror="alert(1)')
    assert 'onerror="' not in hostile and "&quot; onerror=&quot;alert(1)" in hostile


def test_an_html_table_shows_every_cell_as_escaped_text():
    table = views.table_html([{"what": "<b>a</b>", "value": '"x" & y'}, {"what": "c", "value": 2}])
    root = ET.fromstring(table)
    assert [th.text for th in root.iter("th")] == ["what", "value"]
    assert [td.text for td in root.iter("td")] == ["<b>a</b>", '"x" & y', "c", "2"]  # text, never markup
    assert "<b>" not in table and views.table_html([]) == ""


def test_answer_rows_give_counts_and_shares_per_option():
    questions = [("Which is faster?", ["AR", "speculative", "same"], 1), ("Why?", ["memory", "compute"], 0)]
    rows = views.answer_rows({1: {0: 1, 1: 3}}, questions)
    assert "right answer" not in rows[0]  # before the answers are out, nothing marks the right one (the desk is projected)
    assert [(r["answer"], r["students"], r["share"]) for r in rows] == [
        ("AR", 1, "25%"),
        ("speculative", 3, "75%"),
        ("same", 0, "0%"),
        ("memory", 0, "–"),
        ("compute", 0, "–"),
    ]
    assert [r["question"] for r in rows] == ["1. Which is faster?", "", "", "2. Why?", ""]  # each question once
    marked = views.answer_rows({1: {0: 1, 1: 3}}, questions, mark=True)
    assert [r["right answer"] for r in marked] == ["", "✓", "", "✓", ""] and list(marked[0])[-1] == "question"


def test_the_roster_shows_hostile_nicknames_as_text():
    text = views.roster_markdown([HOSTILE, "", "[x](http://evil.example)", "Ann"])
    assert text.startswith("Joined (4): ") and "1 without a nickname" in text and "Ann" in text
    assert not re.search(r"(?<!\\)[<>\[\]()]", text.split(": ", 1)[1].replace("(4)", ""))  # every one escaped
    assert "\\<img" in text and "http://" not in text  # shown as text, and no URL left for the autolinker
    assert views.roster_markdown([]) == "No students have joined yet."
    many = views.roster_markdown([f"s{i}" for i in range(50)], shown=40)
    assert "10 more" in many and "s41" not in many


# --- the panel in AppTest ------------------------------------------------------------------------------------
def _page():
    """A small page wired like the Lessons page will be (see the module docstring of app/classroom/panel.py)."""
    import json
    import os

    import streamlit as st

    from app.classroom import desk, panel
    from app.classroom.store import ClassroomStore

    store = ClassroomStore(os.environ["SPECLAB_CLASS_DB"])
    st.session_state["page_runs"] = st.session_state.get("page_runs", 0) + 1  # whole-page runs (not a fragment's alone)
    raw = st.query_params.to_dict() if "seen" not in st.session_state else {}
    st.session_state["seen"] = True
    panel.read_link(store, raw)
    follow = panel.take_follow()
    if follow is not None:
        st.session_state["pick"] = follow
    lesson = st.selectbox("Lesson", ["1", "2", "3"], key="pick")
    me = panel.seat()
    questions = [("Which is faster?", ["AR", "speculative"], 1)]

    def result_page(result_json: str, values: tuple, mine) -> str:
        speedup = json.loads(result_json)["speedup"]
        return panel.predictions_html(values, "×", mine, speedup) + f"<p>Shared result: speedup {speedup}</p>"

    def draw_result(result_json: str, mine) -> None:
        st.caption(f"Under the result: your guess {mine}")

    if me is None:
        panel.start_button(store)
        panel.join_form(store)
    elif me.role == "teacher":
        desk.teacher_desk(
            store,
            me,
            "http://localhost:8501/lessons",
            lesson,
            unit="×",
            questions=questions,
            run_result=lambda: json.dumps({"speedup": 1.5}),
            page_redraws=st.session_state.get("page_redraws", True),
            result_page=result_page,
        )
    else:
        state = panel.student_state(store, me)
        panel.seed_prediction(state, lesson, f"guess{lesson}")
        guess = st.number_input("Your prediction", value=None, key=f"guess{lesson}")
        panel.commit_prediction(store, me, state, lesson, guess)
        choice = st.radio("1. Which is faster?", [0, 1], index=None, key=f"check{lesson}")
        panel.commit_answer(store, me, lesson, 1, choice)
        panel.student_view(store, me, lesson, result_page=result_page, draw_result=draw_result, questions=questions)


def _html(at: AppTest) -> list[str]:
    """The page's HTML blocks: st.html's, and what the class watch shows (the class's result, or the frame waiting for it)."""
    shown = [h.value for h in at.get("html")]
    return shown + [p for c in at.get("bidi_component") if (p := json.loads(c.proto.json or "{}").get("page"))]


def _committed(at: AppTest) -> int:
    """The predictions this session sent, as the class watch was last told (it blurs the input when this grows)."""
    (watch,) = [json.loads(c.proto.json or "{}") for c in at.get("bidi_component")]
    return watch["committed"]


def _text(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [w.value for w in at.warning]
    parts += _html(at)
    return "\n".join(map(str, parts))


def _button(at: AppTest, key: str):
    return next(b for b in at.button if b.key == key)


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "classes.sqlite3"
    monkeypatch.setenv("SPECLAB_CLASS_DB", str(path))
    return path


def _teacher(db) -> tuple[AppTest, str, str]:
    at = AppTest.from_function(_page, default_timeout=30).run()
    _button(at, "class_start").click().run()
    me = at.session_state["classroom_seat"]
    assert me.role == "teacher" and not at.exception
    return at, me.code, me.secret


def _student(code: str, nickname: str = "") -> AppTest:
    at = AppTest.from_function(_page, default_timeout=30)
    at.query_params["class"] = code
    at.run()
    at.text_input(key="class_nickname").set_value(nickname)
    next(b for b in at.button if b.label == "Join").click().run()
    return at


def test_teacher_starts_students_join_predict_and_see_one_result(db):
    teacher, code, token = _teacher(db)
    assert "0 predictions" in _text(teacher) and f"lessons?class={code}" in [c.value for c in teacher.code][0]
    assert token not in _text(teacher)  # only inside the private-link expander's code block
    students = [_student(code, name) for name in ("Ann", HOSTILE, "")]
    for k, at in enumerate(students):
        assert at.session_state["classroom_seat"].role == "student" and not at.exception
        assert _committed(at) == 0
        at.number_input(key="guess1").set_value(1.0 + k).run()
        assert f"Your prediction, {1.0 + k:g}, is in the class's count." in _text(at)
        # the run that sent it tells the watch, which lets go of the input's focus once (tests/app/test_class_browser.py)
        assert _committed(at) == 1 and _committed(at.run()) == 1
        # while the class waits: the element kinds the result brings (an st.html block, a download button), so
        # each browser loads their scripts at join, not 30 at once at the first Reveal (issue 41)
        (frame,) = [h for h in _html(at) if "appear here when the teacher reveals" in h]
        assert "reveals them" in _image_svg(frame)[1] and not any("<svg" in m.value for m in at.markdown)
        (waiting,) = [b for b in at.get("download_button") if b.proto.id.endswith("class_worksheet_waiting")]
        assert waiting.proto.disabled
    teacher.run()
    assert "3 predictions" in _text(teacher) and "3 students joined" in _text(teacher)
    (desk_figure,) = [c for c in teacher.get("plotly_chart") if c.key == "class_predictions"]  # the desk's one figure
    assert '"title":{"text":"3 predictions"}' in desk_figure.proto.spec
    assert ClassroomStore(db).predictions(code, "1", token=token) == [1.0, 2.0, 3.0]
    _button(teacher, "class_reveal").click().run()
    assert "Revealed" in _text(teacher)
    for k, at in enumerate(students):
        at.run()
        text = _text(at)
        assert "Shared result: speedup 1.5" in text and "<strong>3 predictions</strong> in the class" in text
        # the class's predictions, light (issue 41): one st.html block, its SVG an image; no plotly, no Markdown to parse
        (result,) = [h for h in _html(at) if "The class's result" in h]
        alt, svg = _image_svg(result)
        assert not at.get("plotly_chart") and svg.count("<circle") == 3 and not any("<svg" in m.value for m in at.markdown)
        assert f"your guess {1.0 + k:.3g}×" in svg and "measured 1.5×" in svg and f"your guess {1.0 + k:.3g}" in alt
        assert "appear here" not in text and not at.get("download_button")  # the frame gone
    for at in students[:2]:
        at.radio(key="check1").set_value(1).run()
    teacher.run()
    rows = teacher.dataframe[0].value
    assert list(rows["students"]) == [0, 2]
    _button(teacher, "class_reveal_answers").click().run()
    students[2].run()
    answers = next(h for h in _html(students[2]) if "The class's answers" in h)
    cells = [td.text or "" for td in ET.fromstring(answers.split("</p>", 1)[1]).iter("td")]  # an HTML table, no data grid
    assert cells == ["AR", "0", "0%", "", "1. Which is faster?", "speculative", "2", "100%", "✓", ""]  # the right one marked


def test_students_follow_the_teacher(db):
    teacher, code, token = _teacher(db)
    student = _student(code)
    assert student.selectbox(key="pick").value == "1"
    teacher.selectbox(key="pick").set_value("3").run()
    student.run()  # the poll sees the teacher's lesson: the page moves there
    assert student.selectbox(key="pick").value == "3" and not student.exception
    student.toggle(key="class_follow").set_value(False).run()
    teacher.selectbox(key="pick").set_value("2").run()
    student.run()
    assert student.selectbox(key="pick").value == "3"
    # one switch, one line (no second "follow" button beside it), and the status says where nothing is sent
    assert not any("Follow" in b.label for b in student.button) and len(student.toggle) == 1
    assert "The teacher is on lesson `2`: switch Follow the teacher on" in _text(student)
    assert "you are on lesson `3`, where nothing is sent" in _text(student) and "appears when the teacher" not in _text(student)
    student.number_input(key="guess3").set_value(2.0).run()  # off the teacher's lesson: not counted
    assert "Not sent: the class is on lesson `2`" in _text(student) and not student.exception
    assert ClassroomStore(db).predictions(code, "3", token=token) == []
    student.toggle(key="class_follow").set_value(True).run()
    assert student.selectbox(key="pick").value == "2" and not student.exception


def test_bad_links_and_hostile_nicknames_get_one_notice(db):
    _, code, _ = _teacher(db)
    wrong = AppTest.from_function(_page, default_timeout=30)
    wrong.query_params.update({"class": code, "desk": "x" * 43})
    wrong.run()
    assert "teacher link is not valid" in _text(wrong) and "classroom_seat" not in wrong.session_state
    assert not wrong.exception
    unknown = _student("ZZZZZZZZZZ" if code != "ZZZZZZZZZZ" else "YYYYYYYYYY")
    assert "No class with that code is running" in _text(unknown) and not unknown.exception
    malformed = AppTest.from_function(_page, default_timeout=30)
    malformed.query_params["class"] = "<script>"
    malformed.run()
    assert "not a class code" in _text(malformed) and not malformed.exception
    long_name = _student(code, HOSTILE * 3)
    assert "Nicknames are at most 24 characters" in _text(long_name) and "classroom_seat" not in long_name.session_state
    assert not long_name.exception


def test_the_teacher_token_leaves_the_address_bar(db):
    _, code, token = _teacher(db)
    again = AppTest.from_function(_page, default_timeout=30)
    again.query_params.update({"class": code, "desk": token})
    again.run()
    assert again.session_state["classroom_seat"].role == "teacher" and "desk" not in again.query_params
    assert "0 predictions" in _text(again)
    assert json.dumps(str(again.session_state["classroom_seat"])).find(token) == -1  # repr hides the secret


@pytest.mark.parametrize("page_redraws", [True, False])
def test_reveal_reruns_the_whole_page_only_for_a_result_of_its_own(db, page_redraws):
    """A live run is the teacher's own result too: the page reruns to show it. A recording the page already shows
    (teacher mode): the desk alone redraws (issue 41: no whole lesson page redrawn while the class draws the result)."""
    teacher, code, _ = _teacher(db)
    teacher.session_state["page_redraws"] = page_redraws
    teacher.run()
    before = teacher.session_state["page_runs"]
    _button(teacher, "class_reveal").click().run()
    assert "Revealed" in _text(teacher) and not teacher.exception
    again = "run once more" if page_redraws else "share the recording once more"  # a recording is shared, not run
    assert _button(teacher, "class_reveal").label == f"Reveal again ({again})"
    # the first Reveal reruns the page either way: the teacher's own result was folded while the class predicted
    assert teacher.session_state["page_runs"] - before == 2  # the click's run, then the rerun
    before = teacher.session_state["page_runs"]
    _button(teacher, "class_reveal").click().run()
    assert teacher.session_state["page_runs"] - before == (2 if page_redraws else 1)  # again: a recording is shown already
