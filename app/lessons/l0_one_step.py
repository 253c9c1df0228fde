"""Lesson 0, one speculative step: the recorded step-through trace (draft, verify, accept, correct), stage by stage
beside the engine's code, the plain step it is set against, and a recorded draft-tree step (lesson 7 shows it).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app.common import measurement
from app.common.stepthrough_panel import draw_stages
from app.lessons.kit.experiment import Experiment, Prediction, Walkthrough
from app.views import metrics, step_pictures, stepthrough
from engine import DecodeConfig, Trace, TraceError, generate
from engine.bench.prompts import batch_prompts
from engine.costs import expected_tokens_per_step
from engine.drafters import drafter_name

STEP_DEPTH, STEP_TOKENS = 4, 16  # the step-through's run: batch 1, greedy, depth 4, 16 new tokens


RECORDINGS = Path(__file__).resolve().parents[2] / "assets" / "lessons"


STEP_TRACES = {
    "a chain step": RECORDINGS / "step-through.json",  # scripts/record/record_lessons.py records both
    "a draft-tree step": RECORDINGS / "step-through-tree.json",
}


STAGE_KEY = "step0_stage"


FREE_STAGES = 2  # draft and verify are shown before a prediction; what the target kept waits for one


def one_step_traces(pair) -> tuple:
    """(speculative, plain) traces of one held-out prompt at batch 1, greedy: the run the recorded step-through
    makes (the EAGLE head where the pair has one, else the draft model), and plain decoding of the same prompt."""
    drafter = "eagle" if drafter_name(pair, "eagle") else "model"
    prompts = batch_prompts("heldout", 1)
    spec = generate(pair, prompts, DecodeConfig(depth=STEP_DEPTH, drafter=drafter, max_new_tokens=STEP_TOKENS, seed=0))
    plain = generate(pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=STEP_TOKENS))
    return spec, plain


def measure(spec, plain=None) -> dict:
    """The lesson's measurement of a speculative trace's chosen step (ValueError when it drafted nothing)."""
    index = stepthrough.interesting_step(spec)
    if index is None or spec.steps[index].seqs[0].tree is not None:
        raise ValueError("the run has no chain step that drafted: nothing to step through")
    return stepthrough.step_measurement(spec, index, plain)


def trace_label(trace) -> tuple[str, str, str]:
    """(machine, dtype, date) a recorded trace names."""
    probe = trace.meta.get("probe") or {}
    return (
        str(probe.get("device_name") or trace.meta.get("device_name") or trace.meta.get("device") or "machine not recorded"),
        str(trace.meta.get("dtype", "dtype not recorded")),
        str(trace.meta.get("recorded_at", "")),
    )


def record_of(trace) -> dict:
    """A recorded step-through trace as lesson 0's checked recording (MeasurementError / ValueError if unusable)."""
    machine, dtype, date = trace_label(trace)
    note = (
        f"a batch-1 greedy run, {trace.config.get('drafter')} drafter at depth {trace.config.get('depth')}; one step timed "
        "once on a shared machine whose load was not recorded: timings noisy"
    )
    from app.lessons import registry  # the registry imports every lesson, this one too

    return registry.make_record("one_step", measure(trace), machine=machine, dtype=dtype, note=note, settings={}, date=date or None)


def one_step(pair, probe, s: dict) -> dict:
    return live_step(pair)[0]


def live_step(pair) -> tuple[dict, Trace]:
    """(the checked measurement of a live step, its trace to step through)."""
    spec, plain = one_step_traces(pair)
    from app.lessons import registry  # the registry imports every lesson, this one too

    return registry.check_measurement("one_step", measure(spec, plain)), spec


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


def one_step_models(m: dict, s: dict) -> list[tuple[str, float | None]]:
    """Leviathan's expected kept drafts with the run's α: E[tokens per step] − 1 = α(1 − α^k) ÷ (1 − α)."""
    alpha = m.get("alpha")
    expected = expected_tokens_per_step(alpha, m["k"]) - 1 if alpha is not None else None
    return [(f"Leviathan: expected kept drafts, E[tokens per step] − 1, with the run's α = {metrics.fmt(alpha)}", expected)]


