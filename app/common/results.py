"""Draw a decoded AR + speculative trace pair: race replay, summary, tokens, charts, source, downloads.

Shared by the Playground (traces just decoded here, peaks from the live probe) and Replay (uploaded
or shipped traces, peaks from the trace's meta["probe"]). Everything it shows is derived from the
two traces (depth and temperature from `trace.config`, dtype from `trace.summary`/`trace.meta`), so
a trace drawn in Replay looks as it did in the Playground that recorded it. It may call st.*;
the figures and HTML come from the pure views in app/views.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass

import streamlit as st

from app.views import charts, depth_policy, fairness, metrics, race, tokens
from app.views.safe import md_escape, md_text
from engine import Trace, sampling
from engine.trace.achieved import utilization_summary
from engine.trace.rates import ranking_rate
from engine.verdict import RULE

BARROW = "https://jbarrow.ai/2026-10-08-why-is-speculative-decoding-fast"
DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Peaks:
    """The measured hardware peaks the utilisation chart divides by, and the machine they belong to."""

    peak_bandwidth: float  # bytes/s
    peak_flops: float  # FLOP/s in `dtype`
    dtype: str
    device_name: str

    @classmethod
    def from_probe(cls, probe) -> Peaks:
        """From a live engine.hardware.HardwareProbe."""
        return cls(probe.peak_bandwidth, probe.peak_flops, probe.dtype, probe.device_name)

    @classmethod
    def from_meta(cls, trace: Trace) -> Peaks | None:
        """From trace.meta["probe"] (HardwareProbe.to_dict), or None when the trace did not record them."""
        raw = trace.meta.get("probe")
        if not isinstance(raw, dict):
            return None
        try:
            bandwidth, flops = float(raw["peak_bandwidth"]), float(raw["peak_flops"])
        except (KeyError, TypeError, ValueError):
            return None
        if not (bandwidth > 0 and flops > 0):
            return None
        return cls(bandwidth, flops, str(raw.get("dtype", "")), str(raw.get("device_name", "")))


def gauge_name(trace: Trace) -> str:
    """The coarse busy gauge the engine sampled during the run, named for what it measures."""
    return "NVML GPU util (time a kernel ran)" if trace.meta.get("util_source") == "nvml" else "psutil CPU % (system-wide)"


def gauge_note(gauge: str) -> str:
    """One sentence on what the coarse gauge does and does not say."""
    if gauge.startswith("NVML"):
        return (
            "NVML's GPU utilisation is the share of each sample period in which some kernel was running, not how "
            "much of the GPU it used: one small kernel at a time reads as 100%."
        )
    return (
        "psutil's cpu_percent is system-wide (every process on the machine, all cores) and sampled coarsely, so "
        "it also counts other work and says nothing about which units were busy."
    )


def trace_dtype(trace: Trace) -> str:
    return str(trace.summary.get("dtype") or trace.meta.get("dtype") or "")


def set_float32():
    st.session_state["fp32"] = True


def show_results(
    ar: Trace,
    spec: Trace,
    peaks: Peaks | None,
    gauge: str,
    *,
    stale: bool = False,
    offer_float32: bool = False,
    peaks_where: str = "on this machine",
    downloads: bool = True,
    threads: str | None = None,
    rounds: list[dict] | None = None,
    shown_round: int = 0,
) -> None:
    """Draw the pair. `peaks` None: the utilisation chart is replaced by a note (the rest needs no peaks).

    stale: the controls changed since these traces were decoded. offer_float32: show a "Switch to
    float32" button beside a bf16 divergence note (the Playground's fp32 toggle; key "fp32").
    downloads: offer the two traces as JSON files (the Playground; Replay's visitor has them).
    threads: this server's torch threads and why, for a live run's machine line (engine.hardware.thread_line).
    rounds: every interleaved round's rates (`metrics.round_rates`, in the order run), of which `ar` and `spec` are
    round `shown_round`; None: the pair is the only round (Replay). A winner is named only by the one rule over them.
    """
    n = len(ar.sequences)
    depth = int(spec.config.get("depth", 0))
    greedy = float(spec.config.get("temperature", 0.0)) == 0
    dtype = trace_dtype(spec)
    m = metrics.compare(ar, spec)
    if stale:
        st.info("These results are from earlier settings. Press **Run** to decode with the current ones.")

    st.subheader("Race replay")
    st.caption(
        "Both lanes on one clock at their measured speed: the replay only plays back the recorded steps, "
        'the model is not rerun. Hover a token for its draft and target probabilities. Each lane\'s "finished in" is '
        "its whole run, the prompt's pass (prefill) included; the speedups below are decoding alone."
    )
    ar_recs, spec_recs = tokens.token_records(ar.steps, n), tokens.token_records(spec.steps, n, greedy=greedy)
    spec_label = f"Speculative (k={depth}, {spec.meta.get('draft_name') or 'no drafter'})"
    st.iframe(
        race.race_html(ar_recs, spec_recs, ar.summary["wall_s"], spec.summary["wall_s"], spec_label=spec_label), height=race.race_height(n)
    )

    _summary(ar, spec, m, depth, threads, rounds or [metrics.round_rates(ar, spec)], shown_round)
    _divergence_note(m, greedy, dtype, offer_float32)
    _token_lanes(ar_recs, spec_recs, m["first_differences"], depth, spec, n)
    _under_the_hood(ar, spec, peaks, gauge, peaks_where)
    _depth_policy_and_source(spec)

    if not downloads:  # Replay: the visitor has the files already (and a 32 MB trace need not be serialised again)
        return
    with st.expander("Download the traces (open them in Replay, or read the JSON)"):
        t1, t2 = st.columns(2)
        t1.download_button("AR trace (JSON)", json.dumps(ar.to_dict()), "speclab-ar.json", "application/json")
        t2.download_button("Speculative trace (JSON)", json.dumps(spec.to_dict()), "speclab-spec.json", "application/json")


def _rate_help(s: dict) -> str:
    """How a lane's decoding rate was measured, with its time to first token and the whole-run rate beside it."""
    if s["decode_tokens_per_s"] is None:  # no decode step: ranked by its whole run (engine/trace/rates.py's one rule)
        return f"{s['new_tokens']} tokens in {s['wall_s']:.2f} s, the prompt's prefill included (no decode step: every token came from it)"
    return (
        f"Tokens after the first ÷ the time after it. Time to first token (the prompt's prefill) {s['ttft_s'] * 1000:.0f} ms; "
        f"time per output token {metrics.fmt(s.get('tpot_ms'), '.1f', ' ms')}; whole run {s['tokens_per_s']:.1f} tokens/s "
        f"({s['new_tokens']} tokens in {s['wall_s']:.2f} s)."
    )


def _acceptance_tiles(m: dict, k_used, depth: int) -> None:
    """Acceptance rate, α, τ and the k drafted, told apart under their tiles."""
    a1, a2, a3, a4 = st.columns(4)
    a1.metric("Acceptance rate", metrics.fmt(m["acceptance_rate"], ".0%"), help="accepted draft tokens / drafted tokens")
    a2.metric("α", metrics.fmt(m["alpha"], ".2f"), help="Per-token acceptance, Leviathan's α: accepted / (accepted + rejections)")
    a3.metric(
        "Tokens per step (τ)",
        metrics.fmt(m["tokens_per_step"], ".2f"),
        help="A sequence's tokens per speculative step: mean accepted + 1, over the steps that drafted (AR: 1.00); "
        "Spec-Bench's τ. Not the tokens a pass carries (batch × (k + 1), the glossary's tokens per pass)",
    )
    a4.metric(
        "k drafted",
        metrics.fmt(k_used, ".2f"),
        help=f"The depth actually drafted: mean draft tokens per sequence per decode step (configured k = "
        f"{depth}; a confidence gate, short n-gram matches, a depth policy or the end of a sequence make "
        "it smaller). The predictions below use this k.",
    )
    st.caption(
        "Acceptance rate counts every drafted token, those after a first rejection too (never judged, so never kept); α "
        "counts only the tokens the target judged, so it is the higher of the two. τ counts a row's tokens per drafting "
        "step; k drafted, its guesses per step (glossary)."
    )


def _summary(ar: Trace, spec: Trace, m: dict, depth: int, threads: str | None, rounds: list[dict], shown: int) -> None:
    """The run's numbers: speed over the rounds and the one rule's verdict, acceptance, the predictions beside them,
    FLOPs, and the fairness notes."""
    st.subheader("Summary")
    st.caption(metrics.machine_line(spec, threads))
    verdict, whole = metrics.speed_verdict(rounds), metrics.whole_run_verdict(rounds).ratio
    k_used = m["drafted_depth"]
    c1, c2, c3, c4 = st.columns(4)
    drawn = f" Round {shown + 1} of {len(rounds)}, the median round by decoding-alone speedup." if len(rounds) > 1 else ""
    c1.metric(
        "AR tokens/s, decoding",
        metrics.fmt(ranking_rate(ar.summary), ".1f"),
        help=_rate_help(ar.summary) + drawn,
    )
    c2.metric(
        "Speculative tokens/s, decoding",
        metrics.fmt(ranking_rate(spec.summary), ".1f"),
        delta=None if m["speedup"] is None else f"{(m['speedup'] - 1) * 100:+.0f}% vs AR" + (" (this round)" if drawn else ""),
        delta_color="off",  # a colour would name a winner: only the one rule does (the line under these numbers)
        help=_rate_help(spec.summary) + drawn,
    )
    c3.metric(
        "Measured speedup",
        metrics.fmt(verdict.ratio, ".2f", "×"),
        delta=f"whole run {whole:.2f}×" + (f", {len(rounds)} rounds" if len(rounds) > 1 else ""),  # not the drawn round's
        delta_color="off",
        help=f"Decoding alone: speculative ÷ AR tokens/s after each lane's first token, the typical ratio (geometric mean) "
        f"over {len(rounds)} interleaved round{'s' if len(rounds) > 1 else ''}. The whole run (the prompt's prefill "
        "included: the target's is the same in both lanes, and a model drafter reads the prompt too in the speculative "
        "lane) dilutes it toward 1, and a drafter's own prefill can pull it below.",
    )
    c4.metric("Target forwards", f"{m['spec_target_forwards']} vs {m['ar_target_forwards']}", help="speculative vs AR, prefill included")
    _acceptance_tiles(m, k_used, depth)
    p1, p2, p3, p4 = st.columns([1, 1.5, 0.75, 0.75])  # room for the long label, not cut off
    p1.metric(
        "Leviathan predicted",
        metrics.fmt(m["predicted_speedup"], ".2f", "×"),
        help="Leviathan et al. 2023, Theorem 3.8: (1-α^(k+1)) / ((1-α)(k·c+1)) with the measured α, the k "
        "drafted and c. Assumes a verify pass costs one AR step.",
    )
    p2.metric(
        "Leviathan with the measured verify cost",
        metrics.fmt(m["predicted_measured_verify"], ".2f", "×"),
        help="E[tokens per step](α, k) / (k·c + T_verify / T_AR), with T_verify the speculative run's median "
        "verify time and T_AR the AR run's median step time"
        + (f" (here {m['median_verify_ratio']:.2f}×)." if m["median_verify_ratio"] is not None else "."),
    )
    p3.metric("c (draft / AR step)", metrics.fmt(m["c"], ".3f"), help="draft time per drafted token / mean AR step time")
    p4.metric(
        "Verify / AR step",
        metrics.fmt(m["median_verify_ratio"], ".2f", "×"),
        help="median verify pass time of the speculative run / median AR step time: 1.00× means verifying "
        "k+1 tokens cost no more than one plain token",
    )
    _verdict_lines(rounds, shown)
    _flops_metrics(m)
    fair = fairness.contention_note(ar.summary, spec.summary)
    if fair:
        st.warning(fair, icon=":material/balance:")
    load = fairness.load_line(ar.summary, spec.summary)
    if load:
        st.caption(load + " Measured with time.process_time, psutil.cpu_times and os.getloadavg (engine/loadmeter.py).")
    st.caption(
        metrics.arithmetic_line(m, verdict) + f" See J. Barrow, [“Why is speculative decoding fast?”]({BARROW}) (2026) "
        "and Leviathan et al., “Fast Inference from Transformers via Speculative Decoding” (2023)."
    )


def _verdict_lines(rounds: list[dict], shown: int) -> None:
    """The one rule's verdict with its interval, the rule under it, every round's rates, and the whole-run check."""
    st.markdown(f"**{metrics.verdict_sentence(metrics.speed_verdict(rounds))}**")
    st.caption(RULE + " " + metrics.rounds_line(rounds, shown))
    excess = metrics.whole_run_excess(rounds)
    if excess:
        st.warning(excess, icon=":material/schedule:")


def _flops_metrics(m: dict) -> None:
    f1, f2, f3, f4 = st.columns(4)
    f1.metric("AR FLOPs", metrics.fmt_flops(m["ar_flops"]), help="counted (engine/costs.py), prefill included")
    f2.metric(
        "Speculative FLOPs",
        metrics.fmt_flops(m["spec_flops"]),
        delta=None if m["flops_ratio"] is None else f"{m['flops_ratio']:.2f}× AR",
        delta_color="off",
        help="counted, prefill included; the delta is the measured FLOPs ratio",
    )
    f3.metric(
        "FLOPs wasted on rejections",
        metrics.fmt_flops(m["flops_wasted"]),
        help="target and drafter FLOPs spent on draft tokens the target rejected",
    )
    f4.metric(
        "Leviathan operations factor",
        metrics.fmt(m["operations_factor"], ".2f", "×"),
        help="Theorem 3.11: (k·ĉ + k + 1) / E[tokens per step](α, k), the predicted FLOPs ratio over the "
        "decode steps, with ĉ = draft FLOPs per drafted token / target FLOPs per token"
        + (f" (here {m['c_hat']:.3f})." if m["c_hat"] is not None else "."),
    )


def _divergence_note(m: dict, greedy: bool, dtype: str, offer_float32: bool) -> None:
    shown_dtype = dtype if dtype in DTYPES else md_text(dtype)  # trace text: a known name, or shown literally
    note = metrics.divergence_note(greedy, shown_dtype, m["first_differences"])
    if note:
        col_a, col_b = st.columns([5, 1], vertical_alignment="center")
        col_a.warning(note, icon=":material/flag:")
        if offer_float32 and greedy and dtype != "float32":
            col_b.button("Switch to float32", on_click=set_float32, key="to_fp32")


def _token_lanes(ar_recs, spec_recs, diffs, depth: int, spec: Trace, n: int) -> None:
    st.subheader("Tokens")
    left, right = st.columns(2)
    box_height = 560 if n > 4 else "content"
    with left:
        st.markdown("**Autoregressive** — one target pass per token")
        with st.container(height=box_height, border=False):
            st.html(tokens.lane_html(ar_recs, diffs, speculative=False))
    with right:
        st.markdown(f"**Speculative** — k = {depth}, drafter: {md_text(spec.meta.get('draft_name') or 'none')}")
        with st.container(height=box_height, border=False):
            st.html(tokens.lane_html(spec_recs, diffs, speculative=True))


def _under_the_hood(ar: Trace, spec: Trace, peaks: Peaks | None, gauge: str, peaks_where: str) -> None:
    st.subheader("Under the hood")
    g1, g2 = st.columns(2)
    g1.plotly_chart(charts.latency_figure(ar, spec), width="stretch", key="chart_latency")
    g2.plotly_chart(charts.tokens_per_pass_figure(ar, spec), width="stretch", key="chart_tpp")
    g3, g4 = st.columns(2)
    if peaks is not None:
        g3.plotly_chart(
            charts.utilization_figure(ar, spec, peaks.peak_bandwidth, peaks.peak_flops, gauge), width="stretch", key="chart_util"
        )
        g3.caption(
            f"Peaks measured {peaks_where}: {peaks.peak_bandwidth / 1e9:.0f} GB/s, {peaks.peak_flops / 1e9:.0f} GFLOP/s "
            f"({md_escape(peaks.dtype)}). The bandwidth and FLOP/s lines are modelled: SpecLab's counted bytes and FLOPs "
            "(engine/costs.py) divided by each step's measured pass time (CUDA events on a GPU), not hardware counters. "
            + gauge_note(gauge)
            + " Median step: "
            + md_escape(
                utilization_summary(
                    spec.steps, peaks.peak_bandwidth, peaks.peak_flops, str(spec.meta.get("device", "")), spec.meta.get("util_source")
                )
            )
            + "."
        )
    else:
        g3.info(
            "The hardware-utilisation chart needs the recording machine's measured peak bandwidth and FLOP/s, and "
            "these traces do not carry them (no meta.probe). Traces downloaded from the Playground record them.",
            icon=":material/speed:",
        )
    if spec.summary.get("per_position_acceptance"):
        g4.plotly_chart(charts.acceptance_figure(spec), width="stretch", key="chart_accept")
    else:
        g4.info("No draft tokens were proposed in this run (depth 0, policy off, or no n-gram matches).")


def _depth_policy_and_source(spec: Trace) -> None:
    st.markdown(f"**Depth policy.** {depth_policy.depth_summary(spec)}")
    st.plotly_chart(depth_policy.depth_figure(spec), width="stretch", key="chart_depth")
    st.caption(
        "k is what each decode step drafted: the policy's choice, never more than the longest row can still "
        "use; the n-gram drafter drafts nothing where it finds no match, and a confidence threshold can stop a "
        "row early (hover a step for the rows' mean). Diamonds: a tree step's nodes per row (k is then the tree's "
        "depth). The batch shrinks as sequences finish."
    )

    with st.expander("Show the source: how the target accepts or rejects draft tokens"):
        st.caption("The real engine functions this run used (engine/sampling.py), after Leviathan et al. 2023, Alg. 1.")
        st.code(inspect.getsource(sampling.accept_greedy), language="python")
        st.code(inspect.getsource(sampling.accept_or_resample), language="python")
