"""Lessons page (AppTest, real embedded pair): every lesson text is shown and its experiment runs live."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_lessons_show_text_and_run_experiments():
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=600)
    at.switch_page("app_pages/lessons.py")
    at.run()
    assert not at.exception
    assert len(at.tabs) == 5
    text = "\n".join(m.value for m in at.markdown)
    assert "memory-bound" in text and "disable-by-batch-size" in text
    for i in (1, 2, 3, 4, 5):
        at.button(key=f"lesson{i}_run").click().run()
        assert not at.exception, f"lesson {i}"
        assert f"lesson{i}" in at.session_state
    conclusions = "\n".join(s.value for s in at.success)
    assert "Sixteen tokens in one pass" in conclusions
    assert "FLOPs of plain decoding" in conclusions
    assert "80 tokens per pass" in conclusions
    assert "load-aware policy" in conclusions
    assert "Stopping where the drafter was unsure" in conclusions
    # Lesson 5: the confidence gate drafted fewer tokens than always drafting 6, at both batch sizes.
    for batch in (1, 8):
        gate = at.session_state["lesson5"][batch]
        assert gate["gated"].summary["drafted_tokens"] < gate["fixed"].summary["drafted_tokens"]
    # Lesson 2's numbers come from the run just made: speculation does more FLOPs than plain decoding.
    assert at.session_state["lesson2"]["m"]["flops_ratio"] > 1.0
