"""Lessons: the thesis step by step, each checked by an experiment, for a class to run.

Page shape (DESIGN §5): title, short prose, then the chosen lesson (`?lesson=N` in the URL): its text
(lessons/*.md), its settings (bound to the URL like the Playground's), a prediction the student commits
to, then the experiment's result set against the guess and the models, three check questions, and a
printable worksheet. Results come from a live run on this machine or, in teacher mode and once a
prediction is entered, from the recording shipped in assets/lessons/ (scripts/record/record_lessons.py),
labelled with its machine and date; "Re-measure live" is always beside it. The experiments and their
predictions live in app/lesson_experiments.py; every conclusion is computed from the measurement
(app/views/conclusions.py). The model is loaded only for a live run, so recordings show at once.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import streamlit as st

from app import resources
from app.lessons import measurement, worksheet
from app.lessons.experiments import EXPERIMENTS, Experiment
from app.lessons.files import load_lessons
from app.lessons.show import SHOW, key_numbers
from app.page_helpers import load_pair_or_error, show_failure, url_fallbacks
from app.stepthrough_panel import draw_stages
from app.url_keys import bound
from app.views import stepthrough
from engine import ConfigError, Trace, TraceError
from engine.drafters import available_drafters

ROOT = Path(__file__).resolve().parents[2]
LESSONS_DIR = ROOT / "lessons"
RECORDINGS = ROOT / "assets" / "lessons"
STEP_TRACES = {
    "a chain step": RECORDINGS / "step-through.json",  # scripts/record/record_lessons.py records both
    "a draft-tree step": RECORDINGS / "step-through-tree.json",
}
# What an experiment can raise: a refused config, a bad argument, and torch's errors (e.g. out of memory).
EXPERIMENT_ERRORS = (ConfigError, ValueError, OSError, RuntimeError)


# --- the page's parts ---------------------------------------------------------------------------
def pick_lesson(lessons, raw: dict, notices: list[str]) -> int:
    """The lesson number from `?lesson=N` on a session's first run (a bad value: lesson 1 and a notice), then the
    selectbox; the URL follows the choice."""
    n = len(lessons)
    if "lesson_pick" not in st.session_state:
        text = raw.get("lesson", "1")
        chosen = int(text) if text.strip().isdigit() and 1 <= int(text) <= n else 1
        if "lesson" in raw and str(chosen) != text.strip():
            notices.append(f"The link asked for lesson {url_shown(text)}, which does not exist; it shows lesson 1 instead (there are {n}).")
        st.session_state["lesson_pick"] = chosen
    pick = st.selectbox("Lesson", list(range(1, n + 1)), key="lesson_pick", format_func=lambda i: lessons[i - 1].title)
    st.query_params["lesson"] = str(pick)
    return pick


def url_shown(text: str) -> str:
    clean = " ".join(str(text).replace("`", "'").split())
    return "`" + (clean if len(clean) <= 20 else clean[:19] + "…") + "`"


def draw_settings(experiment: Experiment, raw: dict, notices: list[str]) -> dict:
    """The lesson's knobs, bound to the URL; a link value a knob cannot take gets a notice and the default."""
    values, labels = {}, {}
    with st.expander("Settings of this experiment (kept in the link)", expanded=False):
        cols = st.columns(len(experiment.knobs))
        for col, knob in zip(cols, experiment.knobs):
            values[knob.key] = col.select_slider(
                knob.label, knob.options, value=knob.default, **bound(PAGE, knob.key), help=knob.help or None
            )
            labels[knob.key] = knob.label
    notices += url_fallbacks(raw, values, labels)
    return {key.split("_", 1)[1]: value for key, value in values.items()}


@st.cache_data(show_spinner=False)
def recording(name: str, mtime: float) -> tuple[dict | None, str | None]:
    """(the checked recording, None) or (None, why it cannot be used). mtime keys the cache to the file."""
    try:
        return measurement.load_record(RECORDINGS / f"{name}.json"), None
    except measurement.MeasurementError as exc:
        return None, str(exc)


def load_recording(name: str) -> tuple[dict | None, str | None]:
    path = RECORDINGS / f"{name}.json"
    return recording(name, path.stat().st_mtime if path.exists() else 0.0)


def recorded_label(rec: dict) -> str:
    return f"recorded on {rec['machine']}, {rec['dtype']}, {rec['date']} ({rec['note']})"


