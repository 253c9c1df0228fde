"""Lessons page (AppTest): deep links, predict-then-run gating, teacher-mode recordings for every lesson, check
questions, the worksheet download, the step-through, and live runs of the real embedded pair at small settings.

The recorded results make most of these instant: the page loads the model only for a live run."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.lessons import registry
from app.lessons.registry import EXPERIMENTS

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402
from streamlit.testing.v1.errors import AppTestError  # noqa: E402

from app.common import measurement  # noqa: E402
from app.lessons import l1_memory_bound
from app.lessons.kit.texts import load_lessons

ROOT = Path(__file__).resolve().parents[2]
LESSONS = load_lessons(ROOT / "lessons", EXPERIMENTS)


def _app(**query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=300)
    for key, value in query.items():
        at.query_params[key] = value
    at.switch_page("lessons/lessons.py")
    return at.run()


def _texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def _prediction_table(at: AppTest):
    return next(d.value for d in at.dataframe if "what" in d.value.columns)


def _clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert "Traceback" not in _texts(at.markdown) + _texts(at.error)


def test_deep_link_opens_the_lesson_with_its_settings():
    at = _app(lesson="3", l3_batch="8", l3_depth="2")
    _clean(at)
    assert at.selectbox(key="lesson_pick").value == 3
    assert at.select_slider(key="l3_batch").value == 8 and at.select_slider(key="l3_depth").value == 2
    assert at.query_params["lesson"] == "3"
    assert "Batching and speculating fill the same idle compute" in at.selectbox(key="lesson_pick").format_func(3)
    assert not at.warning  # every value in the link was used
    # changing lesson moves the link with it
    at.selectbox(key="lesson_pick").set_value(5).run()
    _clean(at)
    assert at.query_params["lesson"] == "5" and at.select_slider(key="l5_conf").value == 0.3


@pytest.mark.parametrize(
    "query, notice",
    [
        ({"lesson": "99"}, "lesson `99`, which does not exist"),
        ({"lesson": "-1"}, "lesson `-1`"),
        ({"lesson": "<script>alert(1)</script>"}, "which does not exist"),
        ({"lesson": "²"}, "lesson `²`, which does not exist"),  # a digit to str.isdigit, not to int()
        ({"lesson": "٣"}, "lesson `٣`, which does not exist"),  # int() reads it as 3: the notice and the page must agree
        ({"lesson": "9" * 5000}, "which does not exist"),  # past int()'s 4,300 digits
        ({"lesson": "1", "l1_context": "1e309"}, "**Context already in the KV cache (tokens)** the value `1e309`"),
        ({"lesson": "2", "l2_depth": "`**x**`\n"}, "**Speculation depth k** the value `'**x**'`"),
        ({"lesson": "1", "teacher": "banana"}, "**Teacher mode** the value `banana`, which this page cannot use; it uses `off`"),
    ],
)
def test_hostile_links_fall_back_with_a_visible_notice(query, notice):
    at = _app(**query)
    _clean(at)
    assert notice in _texts(at.warning)
    lesson = int(query["lesson"]) if query["lesson"] in ("1", "2") else 0  # a bad link: the first lesson, 0
    assert at.selectbox(key="lesson_pick").value == lesson
    knobs = EXPERIMENTS[LESSONS[lesson].experiment].knobs
    assert all(at.select_slider(key=k.key).value == k.default for k in knobs)  # the defaults are used


def test_lessons_are_numbered_by_their_files_and_old_links_keep_their_lessons():
    assert [lesson.number for lesson in LESSONS] == list(range(len(LESSONS)))  # LESSONS[n] is lesson n
    at = _app(lesson="1")
    _clean(at)
    assert at.selectbox(key="lesson_pick").value == 1
    assert at.selectbox(key="lesson_pick").options == [lesson.title for lesson in LESSONS]
    assert at.selectbox(key="lesson_pick").options[0] == "0 · One speculative step"
    assert "One token per pass leaves the arithmetic idle" in at.header[0].value


@pytest.mark.parametrize("lesson", range(len(LESSONS)))
def test_each_lesson_waits_for_a_prediction_then_shows_its_recording(lesson):
    """Before a guess: Run is disabled and no result is shown. After: the shipped recording (labelled with its
    machine and date) appears at once, beside Re-measure live, with guess vs measured vs model and the worksheet."""
    at = _app(lesson=str(lesson))
    _clean(at)
    run = at.button(key=f"lesson{lesson}_run")
    assert run.disabled and "Enter your prediction first" in _texts(at.caption)
    with pytest.raises(AppTestError, match="disabled"):
        run.click()
    assert not at.success and not at.get("download_button")
    predict = EXPERIMENTS[LESSONS[lesson].experiment].predict
    guess = 2 if predict.whole else 1.5  # a count (lesson 0's accepted drafts) takes whole numbers
    at.number_input(key=f"l{lesson}_guess").set_value(guess).run()
    _clean(at)
    assert not at.button(key=f"lesson{lesson}_run").disabled
    assert at.button(key=f"lesson{lesson}_run").label == "↻ Re-measure live"
    info = _texts(at.info) + _texts(at.warning)  # a recording marked DISTURBED is shown as a warning
    assert "These numbers were recorded on" in info and "2026-" in info and any(w in info for w in ("noisy", "DISTURBED", "load average"))
    assert at.success  # the conclusion, computed from the recorded measurement
    table = _prediction_table(at)
    assert list(table["what"])[:2] == ["your guess", "measured"] and len(table) >= 3  # at least one model
    said = f"{guess:.0f}" if predict.whole else f"{guess:.2f}"  # a count written as one
    assert list(table["value"])[0] == f"{said}{predict.unit}"
    assert f"You guessed {said}{predict.unit}" in _texts(at.markdown)
    assert at.get("download_button")  # the worksheet


def test_teacher_mode_shows_recordings_without_a_prediction():
    at = _app(lesson="4", teacher="true")
    _clean(at)
    assert at.toggle(key="teacher").value
    assert "recorded on" in _texts(at.warning) + _texts(at.info) and at.success
    assert not at.button(key="lesson4_run").disabled
    assert list(_prediction_table(at)["value"])[0] == "—"  # no guess entered


def test_changed_settings_leave_the_recording_for_a_live_run():
    at = _app(lesson="3", l3_batch="8", teacher="true")
    _clean(at)
    assert "recorded on" not in _texts(at.info) + _texts(at.warning) and not at.success
    assert "The shipped recording used the default settings" in _texts(at.caption)
    assert at.button(key="lesson3_run").label == "▶ Run the experiment live"


def test_check_questions_give_feedback():
    at = _app(lesson="2")
    _clean(at)
    checks = LESSONS[2].checks  # LESSONS[n] is lesson n
    assert len(checks) == 3 and all(at.radio(key=f"l2_check{j}").value is None for j in (1, 2, 3))
    at.radio(key="l2_check1").set_value(checks[0].answer).run()
    assert "Right. " + checks[0].explain in _texts(at.success)
    wrong = next(i for i in range(len(checks[1].options)) if i != checks[1].answer)
    at.radio(key="l2_check2").set_value(wrong).run()
    assert f"Not quite: the answer is “{checks[1].options[checks[1].answer]}”" in _texts(at.error)


def test_glossary_is_in_the_sidebar_of_every_page():
    at = _app(lesson="1")
    glossary = next(e for e in at.sidebar.expander if "Glossary" in e.label)
    text = _texts(glossary.markdown)
    for term in (
        "α (per-token acceptance)",
        "Acceptance rate",
        "c (cost coefficient)",
        "Tokens per pass",
        "Arithmetic intensity",
        "Ridge point",
        "overhead-bound",
        "MBU / MFU",
    ):
        assert term in text, term


def test_lesson_0_steps_through_one_step_and_waits_for_a_prediction_before_the_acceptance():
    """Lesson 0: the recorded step, one stage at a time (picture, text, the engine's code); draft and verify are
    open before a prediction, what the target kept (stages 3-5) and the figure only after one."""
    at = _app(lesson="0")
    _clean(at)
    assert "**1 · draft**" in _texts(at.markdown) and "**2 · verify in one pass**" not in _texts(at.markdown)
    assert "# 1. draft" in _texts(at.code) and "def propose" in _texts(at.code)
    assert at.button(key="step0_prev").disabled
    at.button(key="step0_next").click().run()
    _clean(at)
    assert "**2 · verify in one pass**" in _texts(at.markdown) and "**1 · draft**" not in _texts(at.markdown)
    assert at.button(key="step0_next").disabled and "Enter your prediction above" in _texts(at.caption)
    assert not [c for c in at.get("plotly_chart") if c.key == "lesson0_fig"] and not at.success
    at.number_input(key="l0_guess").set_value(2.0).run()
    _clean(at)
    for title in ("3 · accept the longest prefix", "4 · correction or bonus", "5 · roll back the KV cache"):
        at.button(key="step0_next").click().run()
        _clean(at)
        assert f"**{title}**" in _texts(at.markdown)
    assert at.button(key="step0_next").disabled and not at.button(key="step0_prev").disabled
    assert "def keep(self, new_lengths" in _texts(at.code) and "RaggedCache.keep marks them as holes" in _texts(at.text)
    assert [c for c in at.get("plotly_chart") if c.key == "lesson0_fig"]  # plain decoding beside the step
    assert "The target kept 3 of 4 drafts" in _texts(at.success)
    table = _prediction_table(at)
    assert list(table["value"])[:2] == ["2 drafts", "3 drafts"]  # counts, written as counts
    at.button(key="step0_prev").click().run()
    assert "**4 · correction or bonus**" in _texts(at.markdown)


def test_every_lesson_reads_in_order_with_its_gpu_panel_details_and_sources():
    """Teacher mode, every lesson: lead, result, the GPU panel's text, the other sections as collapsed expanders,
    the checks and the sources; lessons 1-7 link back to lesson 0 and keep no step-through (but lesson 7's tree)."""
    for lesson in LESSONS:
        at = _app(lesson=str(lesson.number), teacher="true")
        _clean(at)
        sections = lesson.sections
        text = _texts(at.markdown)
        assert sections.lead.splitlines()[0] in text and sections.gpu.splitlines()[0] in text
        assert "On a GPU" in _texts(at.subheader)
        labels = [e.label for e in at.main.expander]
        assert [h for h, _ in sections.details] == [x for x in labels if x in dict(sections.details)]
        assert "Sources." in _texts(at.caption)
        linked = "](?lesson=0) walks through it stage by stage" in _texts(at.caption)
        assert linked == (lesson.number != 0)
        tree = [x for x in labels if "draft-tree step" in x]
        assert bool(tree) == (lesson.experiment == "width")


def test_the_teacher_plan_opens_at_the_top_in_teacher_mode():
    at = _app(lesson="2")
    plan = next(e for e in at.main.expander if "For the teacher" in e.label)
    assert not plan.proto.expanded
    at = _app(lesson="2", teacher="true")
    plan = next(e for e in at.main.expander if "For the teacher" in e.label)
    assert plan.proto.expanded and "50" in _texts(plan.markdown)


def test_step_through_a_draft_tree_step_in_lesson_7():
    at = _app(lesson="7")
    _clean(at)
    text, codes = _texts(at.markdown), _texts(at.code)
    for title in ("1 · draft a tree", "3 · accept the longest matching path", "5 · roll back to the path"):
        assert f"**{title}**" in text
    assert "def keep_path(self" in codes and "def accept_tree_greedy(" in codes and "def grow_tree" in codes
    assert "RaggedCache.keep_path copies" in _texts(at.text)


@pytest.mark.slow
def test_live_runs_at_small_settings():
    """Lesson 1 (passes of 1..16 tokens) and lesson 2 (depth 1, 16 tokens, with Barrow's two passes) run live on
    the real embedded pair; their measurements replace the recording and are labelled live."""
    at = _app(lesson="1", l1_context="64", l1_largest="16")
    _clean(at)
    at.number_input(key="l1_guess").set_value(2.0).run()
    at.button(key="lesson1_run").click().run()
    _clean(at)
    assert not at.error
    result = at.session_state["lesson1"]
    assert result["source"] == "live" and [r["tokens_per_pass"] for r in result["measurement"]["rows"]] == [1, 2, 4, 8, 16]
    assert "These numbers were measured live on" in _texts(at.info) + _texts(at.warning)  # warning: a busy machine
    said = re.search(
        r"One token: [\d.]+ ms; (\d+) tokens \(the measured pass nearest four times the room\): "
        r"[\d.]+ ms \(medians\)\. Round by round the \d+-token pass took [\d.]+× the time for (\d+)× the tokens",
        _texts(at.success),
    )
    assert said and said[1] == said[2] and int(said[1]) in (1, 2, 4, 8, 16)  # the pass past this run's room, whichever it was
    assert "roofline from the probed peaks" in " ".join(_prediction_table(at)["what"])

    at.selectbox(key="lesson_pick").set_value(2).run()
    at.select_slider(key="l2_depth").set_value(1).run()
    at.select_slider(key="l2_tokens").set_value(16).run()
    at.number_input(key="l2_guess").set_value(1.1).run()
    at.button(key="lesson2_run").click().run()
    _clean(at)
    m = at.session_state["lesson2"]["measurement"]
    passes = m["seed"]["passes"]
    assert [(p["batch"], p["new_tokens"]) for p in passes] == [(2, 1), (1, 2)]  # Barrow's example at k = 1
    assert all(len(p["times_ms"]) == 3 for p in passes)  # timed back to back, three rounds alternating
    assert passes[0]["weight_bytes"] == passes[1]["weight_bytes"] and passes[0]["kv_bytes"] > passes[1]["kv_bytes"]
    assert m["m"]["flops_ratio"] >= 1.0
    assert "Both passes carry 2 tokens" in _texts(at.info)


@pytest.mark.slow
def test_lesson_8_times_passes_over_a_short_and_a_long_cache_live():
    """Lesson 8 live at small settings (batch 4, k = 1, a 1,024-token cache): a one-token and a 2-token pass per row
    over 256 and 1,024 tokens of cache, every round kept; its claims are judged on the run shown."""
    at = _app(lesson="8", l8_context="1024", l8_batch="4", l8_k="1")
    _clean(at)
    at.number_input(key="l8_guess").set_value(1.5).run()
    at.button(key="lesson8_run").click().run()
    _clean(at)
    assert not at.error
    m = at.session_state["lesson8"]["measurement"]
    assert sorted((r["context"], r["new_tokens"], r["batch"]) for r in m["rows"]) == [(256, 1, 4), (256, 2, 4), (1024, 1, 4), (1024, 2, 4)]
    assert all(len(r["ms_runs"]["values"]) == 5 for r in m["rows"])
    verify = [r for r in m["rows"] if r["new_tokens"] == 2]
    assert all(len(r["over_one_runs"]["values"]) == 5 for r in verify)
    assert "These numbers were measured live on" in _texts(at.info) + _texts(at.warning)
    assert "a one-token pass over 1024" in _texts(at.success) or "over 1024" in _texts(at.success)


@pytest.mark.slow
def test_lesson_0_re_measures_one_step_live():
    """Re-measure live: one real speculative step (and plain decoding of the same prompt) on the embedded pair,
    under the run lock; the step-through then steps through the live trace, labelled live."""
    at = _app(lesson="0")
    at.number_input(key="l0_guess").set_value(2.0).run()
    at.button(key="lesson0_run").click().run()
    _clean(at)
    result = at.session_state["lesson0"]
    assert result["source"] == "live" and result["trace"] is not None
    m = result["measurement"]
    assert m["plain_step_ms"] is not None and "plain decoding of the same prompt" in m["plain_source"]
    assert m["step"] == result["trace"].steps[m["step"]].index and m["k"] == 4
    assert "These numbers were measured live on" in _texts(at.info) and "measured live on" in _texts(at.caption)
    assert f"The target kept {m['accepted']} of 4 drafts" in _texts(at.success)
    # beside the recorded step: both steps' numbers with machine and date, and why one step differs from another
    assert "This live step beside the recorded one" in _texts(at.markdown) and "One step is one draw" in _texts(at.info)
    table = next(d.value for d in at.dataframe if "number" in d.value.columns)
    by = {row["number"]: row for _, row in table.iterrows()}
    assert by["drafts the target kept"]["live"] == f"{m['accepted']} of 4" and by["machine"]["live"] == result["machine"]
    assert by["drafts the target kept"]["recorded"].endswith(" of 4") and by["date"]["recorded"]


@pytest.mark.slow
def test_a_live_run_is_drawn_beside_its_recording():
    """Lesson 1 live at the recording's own settings: a side-by-side table of its key numbers, recorded and live, with
    the machine and date of each, and a sentence on the prediction's answer made from the two numbers it states."""
    at = _app(lesson="1", teacher="true")
    at.button(key="lesson1_run").click().run()
    _clean(at)
    rec = registry.load_record(ROOT / "assets" / "lessons" / "memory_bound.json")
    result = at.session_state["lesson1"]
    assert result["source"] == "live" and result["settings"] == rec["settings"]
    assert "This live run beside the shipped recording" in _texts(at.markdown)
    table = next(d.value for d in at.dataframe if "number" in d.value.columns)
    by = {row["number"]: row for _, row in table.iterrows()}
    assert (by["machine"]["recorded"], by["date"]["recorded"]) == (rec["machine"], rec["date"])
    assert (by["machine"]["live"], by["date"]["live"]) == (result["machine"], dt.date.today().isoformat())
    predict = EXPERIMENTS["memory_bound"].predict
    was, now = (predict.measured(r["measurement"], r["settings"]) for r in (rec, result))
    assert by["the prediction's measured answer"]["live"] == f"{now:.2f}×"
    words = _texts(at.info) + _texts(at.warning)
    moved = f"moved from {was:.2f}× recorded to {now:.2f}× live" in words
    assert moved or f"The prediction's answer, {now:.2f}× live, is within 15% of the recording's {was:.2f}×" in words
    if moved:  # a moved answer is explained from the measured conditions, or said to be unexplained by them
        assert "What differed between the two runs, as measured:" in words or "run-to-run variation" in words


@pytest.mark.slow
def test_a_live_run_beside_a_busy_process_is_flagged_as_a_busy_recording_is(monkeypatch):
    """A real busy loop in a subprocess (bounded, ended by the test) while lesson 1 runs live: the run records the
    other processes' load during its own passes, and its label box is a DISTURBED warning, as a busy recording's is."""

    monkeypatch.setattr(l1_memory_bound, "PASS_ROUNDS", 2)
    at = _app(lesson="1", l1_context="64", l1_largest="16")
    at.number_input(key="l1_guess").set_value(2.0).run()
    loop = "import time\nend = time.time() + 90\nwhile time.time() < end:\n    pass\n"
    busy = subprocess.Popen([sys.executable, "-c", loop])
    try:
        time.sleep(0.3)  # the loop is running before the first timed pass
        at.button(key="lesson1_run").click().run()
    finally:
        busy.kill()
        busy.wait()
    _clean(at)
    result = at.session_state["lesson1"]
    other = result["measurement"]["other_cores"]
    assert other > measurement.BUSY_CORES
    assert f"DISTURBED: measured beside other work, timings noisy: other processes kept {other:.2f} cores busy" in result["label"]
    assert "These numbers were measured live on" in _texts(at.warning) and "DISTURBED" in _texts(at.warning)
    assert "These numbers were measured live on" not in _texts(at.info)


def test_a_count_is_predicted_as_a_whole_number():
    """Lesson 0 asks how many of k drafts the target accepts: its box steps by 1 and shows no decimals; the page, not the
    browser, checks the number, so 2.5 is refused in one line (a whole-number box cut it to 2 and read "1e9" as 1)."""
    at = _app(lesson="0")
    box = at.number_input(key="l0_guess")
    assert box.step == 1 and box.format == "%g" and box.min is None and box.max is None  # no browser range error
    at.number_input(key="l0_guess").set_value(3).run()
    assert at.number_input(key="l0_guess").value == 3 and not at.warning
    at.number_input(key="l0_guess").set_value(2.5).run()
    assert [w.value for w in at.warning] == ["This prediction counts something, so it is a whole number; 2.5 was not taken."]
    assert "Enter your prediction first" in _texts(at.caption)  # nothing unlocked by a number not taken


@pytest.mark.parametrize("value, said", [(1e9, "1e+09 was not taken"), (-1.0, "-1 was not taken"), (1000.5, "1000.5 was not taken")])
def test_a_prediction_out_of_range_is_one_line_and_not_taken(value, said):
    at = _app(lesson="2")
    at.number_input(key="l2_guess").set_value(value).run()
    assert not at.exception
    assert [w.value for w in at.warning] == [f"A prediction lies between 0 and 1000; {said}."]
    assert "Enter your prediction first" in _texts(at.caption)
