"""The Lessons page's step-through parts: lesson 0's body (one speculative step, stage by stage, each with its
drawn picture beside the engine's code, then plain decoding beside the step) and the draft-tree step lesson 7
keeps in an expander. The recorded steps are assets/lessons/step-through*.json (scripts/record/record_lessons.py),
loaded with the strict trace loader; a live run's trace replaces the recording (app/lessons/page_parts.py)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app.common import measurement
from app.common.stepthrough_panel import draw_stages
from app.lessons.step_lesson import record_of, trace_label, verdict
from app.views import step_pictures, stepthrough
from engine import Trace, TraceError

RECORDINGS = Path(__file__).resolve().parents[2] / "assets" / "lessons"
STEP_TRACES = {
    "a chain step": RECORDINGS / "step-through.json",  # scripts/record/record_lessons.py records both
    "a draft-tree step": RECORDINGS / "step-through-tree.json",
}
STAGE_KEY = "step0_stage"
FREE_STAGES = 2  # draft and verify are shown before a prediction; what the target kept waits for one


@st.cache_data(show_spinner=False)
def _step_trace(kind: str, mtime: float) -> tuple[Trace | None, str | None]:
    try:
        return Trace.from_json(STEP_TRACES[kind]), None
    except TraceError as exc:
        return None, str(exc)


def step_trace(kind: str) -> tuple[Trace | None, str | None]:
    path = STEP_TRACES[kind]
    return _step_trace(kind, path.stat().st_mtime if path.exists() else 0.0)


def recorded_one_step() -> tuple[dict | None, str | None, Trace | None]:
    """Lesson 0's recording: the chain step-through trace, its chosen step measured and checked like any lesson's
    recording. (record, None, trace) or (None, why not, None)."""
    trace, problem = step_trace("a chain step")
    if trace is None:
        return None, f"the recorded step could not be loaded ({problem})", None
    try:
        return record_of(trace), None, trace
    except (ValueError, measurement.MeasurementError) as exc:
        return None, str(exc), None


def _stage_buttons(last: int, locked: bool) -> int:
    """Previous / next stage, and which stage is shown (kept below FREE_STAGES while `locked`)."""
    top = FREE_STAGES - 1 if locked else last
    shown = min(st.session_state.setdefault(STAGE_KEY, 0), top)

    def move(to: int) -> None:
        st.session_state[STAGE_KEY] = max(0, min(to, top))

    b1, b2, b3 = st.columns([1, 1, 3], vertical_alignment="center")
    b1.button("◀ Previous stage", key="step0_prev", disabled=shown == 0, on_click=move, args=(shown - 1,))
    b2.button("Next stage ▶", key="step0_next", disabled=shown >= top, on_click=move, args=(shown + 1,))
    b3.progress((shown + 1) / (last + 1), text=f"Stage {shown + 1} of {last + 1}")
    if locked and shown >= top:
        st.caption("Enter your prediction above to see which drafts the target keeps (stages 3 to 5).")
    return shown


def show_one_step(result: dict | None, trace, locked: bool) -> None:
    """Lesson 0's body: the step, one stage at a time (picture, text, the engine's code), then, once a prediction
    is in, plain decoding beside the step as a figure with its numbers under it and what they show."""
    index = result["measurement"]["step"] if result else stepthrough.interesting_step(trace)
    machine, dtype, date = trace_label(trace)
    st.subheader("The step, stage by stage")
    st.caption(
        f"Step {index} of a batch-1 greedy run ({trace.config.get('drafter')} drafter, depth {trace.config.get('depth')}), "
        f"{'measured live' if result and result['source'] == 'live' else 'recorded'} on {machine}, {dtype}, {date or 'date not recorded'}."
    )
    shown = _stage_buttons(len(stepthrough.STAGES) - 1, locked)
    draw_stages(trace, index, 0, only=shown, pictures=True)
    if result is None:
        return
    m = result["measurement"]
    st.subheader("Plain decoding beside the step")
    st.plotly_chart(step_pictures.plain_vs_step_figure(m), width="stretch", key="lesson0_fig")
    st.dataframe(step_pictures.plain_vs_step_rows(m), hide_index=True)
    st.caption(f"One plain step: {m['plain_source']}.")
    st.success(verdict(m))


def show_tree_step() -> None:
    """Lesson 7's draft-tree step: all five stages at once, beside the engine's code."""
    trace, problem = step_trace("a draft-tree step")
    if trace is None:
        st.error(f"The recorded step could not be loaded ({problem}).", icon=":material/error:")
        return
    index = stepthrough.interesting_step(trace)
    if index is None:
        st.error("The recorded trace has no speculative step.", icon=":material/error:")
        return
    machine, dtype, date = trace_label(trace)
    st.caption(
        f"A real step: step {index} of a recorded batch-1 greedy run ({trace.config.get('drafter')} drafter, a tree of "
        f"{trace.config.get('tree_nodes')} nodes, {trace.config.get('tree_topk')} children per node, depth "
        f"{trace.config.get('depth')}), recorded on {machine}, {dtype}, {date or 'date not recorded'}."
    )
    draw_stages(trace, index, 0)