def run_live(i: int, name: str, experiment: Experiment, settings: dict) -> None:
    """Load the pair (first live run only), run the experiment under the run lock, keep its checked measurement."""
    loaded = load_pair_or_error("embedded", "auto", with_probe=True)
    if loaded is None:
        return
    pair, probe = loaded
    if experiment.needs and not set(experiment.needs) & set(available_drafters(pair)):
        st.warning("This experiment needs a model drafter (the draft model or the EAGLE head), and this pair has none.")
        return
    with resources.model_turn(st.empty()):
        try:
            with st.spinner("Measuring…"):
                result = measurement.check_measurement(name, experiment.run(pair, probe, settings))
        except EXPERIMENT_ERRORS as exc:
            show_failure("The experiment failed", exc)
            return
    st.session_state[f"lesson{i}"] = {
        "measurement": result,
        "settings": settings,
        "source": "live",
        "label": f"measured live on {probe.device_name}, {probe.dtype}, {dt.date.today().isoformat()}",
    }


def show_prediction(experiment: Experiment, guess, m: dict, s: dict) -> list[dict]:
    p = experiment.predict
    measured = p.measured(m, s)
    rows = worksheet.prediction_rows(guess, measured, p.models(m, s), p.unit)
    st.markdown("**Your guess, the measurement and the models**")
    st.dataframe(rows, hide_index=True)
    line = worksheet.guess_line(guess, measured, p.unit)
    if line:
        st.markdown(line)
    return rows


def show_checks(i: int, lesson) -> None:
    st.subheader("Check your understanding")
    if lesson.checks_problem:
        st.error(lesson.checks_problem, icon=":material/error:")
        return
    for j, check in enumerate(lesson.checks, start=1):
        answer = st.radio(
            f"{j}. {check.question}",
            list(range(len(check.options))),
            index=None,
            key=f"l{i}_check{j}",
            format_func=lambda o, c=check: c.options[o],
        )
        if answer is not None:
            (st.success if answer == check.answer else st.error)(
                ("Right. " if answer == check.answer else f"Not quite: the answer is “{check.options[check.answer]}”. ") + check.explain
            )


@st.cache_data(show_spinner=False)
def step_trace(kind: str, mtime: float) -> tuple[Trace | None, str | None]:
    try:
        return Trace.from_json(STEP_TRACES[kind]), None
    except TraceError as exc:
        return None, str(exc)


def show_step_through() -> None:
    """One recorded speculative step, one stage per click, with the engine's code for that stage beside it: a
    chain's step, or a draft tree's (the third way to fill a pass, beside batch and depth)."""
    kind = st.radio(
        "Step through", list(STEP_TRACES), horizontal=True, key="step_kind", on_change=lambda: st.session_state.update(step_stage=0)
    )
    path = STEP_TRACES[kind]
    trace, problem = step_trace(kind, path.stat().st_mtime if path.exists() else 0.0)
    if trace is None:
        st.error(f"The recorded step could not be loaded ({problem}).", icon=":material/error:")
        return
    index = stepthrough.interesting_step(trace)
    if index is None:
        st.error("The recorded trace has no speculative step.", icon=":material/error:")
        return
    probe = trace.meta.get("probe") or {}
    tree = trace.steps[index].seqs[0].tree
    shape = f", a tree of {trace.config.get('tree_nodes')} nodes, top-{trace.config.get('tree_topk')}" if tree is not None else ""
    st.caption(
        f"A real step: step {index} of a recorded batch-1 greedy run ({trace.config.get('drafter')} drafter, "
        f"depth {trace.config.get('depth')}{shape}), recorded on "
        f"{probe.get('device_name', trace.meta.get('device'))}, {trace.meta.get('dtype')}, "
        f"{trace.meta.get('recorded_at', 'date not recorded')}."
    )
    stages = stepthrough.stages(trace, index)
    last = len(stages) - 1
    shown = min(st.session_state.setdefault("step_stage", 0), last)

    def move(to: int) -> None:
        st.session_state["step_stage"] = max(0, min(to, last))

    b1, b2, _ = st.columns([1, 1, 4])
    b1.button("Next stage ▶", key="step_next", disabled=shown >= last, on_click=move, args=(shown + 1,))
    b2.button("↺ Start over", key="step_reset", on_click=move, args=(0,))
    draw_stages(trace, index, 0, upto=shown)


def show_worksheet(i: int, lesson, experiment: Experiment, name: str, guess, result: dict, rows: list[dict]) -> None:
    m, s = result["measurement"], result["settings"]
    calc_in = experiment.leviathan(m, s) or {}
    calc = worksheet.hand_calculation(calc_in.get("alpha"), calc_in.get("k"), calc_in.get("c"))
    page = worksheet.worksheet_html(
        lesson.title, experiment.predict.question.format(**s), rows, key_numbers(name, m, s), result["label"], calc
    )
    st.download_button(
        "⬇ Worksheet (printable HTML, one page)",
        page,
        file_name=f"speclab-lesson{i}-worksheet.html",
        mime="text/html",
        key=f"l{i}_worksheet",
    )


