"""Lessons page (AppTest, real embedded pair): every lesson text is shown and its experiment runs live."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402
from streamlit.testing.v1.errors import AppTestError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_lessons_show_text_and_run_experiments():
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=600)
    at.switch_page("app_pages/lessons.py")
    at.run()
    assert not at.exception
    assert len(at.tabs) == 6
    text = "\n".join(m.value for m in at.markdown)
    assert "memory-bound" in text and "disable-by-batch-size" in text
    for i in (1, 2, 3, 4, 5):
        at.button(key=f"lesson{i}_run").click().run()
        assert not at.exception, f"lesson {i}"
        assert f"lesson{i}" in at.session_state
    conclusions = "\n".join(s.value for s in at.success)
    assert "Sixteen tokens in one pass" in conclusions
    assert "FLOPs of plain decoding" in conclusions
    # Lesson 3 no longer asserts a fixed "because 80 tokens per pass is past the ridge point": it sets the
    # measured verify cost of the batch-16 pass (80 tokens) against the probed ridge and the run's own numbers.
    assert "80 tokens per pass" in "\n".join(m.value for m in at.markdown)
    assert "batch 16's (80 tokens)" in conclusions and "past the ridge point" not in conclusions
    assert "The n-gram lookup at batch 16" in conclusions
    assert "load-aware policy" in conclusions
    assert "Stopping where the drafter was unsure" in conclusions
    assert "mostly ones the target would have rejected" not in conclusions and "never verified" in conclusions
    # Lesson 1 names the regime the measurement shows, read from its shares of the probed peaks.
    assert any(f"**{name}**" in conclusions for name in ("memory-bound", "compute-bound", "overhead/latency-bound"))
    first = at.session_state["lesson1"]
    assert first["peak_bandwidth"] > 0 and first["ridge_tokens"] > 0
    assert [r["tokens_per_pass"] for r in first["rows"]] == [1, 2, 4, 8, 16, 32, 64]
    # Lesson 3 runs the EAGLE head (the embedded pair has one), with the n-gram lookup for contrast.
    third = at.session_state["lesson3"]
    assert third["drafter"] == "eagle" and set(third["runs"]) == {1, 16}
    assert third["runs"][16]["spec"].config["drafter"] == "eagle" and third["ngram"]["spec"].config["drafter"] == "ngram"
    # Lesson 5: the confidence gate drafted fewer tokens than always drafting 6, at both batch sizes.
    for batch in (1, 8):
        gate = at.session_state["lesson5"][batch]
        assert gate["gated"].summary["drafted_tokens"] < gate["fixed"].summary["drafted_tokens"]
    # Lesson 2's numbers come from the run just made: speculation does more FLOPs than plain decoding.
    assert at.session_state["lesson2"]["m"]["flops_ratio"] > 1.0


def test_speculate_by_load_waits_for_a_prediction_then_measures(monkeypatch):
    """Lesson 6: Run stays disabled until the student enters a prediction; then the experiment runs and the
    conclusion sets the prediction against the measurement. The cells are shrunk (batch <= 2, 4 tokens) through
    engine.bench.run_cells, which the page calls, so the whole path runs in seconds."""
    import dataclasses

    from engine import bench

    real = bench.run_cells

    def tiny(pair, prompts, cfgs, repeats, sequential=False):
        return real(pair, prompts[:2], [dataclasses.replace(c, max_new_tokens=4) for c in cfgs], 1, sequential)

    monkeypatch.setattr(bench, "run_cells", tiny)
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=300)
    at.switch_page("app_pages/lessons.py")
    at.run()
    assert not at.exception
    assert at.button(key="lesson6_run").disabled
    assert "Enter your prediction first" in "\n".join(c.value for c in at.caption)
    with pytest.raises(AppTestError, match="disabled"):  # AppTest, like a browser, cannot click it
        at.button(key="lesson6_run").click()
    assert "lesson6" not in at.session_state
    at.number_input(key="lesson6_predict").set_value(1.2).run()
    assert not at.button(key="lesson6_run").disabled
    at.button(key="lesson6_run").click().run()
    assert not at.exception and not at.error
    result = at.session_state["lesson6"]
    assert result["prediction"] == 1.2
    assert {r["batch"] for r in result["rows"]} == {1, 4, 16} and len(result["rows"]) == 15
    conclusion = "\n".join(s.value for s in at.success)
    assert "You predicted 1.20× for fixed k = 4 at batch 16" in conclusion
    assert "Batch 16: **" in conclusion and "Worst case over the batch sizes" in conclusion
