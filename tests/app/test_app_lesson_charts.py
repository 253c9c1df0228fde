"""Lessons page in teacher mode (AppTest): every lesson shows its recorded result as a chart first, and a GPU
panel that names the GPU and the source of each GPU figure; lesson 7 adds what goodput chose per step where its
measurement has it. The model is never loaded for this."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.lessons import registry
from app.lessons.registry import EXPERIMENTS

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from app.lessons.kit.texts import load_lessons
from app.views import palette  # noqa: E402
from tests.app.test_lesson7_goodput import record_with_goodput  # noqa: E402  (a measurement with goodput rows)

ROOT = Path(__file__).resolve().parents[2]
LESSONS = load_lessons(ROOT / "lessons", EXPERIMENTS)
PAGE = ROOT / "app" / "lessons" / "lessons.py"


def _teacher(lesson: int) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=300)
    at.query_params["lesson"] = str(lesson)
    at.query_params["teacher"] = "true"
    at.switch_page("lessons/lessons.py")
    return at.run()


def _texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


@pytest.mark.parametrize("lesson", range(len(LESSONS)))  # LESSONS[n] is lesson n (its file's NN prefix)
def test_teacher_mode_draws_each_lessons_result_as_a_chart(lesson):
    at = _teacher(lesson)
    assert not at.exception, [e.value for e in at.exception]
    if LESSONS[lesson].experiment not in EXPERIMENTS or "recorded on" not in _texts(at.info) + _texts(at.warning):
        pytest.skip("this lesson shows no recorded result")
    assert at.get("plotly_chart"), f"lesson {lesson} shows its result without a chart"
    assert not any("pytorch" in str(e.value).lower() for e in at.error)
    for chart in at.get("plotly_chart"):  # each names its text colour: Streamlit's theme would draw it grey (3.7:1)
        layout = json.loads(chart.proto.spec)["layout"]
        assert layout["font"]["color"] == palette.INK, layout.get("title")


@pytest.mark.parametrize("lesson", range(len(LESSONS)))  # LESSONS[n] is lesson n (its file's NN prefix)
def test_teacher_mode_shows_a_gpu_panel_naming_the_gpu(lesson):
    if "show_gpu_panel" not in PAGE.read_text(encoding="utf-8"):
        pytest.skip("the Lessons page does not place the GPU panel yet (L-A wires show.show_gpu_panel)")
    at = _teacher(lesson)
    assert not at.exception, [e.value for e in at.exception]
    assert any("On a GPU" in str(h.value) for h in at.subheader)
    text = _texts(at.markdown) + _texts(at.caption)
    assert "NVIDIA H200" in text or "H200" in text
    assert "model, not a measurement" in text.lower() and "h200-gpu_graphs.json" in _json_of_charts(at)


def _json_of_charts(at: AppTest) -> str:
    return "\n".join(str(c.proto.spec) for c in at.get("plotly_chart"))


def _show_width(m: dict) -> None:
    from app.lessons.kit import show
    from app.lessons.l7_width import RECORD

    show.draw(RECORD, m, {"nodes": 24, "topk": 6, "batch": 16}, "recorded on a test machine, 2026-12-01")


def test_lesson_7_draws_what_goodput_chose_under_its_figure_and_an_older_recording_without_it():
    """Lesson 7 drawn from its record, on a measurement with goodput rows: the lesson's figure, then the per-step strip,
    the table with goodput's rows, its caption and its notes; the shipped recording without goodput rows draws as before."""
    m = record_with_goodput()["measurement"]
    at = AppTest.from_function(_show_width, args=(m,), default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    assert [c.key for c in at.get("plotly_chart")] == ["width_fig0", "width_fig1"]
    assert "it takes the shape with the most expected tokens per second" in _texts(at.caption)
    table = at.dataframe[0].value
    assert list(table["contender"]).count("goodput") == 2 and "nodes per row (mean)" in table.columns
    assert "Batch 1: goodput chose" in _texts(at.success)
    old = registry.load_record(ROOT / "assets" / "lessons" / "width.json")["measurement"]
    old["rows"] = [r for r in old["rows"] if r["contender"] != "goodput"]
    at = AppTest.from_function(_show_width, args=(old,), default_timeout=60).run()
    assert not at.exception and [c.key for c in at.get("plotly_chart")] == ["width_fig0"]
    assert "goodput" not in _texts(at.success) and len(at.dataframe[0].value) == 6
