"""Lessons page in teacher mode (AppTest): every lesson shows its recorded result as a chart first, and a GPU
panel that names the GPU and the source of each GPU figure. The model is never loaded for this."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from app.lessons.experiments import EXPERIMENTS  # noqa: E402
from app.lessons.files import load_lessons  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LESSONS = load_lessons(ROOT / "lessons", EXPERIMENTS)
PAGE = ROOT / "app" / "app_pages" / "lessons.py"


def _teacher(lesson: int) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=300)
    at.query_params["lesson"] = str(lesson)
    at.query_params["teacher"] = "true"
    at.switch_page("app_pages/lessons.py")
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
