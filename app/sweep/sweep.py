"""Sweep: measure where speculation stops paying on this machine.

Page shape (docs/design.md §7, Streamlit's demos): title, short prose, controls, result. First, at once, a recorded sweep (assets/sweep/,
scripts/record/record_sweep.py), labelled with its machine and date, so the page is never empty; then two live
measurements through the engine:
1. one target pass vs tokens per pass (`engine.decoding.passcurve.pass_costs`): where its time hardly grows and where
   it grows with every token, with the ridge point from the probed peaks and the regime each pass shows;
2. AR vs speculative tokens/s over a batch x depth grid (`engine.bench.harness.bench`): the same plateau seen
   as speedup, and the batch size where a fixed depth turns into a slowdown; optionally with the load-aware
   policies (batch_table, goodput) beside the fixed depths, and their tokens/s against the upper envelope
   max(AR, best fixed k) per batch size. Each cell's lanes run in interleaved rounds, and a cell's winner comes only
   from the one rule (engine/verdict.py) over them.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app.common import drafters, resources
from app.common.kv_guard import context_problem
from app.common.measurement import BUSY_CORES, note_load
from app.common.page_helpers import load_pair_or_error, show_failure, url_fallbacks
from app.common.url_keys import BOUND, bound
from app.views import recorded, roofline
from app.views.fairness import grid_contention_note
from app.views.safe import md_escape
from app.views.sweep import (
    GRID_COLUMNS,
    GRID_HELP,
    envelope,
    envelope_figure,
    envelope_summary,
    envelope_table,
    grid_table,
    grid_verdicts,
    load_grid_recording,
    pass_table,
    recorded_caption,
    speedup_figure,
    tree_vs_chain,
)
from app.views.sweep_context import context_figure, context_lines
from engine import ConfigError
from engine.bench.harness import bench, tree_fits
from engine.bench.prompts import spec_bench_sets
from engine.costs import ridge_tokens
from engine.decoding.passcurve import pass_costs
from engine.drafters import drafter_name
from engine.roofline.device_recordings import list_recordings, recordings_note
from engine.verdict import RULE

BARROW = "https://jbarrow.ai/2026-10-08-why-is-speculative-decoding-fast"
VLLM_PR = "https://github.com/vllm-project/vllm/pull/35060"
VLLM_ADAPTIVE = "https://docs.vllm.ai/en/stable/features/speculative_decoding/adaptive_verification/"
ADAPTIVE = ["batch_table", "goodput"]  # measured beside "fixed" when the user ticks "adaptive policies"
PASS_GUARD = 2048  # tokens in one measured pass (a CPU takes seconds per pass beyond this)
TOKENS = [1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128]
# What a measurement can raise: a refused config, a bad argument, and torch's errors (e.g. out of memory).
MEASURE_ERRORS = (ConfigError, ValueError, OSError, RuntimeError)
PAGE = "sweep"  # its bound widgets and their labels: app/common/url_keys.py
MAX_GRID_ROUNDS = 5  # interleaved rounds per cell
MULTI = ("pass_batches", "grid_batches", "grid_depths", "grid_trees", "grid_contexts")  # multiselects: a repeated URL parameter each
CONTEXTS = [0, 256, 1024, 2048, 4096]  # tokens of the shipped document before every row (engine/bench/context.py)
RECORDED = Path(__file__).resolve().parents[2] / "assets" / "sweep" / "grid.json"


@st.cache_data(show_spinner=False)
def grid_help() -> dict:
    """The grid table's header help (GRID_HELP), as Streamlit's column settings."""
    return {name: st.column_config.Column(help=text) for name, text in GRID_HELP.items()}


def recorded_sweep(mtime: float) -> tuple[dict | None, str | None]:
    return load_grid_recording(RECORDED)


def show_recorded_sweep() -> None:
    """The shipped recording: its pass curve and its grid, labelled; marked disturbed when recorded beside other work."""
    rec, problem = recorded_sweep(RECORDED.stat().st_mtime if RECORDED.exists() else 0.0)
    if rec is None:
        st.caption(f"No recorded sweep to show ({problem}); press a Measure button below.")
        return
    load = note_load(rec["note"])
    busy = [r[k] for r in rec["grid_rows"] for k in ("ar_other_cores", "spec_other_cores") if r.get(k) is not None]
    disturbed = bool(load and load[0] > load[1]) or any(b > BUSY_CORES for b in busy)
    st.subheader("Recorded: AR vs speculative over batch × depth" + (", and what one pass costs" if rec["pass_rows"] else ""))
    (st.warning if disturbed else st.info)(
        ("DISTURBED: recorded beside other work, timings noisy. " if disturbed else "") + recorded_caption(rec)
    )
    if rec["pass_rows"]:
        st.plotly_chart(roofline.pass_cost_figure(rec["pass_rows"], rec.get("ridge_tokens")), width="stretch", key="rec_pass_fig")
    st.plotly_chart(speedup_figure(rec["grid_rows"]), width="stretch", key="rec_grid_fig")
    with st.expander("The recorded numbers"):
        st.dataframe(grid_table(rec["grid_rows"]), hide_index=True, column_config=grid_help())
        st.caption(GRID_COLUMNS)
        st.markdown(grid_verdicts(rec["grid_rows"]))
        st.caption(RULE)
        if rec["pass_rows"] and rec["peak_bandwidth"] and rec["peak_flops"]:
            st.dataframe(pass_table(rec["pass_rows"], rec["peak_bandwidth"], rec["peak_flops"]), hide_index=True)


def show_recordings() -> None:
    """The shipped device recordings' grids, each named by its recording, or a line saying they wait on a GPU."""
    recordings, _ = list_recordings()
    if not recordings:
        st.caption(md_escape(recordings_note([]), max_chars=2000))  # the whole sentence: it ends with where the numbers ran
        return
    for rec in recordings:
        rows = recorded.grid_rows(rec.data)
        with st.expander(f"Recorded elsewhere: {md_escape(rec.label)}"):
            st.markdown(md_escape(recorded.crossover_line(rec.label, rows)))
            st.dataframe(rows, hide_index=True)


