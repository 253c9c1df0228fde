"""Every lesson's GPU panel, beside this machine's CPU: the lesson's own run re-timed with SpecLab's recorded H200 pass
costs (app/lessons/kit/retime.py), the recorded H200 pass curves (measured), the roofline Predictor at the lesson's
settings (a model) and published results (cited). What differs per lesson comes from its record: the passes it marks
(`gpu_passes`), its own re-timing (`retimed`, lesson 1's passes), what its run trades on the H200 (`gpu_lines`) and
whether it cites acceptance results (`acceptance`). No model is loaded.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app.common import measurement
from app.lessons import registry
from app.lessons.kit import gpu, retime
from app.lessons.kit.show import show_chart, show_table


# --- the GPU panel --------------------------------------------------------------------------------
@st.cache_data(show_spinner=False)
def _gpu_curves() -> tuple[list, list[str]]:
    return gpu.recorded_curves()


RECORDINGS = Path(__file__).resolve().parents[3] / "assets" / "lessons"


@st.cache_data(show_spinner=False)
def _recording(name: str) -> dict | None:
    """The lesson's shipped recording (for a live probe to be compared with), None where it cannot be read."""
    try:
        return registry.load_record(RECORDINGS / f"{name}.json")
    except (OSError, measurement.MeasurementError):
        return None


def chosen_settings(settings: dict | None, result: dict | None) -> dict:
    """The settings the run shown actually used: a knob left at 0 ("from this machine's curve") or absent takes the
    value the run chose and recorded (`result["measurement"]["chosen"]`), so the GPU panel marks the passes the
    student saw."""
    settings = dict(settings or {})
    m = result.get("measurement") if isinstance(result, dict) else None
    chosen = m.get("chosen") if isinstance(m, dict) else None
    for name, value in (chosen or {}).items():
        if not settings.get(name) and isinstance(value, int) and not isinstance(value, bool):
            settings[name] = value
    return settings


def show_gpu_panel(lesson_name: str, settings: dict, text: str = "", result: dict | None = None) -> None:
    """The lesson on a GPU, beside this machine's CPU: the lesson's own text, the lesson's run re-timed with SpecLab's
    recorded H200 pass costs (`result`: the result the page shows, live or recorded; app/lessons/retime.py), the recorded
    H200 pass curves (measured), the Predictor at the lesson's settings (model) and published results (cited). No model
    is loaded."""
    key, record = f"gpu_{lesson_name}_", registry.EXPERIMENTS[lesson_name]
    settings = chosen_settings(settings, result)
    depth = int(settings.get("depth", settings.get("k", 4)) or 4)
    st.subheader("🖥 On a GPU")
    with st.expander(
        "Open: this run re-timed on an H200, the H200's measured passes, the roofline model and published results",
        expanded=False,
    ):
        if text:
            st.markdown(text)
        st.markdown(gpu.seed_sentence())
        if result is not None:
            _retimed(record, result, key)
        st.markdown("**Measured** (SpecLab's own runs on an NVIDIA H200)")
        curves, problems = _gpu_curves()
        for problem in problems:
            st.warning(f"A GPU recording could not be used: {problem}", icon=":material/warning:")
        if curves:
            marks = sorted({b * n for _, b, n in gpu.lesson_passes(record, settings)})
            show_chart(gpu.curves_figure(curves, marks), key + "curves")
            st.caption(gpu.CAN_SHOW + " Dotted lines: the tokens per pass of this lesson's passes. " + gpu.knee_sentence(curves))
        st.markdown("**Model, not a measurement** (the roofline Predictor at this lesson's settings)")
        show_chart(gpu.model_figure(record, settings), key + "model")
        show_table(gpu.model_rows(record, settings))
        st.caption(
            gpu.model_label() + ". The line is one row carrying more tokens; the diamonds are this lesson's passes "
            "(more rows also read more KV cache). Data-sheet peaks are not reached by real kernels, so real passes "
            "take longer."
        )
        st.markdown(gpu.kv_sentence(depth=depth))
        cited = gpu.cited_rows(record)
        if cited:
            st.markdown("**Published** (acceptance depends on a trained drafter and real text, which random weights cannot show)")
            show_table(cited)


def _retimed(record, result: dict, key: str) -> None:
    """The lesson's own run (live or recorded) beside the same steps re-timed with the recorded H200 pass costs."""
    m, label = result.get("measurement") or {}, str(result.get("label") or "")
    st.markdown(f"**Your run on an H200** ({retime.LABEL})")
    if record.retimed is not None:  # a lesson of passes, not of decoding lanes (lesson 1)
        record.retimed(m, label, key, _recording(record.name))
        return
    fig = retime.figure(m, label)
    if fig is None:
        recorded = result["source"] == "recorded" if "source" in result else None  # else the label says
        st.caption(retime.why_not(m, label, recorded))  # exactly why: what the run did not keep, or what failed
        return
    show_chart(fig, key + "retimed")
    show_table(retime.rows(m))
    st.caption(" ".join([retime.machine_line() + ".", retime.CAPTION, *retime.drafting_lines(m)]))
    lines = record.gpu_lines(m)  # what the lesson's run trades on the H200, from the priced numbers (lesson 5)
    if lines:
        st.markdown("\n\n".join(lines))
