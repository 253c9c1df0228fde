"""Replay: play back a recorded AR + speculative trace pair, anywhere, without running a model.

Page shape (docs/design.md §7, Streamlit's demos): title, short prose, controls, result. The traces come from the Playground's
"Download the traces" (or `python -m engine run --json`), or from the sample pairs shipped in
assets/traces/ (scripts/record/record_sample_traces.py). Parsing goes through `engine.Trace`, which refuses
malformed or unknown files with a TraceError; drawing is app/common/results.py, shared with the Playground.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import streamlit as st

from app.common import resources
from app.common.page_helpers import last_resort
from app.common.results import Peaks, gauge_name, show_results
from app.common.stepthrough_panel import draw_stages
from app.views import stepthrough
from app.views.safe import md_escape, md_text
from engine import Trace, TraceError
from engine.roofline.device_recordings import RecordingError, list_recordings, race_label, recordings_note

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "assets" / "traces"
SAMPLE, UPLOAD, RECORDED = "A shipped sample", "Upload your own traces", "A GPU recording"


# --- parsing and checking (plain functions: no st.*) -------------------------------------------
def load_index() -> list[dict]:
    """The shipped sample pairs (assets/traces/index.json); [] when none are shipped."""
    try:
        return list(json.loads((TRACES / "index.json").read_text(encoding="utf-8"))["pairs"])
    except (OSError, ValueError, KeyError, TypeError):
        return []


def check_pair(first: Trace, second: Trace) -> tuple[Trace, Trace]:
    """Return (ar, spec): one autoregressive and one speculative trace that decoded the same prompts."""
    modes = sorted(str(t.config.get("mode")) for t in (first, second))
    if modes != ["autoregressive", "speculative"]:
        raise TraceError(
            f"Replay needs one autoregressive and one speculative trace; these are {modes[0]} and {modes[1]}. "
            "Fix: upload the AR trace and the speculative trace of the same Playground run."
        )
    ar, spec = (first, second) if first.config.get("mode") == "autoregressive" else (second, first)
    ar_prompts = [s.get("prompt") for s in ar.sequences]
    spec_prompts = [s.get("prompt") for s in spec.sequences]
    if ar_prompts != spec_prompts:
        raise TraceError(
            f"The two traces decoded different prompts ({len(ar_prompts)} vs {len(spec_prompts)} sequences"
            + (", first prompts differ" if ar_prompts[:1] != spec_prompts[:1] else "")
            + "), so their race would compare unlike work. Fix: upload the two traces of the same run."
        )
    return ar, spec


def parse_pair(ar_raw: bytes, spec_raw: bytes) -> tuple[Trace, Trace]:
    """Parse two uploaded files and check that they form a pair; TraceError names what is wrong."""
    traces = []
    for label, raw in (("AR trace", ar_raw), ("speculative trace", spec_raw)):
        try:
            traces.append(Trace.from_json_bytes(raw))
        except TraceError as exc:
            raise TraceError(f"The {label} file was refused: {exc}") from None
    return check_pair(*traces)


def load_sample(entry: dict) -> tuple[Trace, Trace]:
    return check_pair(Trace.from_json(TRACES / entry["ar"]), Trace.from_json(TRACES / entry["spec"]))


def recorded_on(trace: Trace) -> str:
    """'recorded on <machine> (<device>, <dtype>), <date>' from the trace's own meta, its strings shown as text."""
    meta = trace.meta
    machine = meta.get("device_name") or (meta.get("probe") or {}).get("device_name")
    detail = ", ".join(x for x in (meta.get("device"), trace.summary.get("dtype") or meta.get("dtype")) if x)
    date = str(meta.get("recorded_at") or "")[:10]
    date = date if re.fullmatch(r"\d{4}-\d{2}-\d{2}", date) else ""
    return (
        f"recorded on **{md_text(machine) if machine else 'an unknown machine'}**"
        + (f" ({md_text(detail)})" if detail else "")
        + (f", {date}" if date else "")
    )


def error_text(exc: Exception) -> str:
    """A refusal as one line of Markdown-escaped text: trace values inside it are never rendered."""
    return md_escape(exc, max_chars=600)


def sample_label(entry: dict) -> str:
    return f"{entry['title']} — {entry['device']}, {entry['dtype']}, {entry['date']}"


# --- controls -----------------------------------------------------------------------------------
def recorded_races(recordings) -> list[tuple[str, object, int]]:
    """(label, recording, race index) for every race of the shipped device recordings."""
    return [(race_label(rec, i), rec, i) for rec in recordings for i in range(len(rec.data["races"]))]