st.title("📈 Sweep")
st.markdown(
    "Where does speculation stop paying on **this** machine? Each decode pass streams every weight once and pays a "
    "fixed overhead per operation; while neither the memory bus nor the arithmetic units are full, extra tokens in "
    "the pass (more sequences, or more draft tokens to verify) cost little. From the roofline's ridge point on, "
    "tokens per pass = batch × (k + 1) fill the arithmetic, and extra draft tokens cost real time, rejected ones most "
    "of all. That is why servers make speculation load-aware. The classic rule switched it off above a batch size "
    "(vLLM V0's `--speculative-disable-by-batch-size`, a no-op from v0.10 on and removed in February 2026, "
    f"[PR #35060]({VLLM_PR})). Today vLLM sets the draft length per batch-size range "
    "(`num_speculative_tokens_per_batch_size`) and offers DSpark-style adaptive verification, which decides each step "
    f"how many draft tokens to verify from a cost model profiled at start-up ([vLLM docs]({VLLM_ADAPTIVE})); "
    "TensorRT-LLM has `draft_len_schedule`. Background: J. Barrow, "
    f"[“Why is speculative decoding fast?”]({BARROW}), 2026. The recorded sweep shows at once; everything under "
    "“Measure live” is measured on this machine when you press its button."
)
show_recorded_sweep()
st.header("Measure live")

# Every control is bound to the URL (a copied link reproduces the settings); a session's first run reads the
# link before any bound widget is drawn, and a value a control cannot take gets a notice and the default.
first_run = "sweep_notices" not in st.session_state
raw = {k: st.query_params.get_all(k) if k in MULTI else st.query_params[k] for k in st.query_params} if first_run else {}
notice_box = st.container()
loaded = load_pair_or_error("embedded", "auto", with_probe=True)
if loaded is None:
    st.stop()
pair, probe = loaded
ON_GPU = pair.device.type == "cuda"  # the KV guard's limit (app/common/kv_guard.py)

n_star = ridge_tokens(pair.target_costs, probe.peak_flops, probe.peak_bandwidth)
st.caption(
    f"{probe.device_name}, {probe.dtype}: measured {probe.peak_bandwidth / 1e9:.0f} GB/s and "
    f"{probe.peak_flops / 1e9:.0f} GFLOP/s, so the ridge point is {probe.ridge_point:.1f} FLOP/byte, or about "
    f"{n_star:.0f} tokens per pass for this {pair.target_costs.linear_params / 1e6:.0f}M-parameter target "
    "(an estimate from peaks; the measured curve below is what counts)."
)
show_recordings()  # device recordings (e.g. a lent GPU's) beside this live measurement, named as recordings

# --- 1. one pass vs tokens per pass -----------------------------------------------------------
st.subheader("1 · What one target pass costs")
with st.form("passes_form"):
    c1, c2, c3 = st.columns(3)
    batches = c1.multiselect("Batch sizes", [1, 2, 4, 8, 16, 32], default=[1, 8], **bound(PAGE, "pass_batches"))
    max_tokens = c2.select_slider("Tokens per row, up to", TOKENS, value=64, **bound(PAGE, "pass_tokens"))
    context = c3.slider("KV cache length per row", 16, 4096, 150, step=16, **bound(PAGE, "pass_context"))
    go_passes = st.form_submit_button("Measure passes", type="primary")
