"""How each lesson's measurement is drawn on the Lessons page: one `show_<experiment>(measurement, settings)`
per experiment (the `SHOW` table), and the handful of numbers a worksheet lists (`key_numbers`).

The measurement is the checked dict of app/lessons/measurement.py, live or recorded; every conclusion shown
is computed from it (app/lessons/conclusions.py)."""

from __future__ import annotations

import streamlit as st

from app.lessons import conclusions, load
from app.lessons.experiments import PLAIN
from app.views import metrics, roofline


def show_memory_bound(m: dict, s: dict) -> None:
    rows = m["rows"]
    st.plotly_chart(roofline.pass_cost_figure(rows, m.get("ridge_tokens")), width="stretch", key="lesson1_fig")
    st.plotly_chart(
        roofline.peak_share_figure(rows, m["peak_bandwidth"], m["peak_flops"], m.get("ridge_tokens")), width="stretch", key="lesson1_peaks"
    )
    st.caption(
        f"The regime is read from the numbers: {roofline.REGIME_RULE}. The bandwidth and FLOP/s are SpecLab's "
        "counted bytes and FLOPs over the measured time, not hardware counters; a share above 100% means the "
        "quick probe's copy and matmul underestimate what this pass reaches (caches, a different kernel)."
    )
    st.success("\n\n".join(conclusions.memory_bound_conclusion(m)))


def _lane_line(name: str, lane: dict) -> str:
    s = lane["summary"]
    return f"{name}: {s['tokens_per_s']:.1f} tokens/s, {s['target_forwards']:.0f} target passes, {s['flops'] / 1e9:.1f} GFLOP"


def show_more_flops(m: dict, s: dict) -> None:
    st.markdown("- " + _lane_line("plain", m["ar"]) + "\n- " + _lane_line("speculative", m["spec"]))
    st.success(conclusions.more_flops_conclusion(m["m"]))
    seed = m["seed"]
    st.markdown(
        f"**Barrow's example: {seed['passes'][0]['tokens_per_pass']} tokens per pass, made two ways** (one "
        f"target pass each over a {seed['context']}-token context; {seed['rounds']} rounds alternating the two, "
        "median of 5 timed passes per round; FLOPs and bytes are the engine's counts, engine/costs.py)"
    )
    st.dataframe(
        [
            {
                "pass": p["label"],
                "ms (median)": round(p["ms"], 2),
                "rounds (ms)": ", ".join(f"{t:.1f}" for t in p["times_ms"]),
                "GFLOP": round(p["flops"] / 1e9, 3),
                "weight MB": round(p["weight_bytes"] / 1e6, 1),
                "KV MB": round(p["kv_bytes"] / 1e6, 2),
            }
            for p in seed["passes"]
        ],
        hide_index=True,
    )
    st.info(conclusions.seed_conclusion(seed))


def show_past_the_ridge(m: dict, s: dict) -> None:
    name, depth = conclusions.drafter_label(m["drafter"]), int(s["depth"])
    runs = sorted(m["runs"], key=lambda r: r["batch"])
    lines = [conclusions.ridge_run_line(name, r["batch"], r, depth) for r in runs]
    lines.append(conclusions.ridge_run_line("n-gram lookup, extractive prompts", runs[-1]["batch"], m["ngram"], depth))
    st.markdown("\n".join(lines))
    st.success("\n\n".join(conclusions.past_the_ridge_conclusion(m, depth)))


def show_turn_it_off(m: dict, s: dict) -> None:
    ar, on, off = m["ar"]["summary"], m["on"]["summary"], m["off"]
    base, n, batch = ar["tokens_per_s"], int(s["n"]), int(s["batch"])
    spec_steps = off["speculated_steps"]
    st.markdown(
        f"- plain: {base:.1f} tokens/s\n"
        f"- speculation always on (α = {on['alpha'] or 0:.2f}): {on['tokens_per_s']:.1f} tokens/s "
        f"({on['tokens_per_s'] / base:.2f}×)\n"
        f"- off above batch {n}: {off['summary']['tokens_per_s']:.1f} tokens/s "
        f"({off['summary']['tokens_per_s'] / base:.2f}×); "
        + (
            f"it speculated on {spec_steps} of {off['decode_steps']} decode steps, the ones after the batch had shrunk "
            f"to {n} or fewer sequences"
            if spec_steps
            else f"it never speculated: more than {n} sequences decoded at every step"
        )
    )
    better = "beat" if off["summary"]["tokens_per_s"] > on["tokens_per_s"] else "did not beat"
    st.success(f"At batch {batch} the load-aware policy {better} always-on speculation on this machine.")


