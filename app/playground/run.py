"""The Playground's runs: both lanes warmed up untimed, then decoded live in interleaved rounds (AR, speculative, AR,
speculative …, as app/lessons/kit/runs.py does for the lessons), what a load-aware policy priced k with, the draft-tree
viewer, and the shown round re-timed on an H200 (app/playground/playground.py calls them)."""

from __future__ import annotations

import time

import streamlit as st

from app.common import resources
from app.common.lane_stats import lane, median_index
from app.common.warm import warm
from app.playground.controls import Settings
from app.playground.policy_options import format_batch_table
from app.views import depth_policy, h200, metrics, tokens
from app.views import tree as tree_view
from engine import DecodeConfig, generate_steps
from engine.decoding.passcurve import pass_curve
from engine.decoding.policies import derived_table_for

LIVE_REFRESH_S = 0.25  # redraw the live lanes at most this often, so drawing barely touches the timings


def run_lane(pair, prompts: list[str], cfg: DecodeConfig, placeholder, title: str, prefix_cache=None):
    """Decode one lane, redrawing its tokens live; returns the Trace. prefix_cache: the pair's warm shared prefixes."""
    stream = generate_steps(pair, prompts, cfg, prefix_cache)  # validates prompts (ConfigError) before any model work
    steps = []
    last_draw = 0.0
    it = iter(stream)
    try:
        for step in it:
            steps.append(step)
            now = time.perf_counter()
            if now - last_draw >= LIVE_REFRESH_S:
                recs = tokens.token_records(steps, len(prompts), greedy=cfg.greedy)
                n = sum(len(s.emitted) for st_ in steps for s in st_.seqs)
                placeholder.html(
                    tokens.lane_html(
                        recs, max_seqs=4, speculative=cfg.speculative, status=f"{title}: decoding… step {step.index}, {n} tokens"
                    )
                )
                last_draw = time.perf_counter()
    finally:
        it.close()
    trace = stream.trace
    recs = tokens.token_records(trace.steps, len(prompts), greedy=cfg.greedy)
    placeholder.html(
        tokens.lane_html(recs, max_seqs=4, speculative=cfg.speculative, status=f"{title}: done in {trace.summary['wall_s']:.2f} s")
    )
    return trace


def warm_up(pair, prompts: list[str], cfgs, prefix_cache=None) -> float:
    """Each lane's config once, untimed, before any timed round (app/common/warm.py), the prompts' shared prefix filed in
    the pair's warm prefix cache. Returns the seconds it took."""
    return sum(warm(pair, prompts, cfg, prefix_cache)[1] for cfg in cfgs)


def run_both(pair, settings: Settings, live) -> dict:
    """Both lanes warmed up, then `settings.rounds` interleaved rounds, AR then speculative: never overlapping, so
    neither disturbs the other's timings, and a drift of the machine hits both alike. Keeps every round's rates
    (`metrics.round_rates`, in the order run) and the traces of the median round by decoding-alone speedup."""
    prompts = settings.prompts(pair)  # ConfigError (a context the model cannot hold): the page names it
    ar_cfg, spec_cfg = settings.config("autoregressive"), settings.config("speculative")
    with live.container():
        st.subheader("Decoding live")
        left, right = st.columns(2)
        left.markdown("**Autoregressive**")
        right.markdown("**Speculative**")
        ar_box, spec_box = left.empty(), right.empty()
        ar_box.caption("Warming up both lanes (a few untimed tokens each), so neither lane's clock carries a cold start…")
        spec_box.caption("Waits for the AR lane: the lanes never run at the same time, so their timings stay honest.")
    prefixes = resources.prefix_cache(settings.preset, settings.dtype)  # a long document is prefilled once (we hold the lock)
    warm_s = warm_up(pair, prompts, (ar_cfg, spec_cfg), prefixes)
    pairs, rounds = [], []
    for i in range(settings.rounds):
        tag = f" (round {i + 1} of {settings.rounds})" if settings.rounds > 1 else ""
        ar = run_lane(pair, prompts, ar_cfg, ar_box, "AR" + tag, prefixes)
        spec = run_lane(pair, prompts, spec_cfg, spec_box, "Speculative" + tag, prefixes)
        pairs.append((ar, spec))
        rounds.append(metrics.round_rates(ar, spec))
    shown = median_index([r["spec_decode"] / r["ar_decode"] for r in rounds])
    ar, spec = pairs[shown]
    return {"settings": settings, "ar": ar, "spec": spec, "rounds": rounds, "shown_round": shown, "warm_s": warm_s}