if go_passes:
    if not batches:
        st.error("Pick at least one batch size.", icon=":material/error:")
    elif too_long := context_problem(max(batches), context, ON_GPU, "lower the batch size or the KV cache length"):
        st.error(too_long, icon=":material/error:")
    elif max(batches) * max_tokens > PASS_GUARD:
        st.error(
            f"batch {max(batches)} × {max_tokens} tokens = {max(batches) * max_tokens} tokens in one pass, above this page's "
            f"guard of {PASS_GUARD:,}. Fix: lower the batch size or the tokens per row.",
            icon=":material/error:",
        )
    else:
        with resources.model_turn(st.empty()):
            try:
                with st.spinner("Timing forward passes (median of 5 each)…"):
                    tokens_list = [t for t in TOKENS if t <= max_tokens]
                    st.session_state["pass_rows"] = pass_costs(pair, sorted(batches), tokens_list, context, repeats=5)
            except MEASURE_ERRORS as exc:
                show_failure("The measurement failed", exc)
rows = st.session_state.get("pass_rows")
if rows:
    st.plotly_chart(roofline.pass_cost_figure(rows, n_star), width="stretch", key="pass_fig")
    free = roofline.memory_bound_span(rows)
    one = min(rows, key=lambda r: (r["batch"], r["tokens_per_pass"]))
    if free:
        st.markdown(
            f"At batch {one['batch']}, a pass of **{free} token{'s' if free > 1 else ''}** costs at most 1.25× a "
            f"single-token pass ({one['ms']:.1f} ms): up to there, verifying draft tokens (or decoding more sequences) "
            "is almost free."
        )
    st.markdown(roofline.regime_summary(rows, probe.peak_bandwidth, probe.peak_flops, n_star))
    st.dataframe(pass_table(rows, probe.peak_bandwidth, probe.peak_flops), hide_index=True)

# --- 2. AR vs speculative over batch x depth ----------------------------------------------------
st.subheader("2 · AR vs speculative, batch × depth")
st.markdown(
    "The same effect end to end: each cell decodes the same prompts plainly and speculatively and divides the "
    "tokens/s, decoding alone. Blue: speculation measured faster; orange: slower (each cell prints its ratio). A winner is "
    "named only in the table's verdict column, by the rule under the grid, over the cell's interleaved rounds."
)
st.markdown(
    "**The question this grid answers:** at which batch size does speculating k tokens stop paying on this "
    "machine, and does a deeper k stop paying at a smaller batch?"
)
PROMPT_SETS = {"SpecLab's chat prompts": "chat", "Copy this text (extractive)": "extractive"}  # label -> prompt set
PROMPT_SETS |= {name: key for key, name in spec_bench_sets().items()}  # and each Spec-Bench task (engine/bench/prompts.py)
GRID_DRAFTERS = drafters.choices()  # label -> kind, the registry's (engine/drafters/__init__.py)
KINDS = list(GRID_DRAFTERS.values())
PREFERRED = [kind for kind in reversed(KINDS) if drafter_name(pair, kind)]  # the registry's strongest first: the EAGLE head
default_drafter = KINDS.index(PREFERRED[0]) if PREFERRED else 0
with st.form("grid_form"):
    g1, g2, g3, g4, g5 = st.columns(5)
    grid_batches = g1.multiselect("Batch sizes", [1, 2, 4, 8, 16, 32], default=[1, 4, 16], **bound(PAGE, "grid_batches"))
    grid_depths = g2.multiselect("Depths k", list(range(0, 13)), default=[2, 4, 8], **bound(PAGE, "grid_depths"))
    drafter = g3.radio(
        "Drafter",
        list(GRID_DRAFTERS),
        index=default_drafter,
        horizontal=True,
        **bound(PAGE, "grid_drafter"),
        help="Default: the EAGLE head where this pair has one.",
    )
    tokens = g4.slider("New tokens per sequence", 8, 64, 24, step=8, **bound(PAGE, "grid_tokens"))
    confidence = g5.slider(
        "Stop drafting below confidence",
        0.0,
        0.9,
        0.0,
        step=0.05,
        **bound(PAGE, "grid_conf"),
        help="Model drafters only: stop a sequence's draft once the product of the drafter's "
        "probabilities falls below this (the token that crosses it is still proposed); k is "
        "then the most a step drafts. 0 = off.",
    )
    t1, t2, t3, t4 = st.columns([3, 1, 1, 2])
    grid_prompts = t4.selectbox(
        "Prompts",
        list(PROMPT_SETS),
        **bound(PAGE, "grid_prompts"),
        help="What the rows decode: SpecLab's chat prompts, copy-this-text prompts (n-gram lookup's best case), or one "
        "task of Spec-Bench (the Benchmarks page measures them all).",
    )
    grid_trees = t1.multiselect(
        "Draft-tree sizes (nodes; each at every depth it fits, beside the chains)",
        [8, 16, 24, 32, 48, 64],
        default=[],
        **bound(PAGE, "grid_trees"),
        help="Tree drafting (EAGLE-2): width as a third way to fill a pass, beside batch and depth. EAGLE head or draft model.",
    )
    grid_topk = t2.slider("Tree top-k", 1, 8, 4, **bound(PAGE, "grid_topk"))
    grid_rounds = t3.slider(
        "Rounds per cell",
        1,
        MAX_GRID_ROUNDS,
        1,
        **bound(PAGE, "grid_rounds"),
        help="Interleaved rounds per batch size: every contender of the batch once per round, in turn. One round "
        "draws the grid fastest but names no winner; three or more let the rule name one.",
    )
    a1, a2 = st.columns([3, 2])
    adaptive = a1.checkbox(
        "Adaptive policies: also measure batch table (derived from this machine's pass cost) and "
        "goodput, each with the largest depth picked as its maximum",
        **bound(PAGE, "grid_adaptive"),
    )
    grid_contexts = a2.multiselect(
        "Contexts (tokens per row)",
        CONTEXTS,
        default=[0],
        **bound(PAGE, "grid_contexts"),
        help="Long context, the third axis: every row preceded by the same document (a guidebook shipped in "
        "assets/context/; the rows are then questions over it), so each row's KV cache holds about this many tokens when "
        "decoding starts. Every pass also reads the rows' caches, so the longer the context, the more room a verify pass "
        "has for draft tokens. One grid per context; 0 = the prompts above, no document.",
    )
    go_grid = st.form_submit_button("Measure the grid", type="primary")
