"""Lessons: the thesis step by step, each with a live experiment on this machine.

Page shape (DESIGN §5): title, short prose, then per lesson its text (lessons/*.md), a button that
runs the experiment through the engine, and a conclusion computed from what was just measured.
Nothing on this page is a canned number. Each lesson names its experiment in its front matter
(app/lesson_files.py); EXPERIMENTS below maps those names to a measurement and its conclusion. An
experiment may ask the student for a prediction first: its Run button stays disabled until one is entered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from app import resources
from app.lesson_files import load_lessons
from app.page_helpers import load_pair_or_error, show_failure
from app.views import load, metrics, roofline
from engine import ConfigError, DecodeConfig, generate
from engine.bench import batch_prompts, pass_costs, run_cells

LESSONS_DIR = Path(__file__).resolve().parents[2] / "lessons"
# What an experiment can raise: a refused config, a bad argument, and torch's errors (e.g. out of memory).
EXPERIMENT_ERRORS = (ConfigError, ValueError, OSError, RuntimeError)


# --- experiments (each returns plain data; drawing happens below) ------------------------------
def memory_bound(pair) -> dict:
    rows = pass_costs(pair, [1], [1, 2, 4, 8, 16], context=150, repeats=5)
    return {"rows": rows}


def lanes(pair, prompts: list[str], depth: int, drafter: str, tokens: int, **spec) -> dict:
    ar = generate(pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=tokens))
    sp = generate(pair, prompts, DecodeConfig(depth=depth, drafter=drafter, max_new_tokens=tokens, **spec))
    return {"ar": ar, "spec": sp, "m": metrics.compare(ar, sp)}


def more_flops(pair) -> dict:
    return lanes(pair, batch_prompts("extractive", 1), 4, "ngram", 64)


def past_the_ridge(pair) -> dict:
    return {
        batch: lanes(pair, batch_prompts("extractive", batch), 4, "ngram", 32 if batch > 1 else 64)
        for batch in (1, 16)
    }


def turn_it_off(pair) -> dict:
    prompts = batch_prompts("chat", 16)
    on = lanes(pair, prompts, 4, "model", 32)
    off = generate(pair, prompts, DecodeConfig(depth=4, drafter="model", max_new_tokens=32,
                                               policy="off_above_batch", disable_by_batch_size=8))  # fmt: skip
    return {"ar": on["ar"], "on": on["spec"], "off": off}


GATE_DEPTH, GATE_THRESHOLD = 6, 0.3


def adaptive(pair) -> dict:
    """Depth 6 drafting every token vs stopping below joint confidence 0.3, at batch 1 and 8."""
    drafter = "eagle" if pair.drafter_name("eagle") else "model"
    out = {"drafter": drafter}
    for batch, tokens in ((1, 48), (8, 32)):
        prompts = batch_prompts("heldout", batch)
        ar = generate(pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=tokens))
        runs = {}
        for name, threshold in (("fixed", 0.0), ("gated", GATE_THRESHOLD)):
            runs[name] = generate(pair, prompts, DecodeConfig(depth=GATE_DEPTH, drafter=drafter, max_new_tokens=tokens,
                                                              confidence_threshold=threshold))  # fmt: skip
        out[batch] = {"ar": ar, **runs}
    return out


# --- conclusions (computed from the measurement) -----------------------------------------------
def show_memory_bound(result: dict) -> None:
    rows = result["rows"]
    st.plotly_chart(roofline.pass_cost_figure(rows), width="stretch", key="lesson1_fig")
    one, sixteen = rows[0]["ms"], rows[-1]["ms"]
    st.success(
        f"One token: {one:.1f} ms. Sixteen tokens in one pass: {sixteen:.1f} ms, or {sixteen / one:.2f}× the time "
        f"for 16× the tokens. Per token that is {one / rows[-1]['ms_per_token']:.1f}× cheaper: the extra tokens "
        "used compute that was idle."
    )


def _lane_line(name: str, trace) -> str:
    s = trace.summary
    return f"{name}: {s['tokens_per_s']:.1f} tokens/s, {s['target_forwards']} target passes, {s['flops'] / 1e9:.1f} GFLOP"


def show_more_flops(result: dict) -> None:
    m = result["m"]
    st.markdown("- " + _lane_line("plain", result["ar"]) + "\n- " + _lane_line("speculative", result["spec"]))
    st.success(
        f"Speculation did {m['flops_ratio']:.2f}× the FLOPs of plain decoding, and {metrics.fmt_flops(m['flops_wasted'])} "
        f"of them went on rejected draft tokens. It still ran {m['speedup']:.2f}× as fast, because a verify pass "
        f"cost only {m['verify_cost_ratio']:.2f}× a plain step while it kept {m['tokens_per_step']:.2f} tokens per pass."
    )


def show_past_the_ridge(result: dict) -> None:
    lines = []
    for batch, r in result.items():
        m = r["m"]
        lines.append(
            f"- batch {batch}: {batch * 5} tokens per verify pass; one verify pass cost {m['verify_cost_ratio']:.2f}× "
            f"a plain step; {m['tokens_per_step']:.2f} tokens kept per pass; speedup {m['speedup']:.2f}×"
        )
    st.markdown("\n".join(lines))
    one, many = result[1]["m"], result[16]["m"]
    st.success(
        f"At batch 1 verifying 4 draft tokens cost {one['verify_cost_ratio']:.2f}× a plain step; at batch 16 it cost "
        f"{many['verify_cost_ratio']:.2f}×, because 80 tokens per pass is past the ridge point. The speedup went "
        f"from {one['speedup']:.2f}× to {many['speedup']:.2f}×."
    )


def show_turn_it_off(result: dict) -> None:
    ar, on, off = result["ar"], result["on"], result["off"]
    base = ar.summary["tokens_per_s"]
    spec_steps = sum(1 for s in off.steps if s.depth > 0)
    st.markdown(
        f"- plain: {base:.1f} tokens/s\n"
        f"- speculation always on (α = {on.summary['alpha'] or 0:.2f}): {on.summary['tokens_per_s']:.1f} tokens/s "
        f"({on.summary['tokens_per_s'] / base:.2f}×)\n"
        f"- off above batch 8: {off.summary['tokens_per_s']:.1f} tokens/s ({off.summary['tokens_per_s'] / base:.2f}×); "
        + (f"it speculated on {spec_steps} of {len(off.steps) - 1} steps, the ones after the batch had shrunk to 8 "
           "or fewer sequences" if spec_steps else "it never speculated: more than 8 sequences decoded at every step")
    )  # fmt: skip
    better = "beat" if off.summary["tokens_per_s"] > on.summary["tokens_per_s"] else "did not beat"
    st.success(f"At batch 16 the load-aware policy {better} always-on speculation on this machine.")


def _gate_line(name: str, trace, base: float) -> str:
    s = trace.summary
    rejected = s["drafted_tokens"] - s["accepted_tokens"]
    return (f"{name}: {s['tokens_per_s']:.1f} tokens/s ({s['tokens_per_s'] / base:.2f}× plain), "
            f"{s['drafted_tokens']} drafted, {rejected} rejected, α = {s['alpha'] or 0:.2f}, "
            f"{metrics.fmt_flops(s['flops_wasted'])} on rejected drafts")


def show_adaptive(result: dict) -> None:
    lines = []
    for batch in (1, 8):
        r = result[batch]
        base = r["ar"].summary["tokens_per_s"]
        lines.append(f"- **batch {batch}**, plain {base:.1f} tokens/s")
        lines.append("  - " + _gate_line(f"all {GATE_DEPTH} drafts", r["fixed"], base))
        lines.append("  - " + _gate_line(f"stop below {GATE_THRESHOLD}", r["gated"], base))
    st.markdown(f"Drafter: {'EAGLE head' if result['drafter'] == 'eagle' else 'draft model'}.\n" + "\n".join(lines))
    parts = []
    for batch in (1, 8):
        fixed, gated = result[batch]["fixed"].summary, result[batch]["gated"].summary
        cut = 1 - gated["drafted_tokens"] / fixed["drafted_tokens"] if fixed["drafted_tokens"] else 0.0
        faster = gated["tokens_per_s"] / fixed["tokens_per_s"] if fixed["tokens_per_s"] else 0.0
        parts.append(f"at batch {batch} it drafted {cut:.0%} fewer tokens and ran {faster:.2f}× as fast as drafting "
                     f"all {GATE_DEPTH}")
    st.success("Stopping where the drafter was unsure: " + "; ".join(parts) + ". The tokens it skipped were mostly "
               "ones the target would have rejected.")


LOAD_BATCHES, LOAD_TOKENS, LOAD_N = (1, 4, 16), 24, 8
LOAD_FIXED, LOAD_MAX = 4, 6  # fixed depth; the most the load-aware policies may draft
PLAIN, FIXED = "plain decoding", f"fixed k = {LOAD_FIXED}"
PREDICT_BATCH = 16


def load_contenders(drafter: str) -> dict[str, DecodeConfig]:
    spec = {"drafter": drafter, "max_new_tokens": LOAD_TOKENS}
    return {
        PLAIN: DecodeConfig(mode="autoregressive", max_new_tokens=LOAD_TOKENS),
        FIXED: DecodeConfig(depth=LOAD_FIXED, **spec),
        f"off above batch {LOAD_N}": DecodeConfig(depth=LOAD_FIXED, policy="off_above_batch",
                                                  disable_by_batch_size=LOAD_N, **spec),  # fmt: skip
        f"batch table, derived (k ≤ {LOAD_MAX})": DecodeConfig(depth=LOAD_MAX, policy="batch_table", **spec),
        f"goodput (k ≤ {LOAD_MAX})": DecodeConfig(depth=LOAD_MAX, policy="goodput", **spec),
    }


def by_load(pair) -> dict:
    """Tokens/s of plain decoding and four depth policies at batch 1, 4 and 16 (held-out prompts), interleaved
    at each batch size (engine.bench.run_cells: one warm-up each, then one run of every contender in turn)."""
    drafter = "eagle" if pair.drafter_name("eagle") else "model"
    contenders = load_contenders(drafter)
    rows = []
    for batch in LOAD_BATCHES:
        cells = run_cells(pair, batch_prompts("heldout", batch), list(contenders.values()), repeats=1)
        for name, cell in zip(contenders, cells):
            rows.append({"batch": batch, "contender": name, "tokens_per_s": cell["tokens_per_s"],
                         "mean_depth": cell["mean_depth"] if name != PLAIN else 0.0, "alpha": cell["alpha"]})  # fmt: skip
    return {"drafter": drafter, "rows": rows}


def ask_by_load(key: str) -> float | None:
    return st.number_input(
        f"Your prediction: the speedup of fixed depth {LOAD_FIXED} over plain decoding at batch {PREDICT_BATCH} "
        "(1.0 = the same speed, below 1 = slower)", min_value=0.0, max_value=10.0, value=None, step=0.05,
        format="%.2f", placeholder="e.g. 1.3", key=key,
    )  # fmt: skip


def show_by_load(result: dict) -> None:
    rows = result["rows"]
    st.markdown(f"Drafter: {'EAGLE head' if result['drafter'] == 'eagle' else 'draft model'}, {LOAD_TOKENS} new "
                "tokens per sequence, one run per cell (single runs are noisy: read trends, not the second decimal).")  # fmt: skip
    st.plotly_chart(load.load_figure(rows), width="stretch", key="lesson_load_fig")
    st.dataframe(load.load_table(rows, PLAIN), hide_index=True)
    lines = load.conclusion(rows)
    if result.get("prediction") is not None:
        said = load.prediction_line(rows, result["prediction"], plain=PLAIN, contender=FIXED, batch=PREDICT_BATCH)
        if said:
            lines.insert(0, said)
    st.success("\n\n".join(lines))


@dataclass(frozen=True)
class Experiment:
    run: Callable[[object], dict]  # pair -> measured result (plain data)
    show: Callable[[dict], None]  # result -> the conclusion on the page
    needs: tuple[str, ...] = ()  # drafter kinds, any one of which the pair must offer (pair.available_drafters())
    ask: Callable[[str], float | None] | None = None  # widget key -> the student's prediction (None: not entered)


EXPERIMENTS = {  # the names lessons/*.md use in their front matter ("experiment: memory_bound")
    "memory_bound": Experiment(memory_bound, show_memory_bound),
    "more_flops": Experiment(more_flops, show_more_flops),
    "past_the_ridge": Experiment(past_the_ridge, show_past_the_ridge),
    "turn_it_off": Experiment(turn_it_off, show_turn_it_off, needs=("model",)),
    "adaptive": Experiment(adaptive, show_adaptive, needs=("eagle", "model")),
    "by_load": Experiment(by_load, show_by_load, needs=("eagle", "model"), ask=ask_by_load),
}

# --- page --------------------------------------------------------------------------------------
st.title("🎓 Lessons")
st.markdown(
    "Why is speculative decoding fast, and when is it not? Six short steps, each checked by an experiment that "
    "runs on this machine when you press its button. After J. Barrow, "
    "[“Why is speculative decoding fast?”](https://jbarrow.ai/2026-10-08-why-is-speculative-decoding-fast), 2026."
)
lessons = load_lessons(LESSONS_DIR, EXPERIMENTS)
loaded = load_pair_or_error("embedded", "auto")
if loaded is None:
    st.stop()
pair, _ = loaded
if not lessons:
    st.error(f"No lesson files (NN-name.md) were found in {LESSONS_DIR}.", icon=":material/error:")
    st.stop()

tabs = st.tabs([lesson.title for lesson in lessons])
for i, (tab, lesson) in enumerate(zip(tabs, lessons), start=1):
    with tab:
        st.markdown(lesson.body)
        if lesson.problem:
            st.error(lesson.problem, icon=":material/error:")
            continue
        experiment = EXPERIMENTS[lesson.experiment]
        if experiment.needs and not set(experiment.needs) & set(pair.available_drafters()):
            st.warning("This experiment needs the draft model, and this pair has none.")
            continue
        prediction = experiment.ask(f"lesson{i}_predict") if experiment.ask else None
        waiting = experiment.ask is not None and prediction is None
        if waiting:
            st.caption("Enter your prediction first: the experiment unlocks once you have committed to a number.")
        if st.button("▶ Run the experiment", key=f"lesson{i}_run", type="primary", disabled=waiting):
            with resources.model_turn(st.empty()):
                try:
                    with st.spinner("Measuring…"):
                        result = experiment.run(pair)
                    if experiment.ask:
                        result["prediction"] = prediction
                    st.session_state[f"lesson{i}"] = result
                except EXPERIMENT_ERRORS as exc:
                    show_failure("The experiment failed", exc)
        result = st.session_state.get(f"lesson{i}")
        if result is not None:
            experiment.show(result)
