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
from app.views import conclusions, load, metrics, roofline
from engine import ConfigError, DecodeConfig, generate
from engine.bench import batch_prompts, pass_costs, run_cells
from engine.costs import ridge_tokens

LESSONS_DIR = Path(__file__).resolve().parents[2] / "lessons"
# What an experiment can raise: a refused config, a bad argument, and torch's errors (e.g. out of memory).
EXPERIMENT_ERRORS = (ConfigError, ValueError, OSError, RuntimeError)


# --- experiments (each returns plain data; drawing happens below) ------------------------------
PASS_TOKENS = [1, 2, 4, 8, 16, 32, 64]  # lesson 1: tokens in one target pass, at batch 1


def memory_bound(pair, probe) -> dict:
    """One target pass at batch 1 with 1..64 new tokens, and this machine's probed peaks to read it against."""
    rows = pass_costs(pair, [1], PASS_TOKENS, context=150, repeats=5)
    return {"rows": rows, "peak_bandwidth": probe.peak_bandwidth, "peak_flops": probe.peak_flops,
            "ridge_point": probe.ridge_point, "dtype": probe.dtype,
            "ridge_tokens": ridge_tokens(pair.target_costs, probe.peak_flops, probe.peak_bandwidth)}  # fmt: skip


def lanes(pair, prompts: list[str], depth: int, drafter: str, tokens: int, **spec) -> dict:
    ar = generate(pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=tokens))
    sp = generate(pair, prompts, DecodeConfig(depth=depth, drafter=drafter, max_new_tokens=tokens, **spec))
    return {"ar": ar, "spec": sp, "m": metrics.compare(ar, sp)}


def more_flops(pair, probe) -> dict:
    return lanes(pair, batch_prompts("extractive", 1), 4, "ngram", 64)


RIDGE_DEPTH, RIDGE_BATCHES = 4, (1, 16)


def model_drafter(pair) -> str:
    """The EAGLE head where the pair has one, else the draft model."""
    return "eagle" if pair.drafter_name("eagle") else "model"


def past_the_ridge(pair, probe) -> dict:
    """A model drafter at depth 4 on held-out prompts at batch 1 and 16, and the n-gram lookup at batch 16 on
    extractive prompts (its best case) for contrast; each beside plain decoding of the same prompts."""
    drafter = model_drafter(pair)
    runs = {batch: lanes(pair, batch_prompts("heldout", batch), RIDGE_DEPTH, drafter, 48 if batch == 1 else 24)
            for batch in RIDGE_BATCHES}  # fmt: skip
    ngram = lanes(pair, batch_prompts("extractive", RIDGE_BATCHES[-1]), RIDGE_DEPTH, "ngram", 24)
    return {"drafter": drafter, "runs": runs, "ngram": ngram,
            "ridge_tokens": ridge_tokens(pair.target_costs, probe.peak_flops, probe.peak_bandwidth)}  # fmt: skip


def turn_it_off(pair, probe) -> dict:
    prompts = batch_prompts("chat", 16)
    on = lanes(pair, prompts, 4, "model", 32)
    off = generate(pair, prompts, DecodeConfig(depth=4, drafter="model", max_new_tokens=32,
                                               policy="off_above_batch", disable_by_batch_size=8))  # fmt: skip
    return {"ar": on["ar"], "on": on["spec"], "off": off}


GATE_DEPTH, GATE_THRESHOLD = 6, 0.3


def adaptive(pair, probe) -> dict:
    """Depth 6 drafting every token vs stopping below joint confidence 0.3, at batch 1 and 8."""
    drafter = model_drafter(pair)
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
    st.plotly_chart(roofline.pass_cost_figure(rows, result.get("ridge_tokens")), width="stretch", key="lesson1_fig")
    st.plotly_chart(roofline.peak_share_figure(rows, result["peak_bandwidth"], result["peak_flops"],
                                               result.get("ridge_tokens")), width="stretch", key="lesson1_peaks")  # fmt: skip
    st.caption(f"The regime is read from the numbers: {roofline.REGIME_RULE}. The bandwidth and FLOP/s are SpecLab's "
               "counted bytes and FLOPs over the measured time, not hardware counters; a share above 100% means the "
               "quick probe's copy and matmul underestimate what this pass reaches (caches, a different kernel).")  # fmt: skip
    st.success("\n\n".join(conclusions.memory_bound_conclusion(result)))


def _lane_line(name: str, trace) -> str:
    s = trace.summary
    return f"{name}: {s['tokens_per_s']:.1f} tokens/s, {s['target_forwards']} target passes, {s['flops'] / 1e9:.1f} GFLOP"


def show_more_flops(result: dict) -> None:
    st.markdown("- " + _lane_line("plain", result["ar"]) + "\n- " + _lane_line("speculative", result["spec"]))
    st.success(conclusions.more_flops_conclusion(result["m"]))


def show_past_the_ridge(result: dict) -> None:
    name = conclusions.drafter_label(result["drafter"])
    bn = max(result["runs"])
    lines = [conclusions.ridge_run_line(name, batch, run, RIDGE_DEPTH) for batch, run in sorted(result["runs"].items())]
    lines.append(conclusions.ridge_run_line("n-gram lookup, extractive prompts", bn, result["ngram"], RIDGE_DEPTH))
    st.markdown("\n".join(lines))
    st.success("\n\n".join(conclusions.past_the_ridge_conclusion(result, RIDGE_DEPTH)))


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
    st.markdown(f"Drafter: {conclusions.drafter_label(result['drafter'])}.\n" + "\n".join(lines))
    st.success(conclusions.adaptive_conclusion(result, GATE_DEPTH))


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


def by_load(pair, probe) -> dict:
    """Tokens/s of plain decoding and four depth policies at batch 1, 4 and 16 (held-out prompts), interleaved
    at each batch size (engine.bench.run_cells: one warm-up each, then one run of every contender in turn)."""
    drafter = model_drafter(pair)
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
    run: Callable[[object, object], dict]  # (pair, probe) -> measured result (plain data)
    show: Callable[[dict], None]  # result -> the conclusion on the page
    needs: tuple[str, ...] = ()  # drafter kinds, any one of which the pair must offer (pair.available_drafters())
    ask: Callable[[str], float | None] | None = None  # widget key -> the student's prediction (None: not entered)


EXPERIMENTS = {  # the names lessons/*.md use in their front matter ("experiment: memory_bound")
    "memory_bound": Experiment(memory_bound, show_memory_bound),
    "more_flops": Experiment(more_flops, show_more_flops),
    "past_the_ridge": Experiment(past_the_ridge, show_past_the_ridge, needs=("eagle", "model")),
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
loaded = load_pair_or_error("embedded", "auto", with_probe=True)
if loaded is None:
    st.stop()
pair, probe = loaded
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
                        result = experiment.run(pair, probe)
                    if experiment.ask:
                        result["prediction"] = prediction
                    st.session_state[f"lesson{i}"] = result
                except EXPERIMENT_ERRORS as exc:
                    show_failure("The experiment failed", exc)
        result = st.session_state.get(f"lesson{i}")
        if result is not None:
            experiment.show(result)