if first_run:
    values = {
        "pass_batches": batches,
        "pass_tokens": max_tokens,
        "pass_context": context,
        "grid_batches": grid_batches,
        "grid_depths": grid_depths,
        "grid_drafter": drafter,
        "grid_tokens": tokens,
        "grid_conf": confidence,
        "grid_adaptive": adaptive,
        "grid_trees": grid_trees,
        "grid_topk": grid_topk,
        "grid_rounds": grid_rounds,
        "grid_prompts": grid_prompts,
        "grid_contexts": grid_contexts,
    }
    st.session_state["sweep_notices"] = url_fallbacks(raw, values, BOUND[PAGE])
for notice in st.session_state["sweep_notices"]:
    notice_box.warning(notice, icon=":material/link_off:")
if go_grid:
    kind = GRID_DRAFTERS[drafter]
    if not grid_batches or not grid_depths or not grid_contexts:
        st.error("Pick at least one batch size, one depth and one context.", icon=":material/error:")
    elif too_long := context_problem(max(grid_batches), max(grid_contexts), ON_GPU, "smaller batch sizes or contexts"):
        st.error(too_long, icon=":material/error:")
    elif adaptive and max(grid_depths) == 0:
        st.error(
            "The adaptive policies run with the largest depth as their maximum, and it is 0. Fix: add a depth "
            "above 0, or untick adaptive policies.",
            icon=":material/error:",
        )
    elif grid_trees and not drafters.branches(kind):
        st.error(
            f"Tree drafting needs a drafter with a distribution to branch on. Fix: choose the drafter {drafters.branching_names()}, "
            "or clear the tree sizes.",
            icon=":material/error:",
        )
    elif grid_trees and not any(tree_fits((n, grid_topk), d) for n in grid_trees for d in grid_depths):
        st.error(
            f"No picked depth can hold those tree sizes with top-{grid_topk} (a tree of k levels holds at most "
            "top-k + (k-1)·top-k² candidates). Fix: a larger depth or top-k, or smaller trees.",
            icon=":material/error:",
        )
    elif drafter_name(pair, kind) is None:
        st.error(drafters.missing(pair, kind, what="pair"), icon=":material/error:")
    elif (
        len(grid_contexts)
        * grid_rounds
        * len(grid_batches)
        * (len(grid_depths) * (1 + len(grid_trees)) + 1 + 2 * adaptive)
        * max(grid_batches)
        * tokens
        > 20_000
    ):
        st.error(
            "That grid would take many minutes on this machine. Fix: fewer or smaller batch sizes, fewer depths, fewer "
            "tokens, or fewer rounds.",
            icon=":material/error:",
        )
    else:
        with resources.model_turn(st.empty()):
            progress = st.empty()
            try:
                grids = [  # one grid per context, the rows of each keeping their context
                    bench(
                        pair,
                        sorted(grid_batches),
                        sorted(grid_depths),
                        drafter=kind,
                        max_new_tokens=tokens,
                        prompt_set=PROMPT_SETS[grid_prompts],
                        repeats=grid_rounds,
                        confidences=[float(confidence) if kind != "ngram" else 0.0],
                        policy=["fixed", *ADAPTIVE] if adaptive else "fixed",
                        trees=[(0, 0)] + [(n, grid_topk) for n in sorted(grid_trees)],
                        log=lambda line, c=c: progress.caption(f"measured (context {c}):" + line),
                        context=c,
                    )
                    for c in sorted(grid_contexts)
                ]
                rows = [r for g in grids for r in g["rows"]]
                st.session_state["grid"] = grids[0] | {"rows": rows, "contexts": sorted(grid_contexts)}
            except MEASURE_ERRORS as exc:
                show_failure("The measurement failed", exc)
            finally:
                progress.empty()