def verdict(m: dict) -> str:
    """What the step shows, computed from its measurement: the tokens one pass gained, and whether the step took
    less time than the plain steps it replaced (one step, timed once: a first look, not a benchmark)."""
    gained, step = m["gained"], m["step_ms"]
    own = "bonus" if m["next_kind"] == "bonus" else "correction"
    out = (
        f"The target kept {m['accepted']} of {m['k']} drafts and added its own token (a {own}): {gained} token(s) "
        f"from one pass over {m['tokens_per_pass']} tokens."
    )
    if m.get("same_text") is True:
        out += " Plain decoding of the same prompt wrote the same text: lossless."
    elif m.get("same_text") is False:
        out += " Plain decoding wrote a different text here: a near-tie rounded differently (see 'Greedy and sampling')."
    plain = m.get("plain_step_ms")
    if plain is None:
        return out + " No plain step was measured beside it, so this run cannot say whether the step saved time."
    total, verify = gained * plain, m["verify_ms"] / plain
    cost = (
        f"cost {verify:.2f}× a whole plain step"
        if verify >= 1
        else f"read {verify:.2f}× a whole plain step: about one, since each was timed once (a pass with more tokens is not "
        "cheaper; a plain step also pays for its sampling and bookkeeping)"
    )
    if step < total:
        return out + (
            f" Plain decoding needs {gained} step(s) for them, {total:.1f} ms at {plain:.2f} ms each; this step took "
            f"{step:.1f} ms ({total / step:.2f}× less), because its one pass over {m['tokens_per_pass']} tokens {cost}. "
            "One step timed once: lessons 1 to 3 measure it properly."
        )
    return out + (
        f" Plain decoding needs {gained} step(s) for them, {total:.1f} ms at {plain:.2f} ms each; this step took "
        f"{step:.1f} ms, no less: drafting and verifying cost more than the plain steps they replaced. One step "
        "timed once: lessons 1 to 3 measure it properly."
    )


def show_one_step(result: dict | None, trace, locked: bool) -> None:
    """Lesson 0's body: the step, one stage at a time (picture, text, the engine's code), then, once a prediction
    is in, plain decoding beside the step as a figure with its numbers under it and what they show."""
    index = result["measurement"]["step"] if result else stepthrough.interesting_step(trace)
    machine, dtype, date = trace_label(trace)
    date = date or (result or {}).get("date")  # a live trace is not stamped; its result carries the run's date
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


RECORD = Experiment(
    # lesson 0: no knobs; its recording is the step-through trace (STEP_TRACES), drawn by its walkthrough
    one_step,
    (),
    Prediction(
        f"Out of k = {STEP_DEPTH} drafts, how many will the target accept in this step?",
        "e.g. 2",
        lambda m, s: float(m["accepted"]),
        one_step_models,
        unit=" drafts",
        whole=True,
    ),
    needs=("eagle", "model"),
    numbers=lambda m, s: [  # plain decoding's time is its one timed step × the tokens: an estimate, said so
        (
            r["how"] + (" (one plain step's time × the tokens)" if r["how"] == "plain decoding" else ""),
            f"{metrics.fmt(r['time (ms)'], '.1f', ' ms')}, {r['tokens']} tokens",
        )
        for r in step_pictures.plain_vs_step_rows(m)
    ],
    walkthrough=Walkthrough(
        recorded_one_step,
        live_step,
        show_one_step,
        "In a class, lesson 0 shares the recorded step: a live step's trace stays on the page that measured it, so "
        "everyone steps through the same recorded one.",
    ),
    name="one_step",
    schema={  # lesson 0: one speculative step (app/views/stepthrough.py step_measurement)
        **{k: "int" for k in ("step", "k", "accepted", "gained", "tokens_per_pass")},
        **{k: "num" for k in ("draft_ms", "verify_ms", "step_ms")},
        **{k: "num?" for k in ("alpha", "plain_step_ms")},
        "next_kind": "str",
        "plain_source": "str",
        "same_text?": "bool",
    },
)
