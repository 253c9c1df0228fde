"""The Lessons page's parts, in the order a student meets them: the lesson picker, the settings (bound to the URL),
the result (live or recorded, drawn by the lesson's record, its claims checked, beside its recording), the GPU panel
(the run re-timed on an H200, the H200's measured passes, the roofline model, published results), the details, the
worksheet and the sources (the prediction and the checks: app/lessons/kit/ask.py). A lesson with a walkthrough
(lesson 0) draws its stepped-through trace instead of a chart.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import streamlit as st

from app.common import measurement, resources
from app.common.page_helpers import load_pair_or_error, show_failure, url_fallbacks
from app.common.url_keys import bound
from app.lessons import registry
from app.lessons.kit import against, gpu, numbers, show
from app.lessons.kit.experiment import Experiment, claim_rows
from app.lessons.kit.texts import load_lessons, plan_text
from app.views import h200
from app.views.worksheet import guess_line, hand_calculation, prediction_rows, worksheet_html
from engine import ConfigError, verdict
from engine.drafters import available_drafters

ROOT = Path(__file__).resolve().parents[3]


LESSONS_DIR = ROOT / "lessons"


TEACHER_FILE = LESSONS_DIR / "teacher.md"


RECORDINGS = ROOT / "assets" / "lessons"


PAGE = "lessons"  # its bound widgets and their labels: app/common/url_keys.py


# What an experiment can raise: a refused config, a bad argument, and torch's errors (e.g. out of memory).
EXPERIMENT_ERRORS = (ConfigError, ValueError, OSError, RuntimeError)


LIVE_DISTURBED = "DISTURBED: measured beside other work, timings noisy"  # a busy live run, as a busy recording's note


# --- picking a lesson -------------------------------------------------------------------------------
def url_shown(text: str) -> str:
    clean = " ".join(str(text).replace("`", "'").split())
    return "`" + (clean if len(clean) <= 20 else clean[:19] + "…") + "`"


def pick_lesson(by_number: dict, raw: dict, notices: list[str]) -> int:
    """The lesson number (the file's NN prefix) from `?lesson=N` on a session's first run (a bad value: the first
    lesson and a notice), then the selectbox; the URL follows the choice."""
    numbers = sorted(by_number)
    if "lesson_pick" not in st.session_state:
        text = raw.get("lesson", str(numbers[0])).strip()
        plain = text.isascii() and text.isdigit() and len(text) <= 3  # not "²", "٣" or 5,000 nines: int() takes some
        chosen = int(text) if plain and int(text) in by_number else numbers[0]
        if "lesson" in raw and str(chosen) != text:
            notices.append(
                f"The link asked for lesson {url_shown(text)}, which does not exist; it shows lesson {numbers[0]} instead "
                f"(lessons {numbers[0]} to {numbers[-1]})."
            )
        st.session_state["lesson_pick"] = chosen
    pick = st.selectbox("Lesson", numbers, key="lesson_pick", format_func=lambda n: by_number[n].title)
    st.query_params["lesson"] = str(pick)
    return pick


def teacher_plan(teacher: bool, folded: bool = False) -> None:
    """lessons/teacher.md, the class plan (a segment per lesson): open at the top in teacher mode, collapsed otherwise
    and while a class runs (`folded`: the teacher's desk, with the link and QR code, must not scroll away)."""
    try:
        text = TEACHER_FILE.read_text(encoding="utf-8")
    except OSError as exc:
        st.warning(f"The teacher's plan ({TEACHER_FILE.name}) could not be read: {exc.strerror or exc}.")
        return
    with st.expander("🧑‍🏫 For the teacher: the class plan, a segment per lesson", expanded=teacher and not folded):
        st.markdown(inside_expander(_plan(text, _stamps())))


def inside_expander(plan: str) -> str:
    """The plan under its expander's label: its own title (the label says it) left out, its sections as small headings
    (a page-sized heading inside an expander dwarfed the lesson above it)."""
    plan = re.sub(r"\A# [^\n]*\n+", "", plan)
    return re.sub(r"^## ", "#### ", plan, flags=re.M)


def _stamps() -> tuple:
    """The recordings' and the lesson files' names and modification times: a re-recording or an edit redraws the plan."""
    return tuple(sorted((p.name, p.stat().st_mtime) for p in [*RECORDINGS.glob("*.json"), *LESSONS_DIR.glob("*.md")]))


@st.cache_data(show_spinner=False, max_entries=4)
def _plan(text: str, stamps: tuple) -> str:
    """The plan with a segment per lesson file and its expectations computed from the shipped recordings."""
    return plan_text(text, RECORDINGS, [lesson for lesson in load_lessons(LESSONS_DIR, registry.EXPERIMENTS) if lesson.number >= 0])


# --- the lesson's text ------------------------------------------------------------------------------
def show_lead(lesson, lessons: dict) -> None:
    """The title and the lead; elsewhere than the step-through lesson (the one with a walkthrough), a link to it."""
    st.header(lesson.title)
    st.markdown(lesson.sections.lead)
    walks = [n for n, one in sorted(lessons.items()) if getattr(registry.EXPERIMENTS.get(one.experiment), "walkthrough", None)]
    if walks and lesson.number not in walks:
        n = walks[0]
        st.caption(f"New to the mechanism? [Lesson {n}, one speculative step](?lesson={n}) walks through it stage by stage.")


def show_details(lesson) -> None:
    for heading, text in lesson.sections.details:
        with st.expander(heading):
            st.markdown(text)


def show_sources(lesson) -> None:
    if lesson.sections.sources:
        st.caption("**Sources.** " + lesson.sections.sources)


# --- settings, prediction, result -------------------------------------------------------------------
def draw_settings(experiment: Experiment, raw: dict, notices: list[str]) -> dict:
    """The lesson's knobs, bound to the URL; a link value a knob cannot take gets a notice and the default."""
    if not experiment.knobs:
        return {}
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
def _recording(name: str, mtime: float) -> tuple[dict | None, str | None]:
    """(the checked recording, None) or (None, why it cannot be used). mtime keys the cache to the file."""
    try:
        return registry.load_record(RECORDINGS / f"{name}.json"), None
    except measurement.MeasurementError as exc:
        return None, str(exc)


def load_recording(name: str) -> tuple[dict | None, str | None, object]:
    """(record, problem, the recorded trace of a walkthrough else None)."""
    walk = registry.EXPERIMENTS[name].walkthrough
    if walk is not None:
        return walk.recorded()
    path = RECORDINGS / f"{name}.json"
    return (*_recording(name, path.stat().st_mtime if path.exists() else 0.0), None)


def recorded_label(rec: dict) -> str:
    return f"recorded on {rec['machine']}, {rec['dtype']}, {rec['date']} ({rec['note']})"


def _measure_live(name: str, experiment: Experiment, pair, probe, settings: dict) -> tuple[dict, object]:
    """(the checked measurement, a walkthrough's trace to step through, else None)."""
    if experiment.walkthrough is not None:
        return experiment.walkthrough.live(pair)
    return registry.check_measurement(name, experiment.run(pair, probe, settings)), None


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
                result, trace = _measure_live(name, experiment, pair, probe, settings)
        except EXPERIMENT_ERRORS as exc:
            show_failure("The experiment failed", exc)
            return
    today = dt.date.today().isoformat()
    label = f"measured live on {probe.device_name}, {probe.dtype}, {today}"
    why = live_disturbed(name, result, probe.device_name)
    st.session_state[f"lesson{i}"] = {
        "measurement": result,
        "settings": settings,
        "source": "live",
        "label": label + (f" ({LIVE_DISTURBED}: {why})" if why else ""),  # flagged as a busy recording is
        "trace": trace,
        "machine": probe.device_name,
        "date": today,
    }


def live_disturbed(name: str, m: dict, machine: str) -> str | None:
    """Why a live run's timings are suspect (numbers.disturbed_live: other processes' load during its own timing, its
    rounds' scatter, its probe against the recording's where that was made on this kind of machine), or None."""
    if registry.EXPERIMENTS[name].walkthrough is not None:
        return None  # one step timed once: no rounds to judge
    return numbers.disturbed_live(m, load_recording(name)[0], machine)


def show_against(name: str, experiment: Experiment, result: dict, rec: dict | None) -> None:
    """A live result beside the shipped recording: the key numbers side by side with the machine and date of each, and
    what differs (other settings first), named and explained from what each run measured (app/lessons/kit/against.py)."""
    if result["source"] != "live" or rec is None:
        return
    if experiment.walkthrough is not None:  # lesson 0: one step beside one step, no rounds to compare
        rows, why = against.step_beside(rec, result)
        with st.container(border=True):
            st.markdown("**This live step beside the recorded one**")
            st.dataframe(rows, hide_index=True)
            st.info(why, icon=":material/compare_arrows:")
        return
    p, m = experiment.predict, result["measurement"]
    live = against.side(
        experiment, m, result["settings"], result.get("machine", "this machine"), result.get("date", ""), p.measured(m, result["settings"])
    )
    r = rec["measurement"]
    recorded = against.side(experiment, r, rec["settings"], rec["machine"], rec["date"], p.measured(r, rec["settings"]))
    rows, lines, differs = against.compare(recorded, live, p.unit)
    with st.container(border=True):
        st.markdown("**This live run beside the shipped recording**")
        st.dataframe(rows, hide_index=True)
        text = "\n".join(line if line.startswith("- ") else "\n" + line for line in lines)
        (st.warning if differs else st.info)(text.strip(), icon=":material/compare_arrows:")


def show_claims(experiment: Experiment, m: dict) -> None:
    """The lesson's claims, each checked on the result shown by the one rule (engine/verdict.py), the rule under
    the table in a student's words."""
    if not experiment.claims:
        return
    st.markdown("**The lesson's claims, checked on these numbers**")
    st.table(claim_rows(experiment.claims, m))  # a table, not a grid: the verdicts' words wrap instead of being cut off
    st.caption(verdict.RULE + (" " + verdict.NOT_WORSE_RULE if any(c.expect == 0 for c in experiment.claims) else ""))


def show_prediction(experiment: Experiment, guess, m: dict, s: dict) -> list[dict]:
    p = experiment.predict
    measured = p.measured(m, s)
    rows = prediction_rows(guess, measured, p.models(m, s), p.unit, p.whole)
    st.markdown("**Your guess, the measurement and the models**")
    st.dataframe(rows, hide_index=True)
    line = guess_line(guess, measured, p.unit, p.whole)
    if line:
        st.markdown(line)
    return rows


def experiment_block(i: int, name: str, experiment: Experiment, settings: dict, guess, teacher: bool) -> tuple[dict | None, list]:
    """The run button, the recording, and the result (its figure first, then guess vs measured vs model).
    Returns (the result shown or None, the prediction rows)."""
    rec, rec_problem, rec_trace = load_recording(name)
    rec_fits = rec is not None and rec["settings"] == settings
    waiting = guess is None and not teacher
    if waiting:
        st.caption("Enter your prediction first: the results unlock once you have committed to a number.")
    run_col, rec_col = st.columns([1, 3], vertical_alignment="center")
    label = "↻ Re-measure live" if rec_fits else "▶ Run the experiment live"
    if run_col.button(label, key=f"lesson{i}_run", type="primary", disabled=waiting):
        run_live(i, name, experiment, settings)
    result = st.session_state.get(f"lesson{i}")
    if result is not None and result["settings"] != settings:
        result = None  # measured with other settings: not this experiment
    if rec_problem and rec is None:
        rec_col.warning(f"No usable recording for this lesson: {rec_problem}")
    elif not rec_fits:
        rec_col.caption("The shipped recording used the default settings; run it live for these.")
    if result is None and rec_fits and not waiting:
        result = {"measurement": rec["measurement"], "settings": rec["settings"], "source": "recorded", "label": recorded_label(rec)}
        result["trace"] = rec_trace
    if result is not None:
        icon = "📼" if result["source"] == "recorded" else "⏱"
        box = rec_col.warning if "DISTURBED" in result["label"] else rec_col.info  # a recording marked disturbed
        box(
            f"{icon} These numbers were {result['label']}."
            + (" Press Re-measure live to measure on the machine serving this page." if result["source"] == "recorded" else "")
        )
    if experiment.walkthrough is not None:  # shown before a prediction too, up to the stages that give it away
        trace = result["trace"] if result is not None else rec_trace
        if trace is not None:
            experiment.walkthrough.draw(result, trace, waiting)
        if result is not None:
            show_against(name, experiment, result, rec)
    elif result is not None:
        show.draw(experiment, result["measurement"], result["settings"], label=result["label"])  # its figures carry the label
        show_claims(experiment, result["measurement"])
        show_against(name, experiment, result, rec)
    rows = show_prediction(experiment, guess, result["measurement"], result["settings"]) if result is not None else []
    return result, rows


# --- after the result ----------------------------------------------------------------------------------
def show_worksheet(i: int, lesson, experiment: Experiment, name: str, result: dict, rows: list[dict]) -> None:
    worksheet_button(i, worksheet_page(lesson, experiment, name, result, rows))


def worksheet_page(lesson, experiment: Experiment, name: str, result: dict, rows: list[dict]) -> str:
    """The printable worksheet of a shown result (one HTML page)."""
    m, s = result["measurement"], result["settings"]
    calc_in = experiment.leviathan(m, s) or {}
    calc = hand_calculation(calc_in.get("alpha"), calc_in.get("k"), calc_in.get("c"))
    numbers = experiment.numbers(m, s)
    return worksheet_html(lesson.title, experiment.predict.question.format(**s), rows, numbers, result["label"], calc)


def worksheet_button(i: int, page: str) -> None:
    st.download_button(
        "⬇ Worksheet (printable HTML, one page)",
        page,
        file_name=f"speclab-lesson{i}-worksheet.html",
        mime="text/html",
        key=f"l{i}_worksheet",
    )


# --- the GPU panel --------------------------------------------------------------------------------
@st.cache_data(show_spinner=False)
def _gpu_curves() -> tuple[list, list[str]]:
    return h200.recorded_curves()


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
    recorded H200 pass costs (`result`: the result the page shows, live or recorded; app/views/h200.py), the recorded
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
            passes = gpu.lesson_passes(record, settings)
            marks = sorted({b * n for _, b, n in passes})
            show.show_chart(gpu.curves_figure(curves, marks), key + "curves")
            serving = any(what.endswith(gpu.SERVING_TAG) for what, _, _ in passes)
            dotted = " Dotted lines: the tokens per pass of this lesson's passes" + (
                f", and of the same passes at a serving batch of {gpu.SERVING_BATCH} rows. " if serving else ". "
            )
            st.caption(gpu.CAN_SHOW + dotted + h200.knee_sentence(curves))
        st.markdown("**Model, not a measurement** (the roofline Predictor at this lesson's settings)")
        show.show_chart(gpu.model_figure(record, settings), key + "model")
        show.show_table(gpu.model_rows(record, settings))
        st.caption(
            gpu.model_label() + ". The line is one row carrying more tokens; the diamonds are this lesson's passes "
            "(more rows also read more KV cache). Data-sheet peaks are not reached by real kernels, so real passes "
            "take longer."
        )
        st.markdown(gpu.kv_sentence(depth=depth))
        cited = gpu.cited_rows(record)
        if cited:
            st.markdown("**Published** (acceptance depends on a trained drafter and real text, which random weights cannot show)")
            show.show_table(cited)


def _retimed(record, result: dict, key: str) -> None:
    """The lesson's own run (live or recorded) beside the same steps re-timed with the recorded H200 pass costs."""
    m, label = result.get("measurement") or {}, str(result.get("label") or "")
    if record.walkthrough is not None:  # one step, not a run of decoding lanes: nothing to re-time
        st.caption(
            "This lesson times one speculative step, not a run, so there is no run to re-time on the H200: its passes "
            "(one token, and the verify pass's k + 1) are marked on the H200's measured curves below."
        )
        return
    if record.retimed is not None:  # a lesson of passes, not of decoding lanes: its own view, its own heading
        record.retimed(m, label, key, load_recording(record.name)[0])
        return
    st.markdown(f"**Your run on an H200** ({h200.LABEL})")
    fig = h200.figure(m, label)
    if fig is None:
        recorded = result["source"] == "recorded" if "source" in result else None  # else the label says
        st.caption(h200.why_not(m, label, recorded))  # exactly why: what the run did not keep, or what failed
        return
    show.show_chart(fig, key + "retimed")
    show.show_table(h200.rows(m))
    st.caption(" ".join([h200.machine_line() + ".", h200.CAPTION, h200.RULE_RATIO, *h200.drafting_lines(m)]))
    lines = record.gpu_lines(m)  # what the lesson's run trades on the H200, from the priced numbers (lesson 5)
    if lines:
        st.markdown("\n\n".join(lines))