def draw_grid(grid: dict, rows: list[dict], context: int, suffix: str) -> None:
    """One context's grid: its speedup heatmap, table, verdicts, and the adaptive policies against the envelope."""
    has_adaptive = any(r.get("policy", "fixed") != "fixed" for r in rows)
    st.plotly_chart(speedup_figure(rows, context), width="stretch", key="grid_fig" + suffix)
    st.dataframe(grid_table(rows), hide_index=True, column_config=grid_help())
    st.caption(GRID_COLUMNS)
    shown = {key: name for name, key in PROMPT_SETS.items()}.get(grid.get("prompt_set", "chat"), grid.get("prompt_set"))
    if context:
        st.caption(f"Prompts: the document's questions, one per row, each after about {context:,} tokens of the document.")
    else:
        st.caption(f"Prompts: {md_escape(str(shown))} (the rows of a batch of B: the set's first B prompts, repeated where it has fewer).")
    st.markdown(grid_verdicts(rows))
    st.caption(RULE)
    unfair = grid_contention_note(rows)
    if unfair:
        st.warning(unfair, icon=":material/speed:")
    for line in tree_vs_chain(rows):
        st.markdown(f"- {line}")
    if has_adaptive:
        st.markdown(
            "**Adaptive policies against the best static choice.** At each batch size the shaded line is "
            "the best a fixed setting did in this grid: plain decoding or the best fixed depth, whichever measured "
            "faster. Does a load-aware policy ride along it, without being told each batch size's answer?"
        )
        env = envelope(rows)
        st.plotly_chart(envelope_figure(env), width="stretch", key="envelope_fig" + suffix)
        for line in envelope_summary(env):
            st.markdown(f"- {line}")
        st.dataframe(envelope_table(env), hide_index=True)
    conf = rows[0].get("confidence_threshold", 0.0) if rows else 0.0
    st.caption(
        f"{grid['drafter']}, {grid['max_new_tokens']} new tokens per sequence, "
        + (
            "adaptive policies ran once per batch size at the largest depth (their maximum; mean k = what they "
            "used), interleaved with the fixed depths, "
            if has_adaptive
            else ""
        )
        + (f"drafts stopped below joint confidence {conf:.2f}, " if conf else "")
        + (f"{grid['repeats']} interleaved rounds per cell (the median shown) on " if grid["repeats"] > 1 else "one run per cell on ")
        + f"{grid['device']} {grid['dtype']}: read trends, not the second decimal, and a winner only where the rule names one."
    )


grid = st.session_state.get("grid")
if grid:
    contexts = grid.get("contexts", [0])
    if len(contexts) > 1:
        st.markdown("**Speedup against context**, each cell at every context measured (decoding alone):")
        st.plotly_chart(context_figure(grid["rows"]), width="stretch", key="context_fig")
        for line in context_lines(grid["rows"]):
            st.markdown(f"- {line}")
    for c in contexts:
        if len(contexts) > 1:
            st.markdown(f"#### Context {c:,} tokens per row" if c else "#### No document (context 0)")
        draw_grid(grid, [r for r in grid["rows"] if r.get("context", 0) == c], c, f"_{c}" if c != contexts[0] else "")
