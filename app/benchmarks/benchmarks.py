"""Benchmarks: speculative decoding by task, as the field measures it (Spec-Bench), and by batch, the axis it leaves out.

Page shape (docs/design.md §7): title, short prose, controls, the recorded picture first (the leaderboard as a heat map,
the speedup against the batch), the numbers under it, what they show; folded under it, Spec-Bench's own GPU
leaderboard (cited: assets/spec_bench/leaderboard.json, app/benchmarks/cited.py) beside the recording at batch 1; then
a form that runs one task live on a few prompts under the app's run lock, drawn beside the recording's cells for the
same task and batch. The recording is assets/spec_bench/recording.json (scripts/record/record_tasks.py), labelled
with its machine and date; every verdict is the one rule's (engine/verdict.py), judged again from the rounds when the file is read.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import streamlit as st

from app.benchmarks import cited
from app.common import resources
from app.common.page_helpers import link_notices, load_pair_or_error, show_failure
from app.common.url_keys import bound
from app.views import benchmarks as view
from app.views import benchmarks_cited
from engine import ConfigError, verdict
from engine.bench import task_records
from engine.bench.prompt_files import SPEC_BENCH, PromptFileError, read_prompts, select, task_name, tasks
from engine.bench.tasks import CONTENDERS, run_tasks
from engine.drafters import available_drafters

RECORDING = Path(__file__).resolve().parents[2] / "assets" / "spec_bench" / "recording.json"


PAGE = "benchmarks"  # its bound widgets and their labels: app/common/url_keys.py


SPEC_BENCH_URL = "https://github.com/hemingkx/Spec-Bench"


RUN_ERRORS = (ConfigError, ValueError, OSError, RuntimeError)


LIVE_BATCHES, LIVE_TOKENS = (1, 4), (16, 32)  # a live run stays short on two cores
LIVE_ROUNDS = (3, 5)  # two rounds gave 95% ranges like 0.03-29x (Student's t of 12.7): the rule could never speak


@st.cache_data(show_spinner=False)
def _recording(mtime: float) -> tuple[dict | None, str | None]:
    try:
        return task_records.load(RECORDING), None
    except task_records.TaskRecordingError as exc:
        return None, str(exc)


@st.cache_data(show_spinner=False)
def _spec_bench() -> list:
    return read_prompts(SPEC_BENCH)


def recording() -> tuple[dict | None, str | None]:
    return _recording(RECORDING.stat().st_mtime if RECORDING.exists() else 0.0)


def label_of(rec: dict) -> str:
    """Where, when and how the recording was made; flagged as a busy lesson recording is where other work ran."""
    s, busy = rec["settings"], view.disturbed_note(rec["rows"])
    prompts = f"{s.get('per_task')} prompt{'s' if s.get('per_task') != 1 else ''}"
    return (
        f"recorded on {rec['machine']}, {rec['dtype']}, {rec['date']} ({s.get('note', '')}): {prompts} per task, "
        f"{s.get('max_new_tokens')} new tokens, {s.get('rounds')} interleaved rounds, {rec['seconds'] / 60:.0f} min"
    ) + (f" ({busy})" if busy else "")


def show_recorded(rec: dict, raw: dict) -> None:
    rows = rec["rows"]
    batches, names = view.batches_of(rows), view.contenders_of(rows)
    c1, c2 = st.columns([2, 3])
    batch = c1.select_slider("Batch", batches, value=batches[0], **bound(PAGE, "batch"), help="Rows decoded together in each pass.")
    contender = c2.selectbox("Drafter in the batch chart", names, **bound(PAGE, "contender"))
    for notice in link_notices(PAGE, raw) if raw else []:
        st.warning(notice, icon=":material/link_off:")
    label = label_of(rec)
    if view.disturbed_note(rows):
        st.warning(f"This recording is {view.disturbed_note(rows)}.", icon=":material/warning:")
    st.plotly_chart(view.leaderboard_figure(rows, batch, label), width="stretch", key="bench_board")
    st.dataframe(view.leaderboard_rows(rows, batch), hide_index=True)
    with st.expander("Every cell in full: its 95% range, rounds, and the whole run's speedup (prefill included)"):
        st.dataframe(view.range_rows(rows, batch), hide_index=True)
    st.caption(verdict.RULE + " τ: tokens a row gains per target pass (1.00 for plain decoding).")
    st.markdown("\n".join(f"- {line}" for line in view.findings(rows, batch)))
    st.plotly_chart(view.batch_figure(rows, contender, label), width="stretch", key="bench_batch")
    chosen = "; ".join(f"{task_name(t)}: {', '.join(q)}" for t, q in rec["prompts"].items())
    st.caption(f"The recorded prompts (Spec-Bench question ids, first turn each): {chosen}.")


@st.cache_data(show_spinner=False)
def _cited(path: str, mtime: float) -> tuple[dict | None, str | None]:
    try:
        return cited.load(Path(path)), None
    except cited.CitedError as exc:
        return None, str(exc)


def show_cited(rec: dict) -> None:
    """Spec-Bench's own leaderboard on a GPU (cited, never measured here) beside this recording at batch 1, folded."""
    path = cited.LEADERBOARD
    board, problem = _cited(str(path), path.stat().st_mtime if path.exists() else 0.0)
    if board is None:
        st.warning(f"The cited GPU leaderboard cannot be shown: {problem}")
        return
    matched = benchmarks_cited.pairs(board, rec["rows"])
    if not matched:
        return
    with st.expander(f"On a GPU: Spec-Bench's own leaderboard ({board['device']}, {board['model']}; cited, not measured here)"):
        gpu = f"GPU, cited: {board['model']}, {board['device'].removeprefix('one ')}"
        cpu = f"CPU, recorded: SmolLM2-135M, {rec['machine']}, {rec['date']}"
        s = rec["settings"]
        label = f"{cited.label(board)}; recorded: {rec['machine']}, {rec['dtype']}, {rec['date']}, {s.get('per_task')} prompts a task"
        st.plotly_chart(benchmarks_cited.figure(matched, gpu, cpu, label), width="stretch", key="bench_cited")
        st.dataframe(benchmarks_cited.table(matched), hide_index=True)
        st.markdown("\n".join(f"- {line}" for line in benchmarks_cited.findings(matched)))
        st.caption(
            f"Source: [{board['source']['title']}]({board['source']['url']}) ({board['source']['license']}): "
            f"{board['settings']}; {board['timing']}, where the recording's speedups are of decoding alone; "
            + "; ".join(f"{m['method']}: {m['about']}" for m in board["methods"])
            + ". Two things differ between the machines: how many drafted tokens a verify pass takes for about the "
            "price of one (this machine's room: Lesson 1; a GPU's: the Predictor, a model), and how often the drafts "
            "are kept (τ), which depends on the target, its drafter and the text. A GPU's speedup is never a CPU's."
        )