def controls(samples: list[dict], recordings=()):
    """Draw the source choice; return a function that loads the chosen (ar, spec) pair (None once it has shown
    why it cannot), or None when nothing is chosen yet. Loading is separate so that it can wait for its turn."""
    races = recorded_races(recordings)
    with st.container(border=True):
        options = ([RECORDED] if races else []) + ([SAMPLE] if samples else []) + [UPLOAD]
        source = st.radio("Traces", options, key="source", horizontal=True)
        if not races:
            st.caption(md_escape(recordings_note([]), max_chars=2000))  # the whole sentence: it ends with where the numbers ran
        if source == RECORDED:
            labels = [label for label, _, _ in races]
            label = st.selectbox("Recorded race", labels, key="recorded")
            _, rec, index = races[labels.index(label)]
            return lambda: read_recorded(rec, index)
        if source == SAMPLE:
            labels = [sample_label(e) for e in samples]
            label = st.selectbox("Recorded pair", labels, key="sample")
            entry = samples[labels.index(label)]
            return lambda: read_sample(entry)
        c1, c2 = st.columns(2)
        ar_file = c1.file_uploader("AR trace (JSON)", type="json", key="ar_file")
        spec_file = c2.file_uploader("Speculative trace (JSON)", type="json", key="spec_file")
    if ar_file is None or spec_file is None:
        st.info("Upload both traces of one run: the Playground's **Download the traces** gives `speclab-ar.json` and `speclab-spec.json`.")
        return None
    return lambda: read_upload(ar_file.getvalue(), spec_file.getvalue())


def read_recorded(rec, index: int) -> tuple[Trace, Trace] | None:
    try:
        return check_pair(*rec.race(index))
    except (TraceError, RecordingError) as exc:
        st.error("The recording could not be read: " + error_text(exc), icon=":material/error:")
        return None


def read_sample(entry: dict) -> tuple[Trace, Trace] | None:
    try:
        return load_sample(entry)
    except TraceError as exc:
        st.error("The shipped sample could not be read: " + error_text(exc), icon=":material/error:")
        return None


def read_upload(ar_raw: bytes, spec_raw: bytes) -> tuple[Trace, Trace] | None:
    try:
        return parse_pair(ar_raw, spec_raw)
    except TraceError as exc:
        st.error(error_text(exc), icon=":material/error:")
        return None


def step_through(spec: Trace) -> None:
    """Any speculative step of the replayed run, stage by stage, beside the engine's code for each stage."""
    steps = stepthrough.speculative_steps(spec)
    with st.expander("🔍 Step through one step of this run (draft, verify, accept, correction or bonus, roll back)"):
        if not steps:
            st.caption("This run drafted nothing, so it has no speculative step to step through.")
            return
        first = stepthrough.interesting_step(spec)
        c1, c2 = st.columns(2)
        asked = int(
            c1.number_input(
                f"Step ({steps[0]} to {steps[-1]}; the ones that drafted)",
                min_value=steps[0],
                max_value=steps[-1],
                value=first,
                step=1,
                key=f"replay_step_{steps[0]}_{steps[-1]}",
            )
        )
        index = asked if asked in set(steps) else min(steps, key=lambda i: (abs(i - asked), i))
        if index != asked:
            st.caption(f"Step {asked} drafted nothing; showing step {index}, the nearest that did.")
        rows = spec.steps[index].seqs
        drafted = [i for i, q in enumerate(rows) if q.drafted]  # an n-gram row may find nothing to draft
        pos = drafted[0]
        if len(drafted) > 1:
            pick = int(
                c2.number_input(
                    f"Row of the batch that drafted (1 to {len(drafted)})",
                    min_value=1,
                    max_value=len(drafted),
                    value=1,
                    step=1,
                    key=f"replay_row_{index}",
                )
            )
            pos = drafted[pick - 1]
        st.caption(f"Step {index}, sequence {rows[pos].seq + 1}: what the trace recorded, beside the engine's code that did it.")
        draw_stages(spec, index, pos)


# --- page ---------------------------------------------------------------------------------------
st.title("📼 Replay")
st.markdown(
    "Play back a recorded run: the same prompts decoded plainly and speculatively, raced on one clock at the "
    "speed they were **measured** on the machine that recorded them. Nothing is decoded here, so a run recorded "
    "on a GPU replays on a laptop. Upload the two traces from the Playground's **Download the traces**, or pick "
    "a sample pair recorded with the embedded model pair."
)

# Parsing and drawing a trace pair is heavy work (the worst upload takes seconds: scripts/investigate/bench_replay.py), so it
# waits for the run lock's turn: it can never overlap, and slow down, another visitor's timed decode.
recordings, refused = list_recordings()
for line in refused:
    st.caption(md_escape(line))
load_chosen = controls(load_index(), recordings)
if load_chosen is not None:
    with resources.model_turn(st.empty()):
        pair = load_chosen()
        if pair is not None:
            ar, spec = pair
            st.info(f"These are recorded measurements, not a live run: {recorded_on(spec)}.", icon=":material/history:")
            peaks = Peaks.from_meta(spec) or Peaks.from_meta(ar)
            if peaks is not None:  # the recording machine's names are trace text: shown literally
                peaks = replace(peaks, device_name=md_text(peaks.device_name))
            where = f"on the recording machine ({peaks.device_name})" if peaks and peaks.device_name else "on the recording machine"
            with last_resort("Could not draw these traces", "Are they complete SpecLab traces?"):
                show_results(ar, spec, peaks, gauge_name(spec), peaks_where=where, downloads=False)
            with last_resort("Could not step through this trace", "Is it a complete SpecLab trace?"):
                step_through(spec)