# --- page --------------------------------------------------------------------------------------
st.title("🎓 Lessons")
st.markdown(
    "Why is speculative decoding fast, and when is it not? Seven short steps, each checked by an experiment. Commit "
    "to a number first, then see what this machine measures (live) or what was recorded (teacher mode: instant, "
    "labelled with its machine and date). After J. Barrow, "
    "[“Why is speculative decoding fast?”](https://jbarrow.ai/2026-10-08-why-is-speculative-decoding-fast), 2026."
)
PAGE = "lessons"  # its bound widgets and their labels: app/url_keys.py
lessons = load_lessons(LESSONS_DIR, EXPERIMENTS)
if not lessons:
    st.error(f"No lesson files (NN-name.md) were found in {LESSONS_DIR}.", icon=":material/error:")
    st.stop()
first_run = "lesson_seen" not in st.session_state
raw = st.query_params.to_dict() if first_run else {}  # read before any bound widget is drawn
st.session_state["lesson_seen"] = True
notice_box = st.container()
notices: list[str] = []
c1, c2 = st.columns([3, 2], vertical_alignment="bottom")
with c1:
    i = pick_lesson(lessons, raw, notices)
with c2:
    teacher = st.toggle(
        "Teacher mode: recorded results at once",
        **bound(PAGE, "teacher"),
        help="Show each lesson's shipped recording without waiting for a prediction (the numbers are "
        "labelled with the machine and date they were measured on).",
    )
lesson = lessons[i - 1]
st.markdown(lesson.body)
if lesson.problem:
    st.error(lesson.problem, icon=":material/error:")
    st.stop()
name = lesson.experiment
experiment = EXPERIMENTS[name]
settings = draw_settings(experiment, raw, notices)
notices += url_fallbacks(raw, {"teacher": teacher}, {"teacher": "Teacher mode"})
if first_run:  # a link's notices stay while its lesson is shown
    st.session_state["lesson_notices"] = (i, notices)
shown_for, kept = st.session_state.get("lesson_notices", (0, []))
for notice in kept if shown_for == i else []:
    notice_box.warning(notice, icon=":material/link_off:")
question = experiment.predict.question.format(**settings)
guess = st.number_input(
    f"Your prediction: {question}",
    min_value=0.0,
    max_value=1000.0,
    value=None,
    step=0.05,
    format="%.2f",
    placeholder=experiment.predict.placeholder,
    key=f"l{i}_guess",
)
rec, rec_problem = load_recording(name)
rec_fits = rec is not None and rec["settings"] == settings
waiting = guess is None and not teacher
if waiting:
    st.caption("Enter your prediction first: the results unlock once you have committed to a number.")
run_col, rec_col = st.columns([1, 3], vertical_alignment="center")
label = "↻ Re-measure live" if rec_fits else "▶ Run the experiment live"
if run_col.button(label, key=f"lesson{i}_run", type="primary", disabled=waiting):
    run_live(i, name, experiment, settings)
live = st.session_state.get(f"lesson{i}")
if live is not None and live["settings"] != settings:
    live = None  # measured with other settings: not this experiment
if rec_problem and rec is None:
    rec_col.warning(f"No usable recording for this lesson: {rec_problem}")
elif not rec_fits:
    rec_col.caption("The shipped recording used the default settings; run it live for these.")
result = live
if result is None and rec_fits and not waiting:
    result = {"measurement": rec["measurement"], "settings": rec["settings"], "source": "recorded", "label": recorded_label(rec)}
if result is not None:
    icon = "📼" if result["source"] == "recorded" else "⏱"
    box = rec_col.warning if "DISTURBED" in result["label"] else rec_col.info  # a recording marked disturbed
    box(
        f"{icon} These numbers were {result['label']}."
        + (" Press Re-measure live to measure on the machine serving this page." if result["source"] == "recorded" else "")
    )
    SHOW[name](result["measurement"], result["settings"])
    rows = show_prediction(experiment, guess, result["measurement"], result["settings"])
    show_worksheet(i, lesson, experiment, name, guess, result, rows)
show_checks(i, lesson)
with st.expander("🔍 One speculative step, stage by stage (a recorded step, with the engine's code)"):
    show_step_through()