def _gate_line(name: str, lane: dict, base: float) -> str:
    s = lane["summary"]
    rejected = s["drafted_tokens"] - s["accepted_tokens"]
    return (
        f"{name}: {s['tokens_per_s']:.1f} tokens/s ({s['tokens_per_s'] / base:.2f}× plain), "
        f"{s['drafted_tokens']:.0f} drafted, {rejected:.0f} rejected, α = {s['alpha'] or 0:.2f}, "
        f"{metrics.fmt_flops(s['flops_wasted'])} on rejected drafts"
    )


def show_adaptive(m: dict, s: dict) -> None:
    depth, conf = int(s["depth"]), float(s["conf"])
    lines = []
    for r in m["batches"]:
        base = r["ar"]["summary"]["tokens_per_s"]
        lines.append(f"- **batch {r['batch']}**, plain {base:.1f} tokens/s")
        lines.append("  - " + _gate_line(f"all {depth} drafts", r["fixed"], base))
        lines.append("  - " + _gate_line(f"stop below {conf:.2f}", r["gated"], base))
    st.markdown(f"Drafter: {conclusions.drafter_label(m['drafter'])}.\n" + "\n".join(lines))
    st.success(conclusions.adaptive_conclusion(m, depth))


def show_by_load(m: dict, s: dict) -> None:
    rows = m["rows"]
    st.markdown(
        f"Drafter: {conclusions.drafter_label(m['drafter'])}, one run per cell (single runs are noisy: read "
        "trends, not the second decimal)."
    )
    st.plotly_chart(load.load_figure(rows), width="stretch", key="lesson_load_fig")
    st.dataframe(load.load_table(rows, PLAIN), hide_index=True)
    st.success("\n\n".join(load.conclusion(rows)))


def show_width(m: dict, s: dict) -> None:
    st.markdown(
        f"Drafter: {conclusions.drafter_label(m['drafter'])}; one run per cell, the three contenders "
        "interleaved at each batch size (single runs are noisy: read trends, not the second decimal)."
    )
    st.dataframe(conclusions.width_table(m), hide_index=True)
    st.success("\n\n".join(conclusions.width_conclusion(m)))


SHOW = {
    "memory_bound": show_memory_bound,
    "more_flops": show_more_flops,
    "past_the_ridge": show_past_the_ridge,
    "turn_it_off": show_turn_it_off,
    "adaptive": show_adaptive,
    "by_load": show_by_load,
    "width": show_width,
}


def key_numbers(name: str, m: dict, s: dict) -> list[tuple[str, str]]:
    """The handful of measured numbers a worksheet lists for each experiment."""
    f = metrics.fmt
    if name == "memory_bound":
        return [(f"{r['tokens_per_pass']} token(s) per pass", f"{r['ms']:.2f} ms") for r in m["rows"]] + [
            ("ridge (probed peaks), tokens per pass", f(m.get("ridge_tokens"), ".0f"))
        ]
    if name == "by_load":
        return [(f"batch {r['batch']}, {r['contender']}", f"{r['tokens_per_s']:.1f} tokens/s") for r in m["rows"]]
    if name == "width":
        return [
            (
                f"batch {r['batch']}, {r['contender']} ({r['tokens_per_pass']} tokens per pass)",
                f"{r['tokens_per_s']:.1f} tokens/s, {f(r.get('tokens_per_step'), '.2f')} emitted per pass",
            )
            for r in m["rows"]
        ]
    if name == "past_the_ridge":
        pairs = [(f"batch {r['batch']}", r["m"]) for r in m["runs"]] + [("n-gram", m["ngram"]["m"])]
    elif name == "adaptive":
        pairs = [(f"batch {r['batch']} {w}", r[f"m_{w}"]) for r in m["batches"] for w in ("fixed", "gated")]
    else:  # more_flops, turn_it_off: one plain and one speculative lane
        pairs = [("speculative", m["m"])]
    out = []
    for label, c in pairs:
        out += [
            (f"{label}: speedup", f(c.get("speedup"), ".2f", "×")),
            (f"{label}: α", f(c.get("alpha"))),
            (f"{label}: depth drafted k", f(c.get("drafted_depth"))),
            (f"{label}: c", f(c.get("c"), ".3f")),
            (f"{label}: FLOPs ratio", f(c.get("flops_ratio"), ".2f", "×")),
        ]
    if name == "more_flops":
        out += [
            (p["label"], f"{p['ms']:.2f} ms, {p['flops'] / 1e9:.2f} GFLOP, KV {p['kv_bytes'] / 1e6:.1f} MB") for p in m["seed"]["passes"]
        ]
    return out