def live_form(rec: dict | None) -> None:
    st.subheader("Run one task live")
    prompts = _spec_bench()
    with st.form("bench_live"):
        c1, c2, c3, c4, c5 = st.columns(5)
        task = c1.selectbox("Task", tasks(prompts), format_func=task_name)
        n = c2.select_slider("Prompts", (1, 2, 3), value=2)
        batch = c3.select_slider("Batch", LIVE_BATCHES, value=1)
        tokens = c4.select_slider("New tokens", LIVE_TOKENS, value=16)
        rounds = c5.select_slider("Rounds", LIVE_ROUNDS, value=LIVE_ROUNDS[0], help="Interleaved rounds: more rounds, a narrower range")
        shown = ["ngram", "eagle", "ngram_eagle"]  # the lookup, the head, and the two taken together
        keys = st.multiselect("Drafters", list(CONTENDERS), default=shown, format_func=lambda k: CONTENDERS[k].name)
        pressed = st.form_submit_button("▶ Run live", type="primary")
    if not pressed:
        return
    if not keys:
        st.warning("Choose at least one drafter to set against plain decoding.")
        return
    loaded = load_pair_or_error("embedded", "auto", with_probe=True)
    if loaded is None:
        return
    pair, probe = loaded
    missing = [k for k in keys if CONTENDERS[k].spec["drafter"] not in available_drafters(pair)]
    if missing:
        st.warning(f"This pair cannot draft with {', '.join(CONTENDERS[k].name for k in missing)}.")
        return
    chosen = select(prompts, task=task, per_task=n)
    with resources.model_turn(st.empty()):
        try:
            with st.spinner("Measuring…"):
                rows = run_tasks(pair, chosen, [batch], keys, tokens, rounds, log=lambda _: None)
        except (*RUN_ERRORS, PromptFileError) as exc:
            show_failure("The live run failed", exc)
            return
    today = dt.date.today().isoformat()
    several = "s" if n != 1 else ""
    label = f"measured live on {probe.device_name}, {probe.dtype}, {today}: {n} prompt{several}, {tokens} new tokens, {rounds} rounds"
    busy = view.disturbed_note(rows)
    label += f" ({busy})" if busy else ""
    st.plotly_chart(view.leaderboard_figure(rows, batch, label), width="stretch", key="bench_live")
    st.dataframe(view.range_rows(rows, batch), hide_index=True)
    if rec is not None:
        st.markdown("**Beside the recording**")
        st.dataframe(view.beside_rows(rows, rec["rows"], task, batch), hide_index=True)
        st.caption(view.beside_note(rec, probe.device_name, n, tokens))


st.title("📊 Benchmarks")
st.markdown(
    "How much speculation pays depends on the **task** as much as on the machine: n-gram lookup drafts by copying "
    "text it has already seen, so its drafts can only be accepted where the answer repeats what came before (a "
    "summary quoting its article, an answer quoting retrieved passages); a learnt drafter is only as good as the text "
    "it was trained on. "
    f"[Spec-Bench]({SPEC_BENCH_URL}) (Xia et al., Findings of ACL 2024) is the field's reference: 480 prompts in six "
    "tasks, scored by the speedup over plain decoding and by **τ**, the mean tokens a sequence gains per target pass. "
    "It measures batch 1 only; here every task is also measured at larger batches, where a pass has less idle "
    "compute for drafts to fill. Speedups are of decoding alone (prefill apart), over interleaved rounds."
)
raw = st.query_params.to_dict() if "bench_seen" not in st.session_state else {}
st.session_state["bench_seen"] = True
rec, problem = recording()
if rec is None:
    st.warning(f"No usable Spec-Bench recording: {problem}. Run `python scripts/record/record_tasks.py` to make one.")
else:
    show_recorded(rec, raw)
    show_cited(rec)
live_form(rec)
st.caption(
    "Sources: Spec-Bench's prompts (assets/spec_bench/, Apache-2.0); Leviathan et al. 2023 for the speedup model; "
    "vLLM reports τ as `mean_acceptance_length` (1 + accepted ÷ drafting steps)."
)