def policy_basis(pair, settings: Settings) -> dict | None:
    """What a load-aware policy priced k with: this machine's measured pass-cost curve (the run just made
    measured or loaded it, so this reads the cached curve) and, for a derived batch table, the table itself,
    computed by the engine's own engine.decoding.policies.derived_table_for."""
    if settings.policy not in ("batch_table", "goodput") or settings.batch_table is not None or settings.depth == 0:
        return None
    curve = pass_curve(pair)
    basis = {"tokens": list(curve.tokens), "ms": list(curve.ms), "measured_at": curve.measured_at, "table": None}
    if settings.policy == "batch_table":
        basis["table"] = derived_table_for(pair, DecodeConfig(depth=settings.depth, drafter=settings.drafter))
    return basis


def show_policy_basis(basis: dict) -> None:
    with st.expander("What the load-aware policy priced k with: this machine's measured pass cost"):
        if basis["table"] is not None:
            st.markdown(
                f"Derived batch table (batch range: k): `{format_batch_table(basis['table'])}`. Each range "
                "gets the k with the most expected tokens per second at its middle batch size, from the curve "
                "below and a prior acceptance; the run's own k per step is in the chart above."
            )
        else:
            st.markdown(
                "goodput prices every step with this curve (corrected by the steps' own measured verify and "
                "draft times) and the run's acceptance at each draft position so far."
            )
        st.plotly_chart(
            depth_policy.curve_figure(basis["tokens"], basis["ms"], basis["measured_at"][:10]), width="stretch", key="chart_curve"
        )


def show_trees(spec) -> None:
    """The speculative lane's draft trees, one (step, sequence) at a time (app/views/tree.py)."""
    items = tree_view.tree_steps(spec.steps)
    if not items:
        return
    totals = tree_view.tree_totals(spec.steps)
    with st.expander(
        f"Draft trees: {totals['mean_nodes']:.1f} nodes drafted, {totals['mean_accepted']:.2f} accepted "
        f"per sequence-step (mean of {totals['row_steps']})"
    ):
        pick = st.slider("Step (sequence-step of the speculative lane)", 1, len(items), 1, key="tree_pick") if len(items) > 1 else 1
        st.html(tree_view.tree_html(items[pick - 1], greedy=spec.config.get("temperature", 0) == 0))


def h200_view(ar, spec, label: str) -> tuple[object | None, list[dict], str]:
    """The shown round's two lanes re-timed with SpecLab's recorded H200 pass costs (app/views/h200.py, drafting
    priced or the bar drawn as a ceiling): (figure, table, caption), or (None, [], why) where no step could be
    priced."""
    m = {"ar": lane(ar), "spec": lane(spec)}
    caption = " ".join([h200.machine_line() + ".", h200.CAPTION, *h200.drafting_lines(m)])
    fig = h200.figure(m, label)
    return (fig, h200.rows(m), caption) if fig is not None else (None, [], h200.why_not(m, label, recorded=False))


def show_h200(ar, spec, label: str, shown: str) -> None:
    """The same decode steps on an H200, beside this machine's: where speculation's extra tokens per pass ride on
    idle arithmetic on the GPU while they cost time here, or the other way round. A model of the GPU's time from
    its recorded passes, never a run there (the label says so). `shown`: which round the bars re-time."""
    with st.expander(f"🖥 Your run on an H200 ({h200.LABEL})"):
        fig, rows, caption = h200_view(ar, spec, label)
        if fig is None:
            st.caption(caption)
            return
        st.plotly_chart(fig, width="stretch", key="chart_h200")
        st.dataframe(rows, hide_index=True)
        st.caption(
            f"The bars re-time {shown}, the round the charts above draw, so this machine's bar is that round's ratio; "
            "the measured speedup above is the rule's ratio over every round. " + caption
        )
