"""How each lesson's measurement is drawn on the Lessons page: one `show_<experiment>(measurement, settings)`
per experiment (the `SHOW` table), and the handful of numbers a worksheet lists (`key_numbers`).

The measurement is the checked dict of app/common/measurement.py, live or recorded; every conclusion shown
is computed from it (app/lessons/conclusions.py)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app.common import measurement
from app.lessons import conclusions, figures, gpu, load, noise, pass_show, probe_note, retime, switch, width_steps
from app.lessons.experiments import PLAIN
from app.lessons.pass_conclusions import per_token
from app.views import metrics


def _chart(fig, key: str) -> None:
    st.plotly_chart(fig, width="stretch", key=key)


def _table(rows: list[dict]) -> None:
    st.dataframe(rows, hide_index=True, height=figures.table_height(rows))


def _noise_note(rows: list[dict]) -> None:
    if not any(figures.spread_of(r) for r in rows):
        st.caption("One run per cell: single runs are noisy, so read trends, not the second decimal.")


SETTING_NAMES = {  # what a chosen setting is, in the lesson's words (the glossary's "room")
    "k": "depth k",
    "depth": "depth k",
    "batch": "batch",
    "n": "switch N (speculate at N rows or fewer)",
    "tokens": "new tokens",
    "most": "deepest k the load-aware policies may draft",
    "mid": "middle batch (one guess a row fits the room)",
    "past": "largest batch (fixed k's verify pass at 4× the room)",
    "nodes": "tree nodes",
    "topk": "children per node",
}


def _settings_note(m: dict, s: dict) -> None:
    """The settings the run resolved to (a setting left at 0 is chosen from this machine's pass curve), named."""
    c = m.get("chosen")
    if c:
        chosen = [f"{SETTING_NAMES.get(k, k)} {v}" for k, v in c.items() if k != "room"]
        from_curve = [SETTING_NAMES.get(k, k) for k, v in s.items() if v == 0 and k in c]
        st.caption(
            f"Settings of this run: {', '.join(chosen)}; this machine's room: {c['room']} tokens per pass"
            + (
                f" ({', '.join(from_curve)}: chosen from this machine's pass curve, because the setting was left at 0)."
                if from_curve
                else "."
            )
        )


def show_turn_it_off(m: dict, s: dict, label: str = "") -> None:
    st.markdown(f"Drafter: {conclusions.drafter_label(m['on']['drafter'] or 'model')}.")
    _settings_note(m, s)
    _chart(figures.turn_it_off_figure(m, s, label), "lesson4_fig")
    steps = switch.steps_figure(m, label)  # the live batch and the depth at every step (None: an older recording)
    if steps is not None:
        _chart(steps, "lesson4_steps")
    _table(figures.turn_it_off_table(m, s))
    st.caption(
        "Decoding alone: the decode steps' tokens over their time, the prompt's pass (prefill) left out; the whole-run "
        "column keeps it in. Time per output token is what one request waits per token: this engine runs a batch "
        "until its slowest row ends (rows are not refilled); a server with continuous batching refills finished rows."
    )
    st.success("\n\n".join(conclusions.turn_it_off_conclusion(m, s)))


def show_adaptive(m: dict, s: dict, label: str = "") -> None:
    st.markdown(f"Drafter: {conclusions.drafter_label(m['drafter'])}.")
    _settings_note(m, s)
    _chart(figures.adaptive_figure(m, s, label), "lesson5_fig")
    _table(figures.adaptive_table(m, s))
    st.success(conclusions.adaptive_conclusion(m, int(s["depth"])))


def show_by_load(m: dict, s: dict, label: str = "") -> None:
    rows = m["rows"]
    st.markdown(f"Drafter: {conclusions.drafter_label(m['drafter'])}.")
    _settings_note(m, s)
    _chart(figures.by_load_figure(m, s, label), "lesson_load_fig")
    depths = load.depth_figure(m, label)  # the depth chosen at every step (None: an older recording)
    if depths is not None:
        _chart(depths, "lesson_load_depths")
    st.caption(
        "Decoding alone: the prompt's pass (prefill) is left out; the table's whole-run column keeps it in. Time per "
        "output token: measured where the run has it, else batch ÷ tokens/s (every request in a batch waits until "
        "its slowest row ends; this engine does not refill rows, continuous batching does)."
    )
    _noise_note(rows)
    _table(load.load_table(rows, PLAIN))
    lines = [line for line in (load.room_line(m),) if line] + load.conclusion(rows) + load.depth_lines(m)
    st.success("\n\n".join(lines))


def show_width(m: dict, s: dict, label: str = "") -> None:
    st.markdown(f"Drafter: {conclusions.drafter_label(m['drafter'])}; the contenders interleaved at each batch size.")
    _settings_note(m, s)
    _chart(figures.width_figure(m, s, label), "lesson7_fig")
    steps = width_steps.shapes_figure(m, label)  # what goodput chose per step (None: an older recording without it)
    if steps is not None:
        _chart(steps, "lesson7_steps")
        st.caption(width_steps.CAPTION)
    _noise_note(m["rows"])
    _table(conclusions.width_table(m))
    st.success("\n\n".join(conclusions.width_conclusion(m)))


SHOW = {  # lessons 1-3: app/lessons/pass_show.py
    "memory_bound": pass_show.show_memory_bound,
    "more_flops": pass_show.show_more_flops,
    "past_the_ridge": pass_show.show_past_the_ridge,
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
        return [(f"batch {r['batch']}, {r['contender']}", f"{load.load_rate(r):.1f} tokens/s decoding") for r in m["rows"]]
    if name == "width":
        return [
            (
                f"batch {r['batch']}, {r['contender']} ({'≈' * (r.get('mean_nodes') is not None)}{r['tokens_per_pass']} tokens per pass)",
                f"{load.load_rate(r):.1f} tokens/s decoding, {f(r.get('tokens_per_step'), '.2f')} emitted per pass",
            )
            for r in m["rows"]
        ]
    if name == "past_the_ridge":  # (label, compare numbers, the plain/speculative pair whose rounds give the speedup)
        pairs = [(f"batch {r['batch']}", r["m"], r) for r in m["runs"]] + [("n-gram", m["ngram"]["m"], m["ngram"])]
    elif name == "adaptive":
        pairs = [(f"batch {r['batch']} {w}", r[f"m_{w}"], None) for r in m["batches"] for w in ("fixed", "gated")]
    elif name == "turn_it_off":
        pairs = [("always-on", m["m"], {"ar": m["ar"], "spec": m["on"]})]
    else:  # more_flops: one plain and one speculative lane
        pairs = [("speculative", m["m"], m)]
    out = []
    for label, c, run in pairs:
        sp = noise.speedup(run) if run else None  # the one number the chart, its verdict and the prediction show
        out += [
            (f"{label}: speedup", f(sp["value"] if sp else c.get("speedup"), ".2f", "×")),
            (f"{label}: α", f(c.get("alpha"))),
            (f"{label}: depth drafted k", f(c.get("drafted_depth"))),
            (f"{label}: c", f(c.get("c"), ".3f")),
            (f"{label}: FLOPs ratio (whole run, prefill included)", f(c.get("flops_ratio"), ".2f", "×")),
        ]
    if name == "more_flops":
        ratios = per_token(m) or {}
        out += [("FLOPs per decoded token, speculative ÷ plain", f(ratios.get("flops"), ".2f", "×"))]
        out += [
            (p["label"], f"{p['ms']:.2f} ms, {p['flops'] / 1e9:.2f} GFLOP, KV {p['kv_bytes'] / 1e6:.1f} MB") for p in m["seed"]["passes"]
        ]
    return out


# --- the GPU panel --------------------------------------------------------------------------------
@st.cache_data(show_spinner=False)
def _gpu_curves() -> tuple[list, list[str]]:
    return gpu.recorded_curves()


RECORDINGS = Path(__file__).resolve().parents[2] / "assets" / "lessons"


@st.cache_data(show_spinner=False)
def _recording(name: str) -> dict | None:
    """The lesson's shipped recording (for a live probe to be compared with), None where it cannot be read."""
    try:
        return measurement.load_record(RECORDINGS / f"{name}.json")
    except (OSError, measurement.MeasurementError):
        return None


def chosen_settings(settings: dict | None, result: dict | None) -> dict:
    """The settings the run shown actually used: a knob left at 0 ("from this machine's curve") or absent takes the
    value the run chose and recorded (`result["measurement"]["chosen"]`), so the GPU panel marks the passes the
    student saw."""
    settings = dict(settings or {})
    m = result.get("measurement") if isinstance(result, dict) else None
    chosen = m.get("chosen") if isinstance(m, dict) else None
    for name, value in (chosen or {}).items():
        if not settings.get(name) and isinstance(value, int) and not isinstance(value, bool):
            settings[name] = value
    return settings


def show_gpu_panel(lesson_name: str, settings: dict, text: str = "", result: dict | None = None) -> None:
    """The lesson on a GPU, beside this machine's CPU: the lesson's own text, the lesson's run re-timed with SpecLab's
    recorded H200 pass costs (`result`: the result the page shows, live or recorded; app/lessons/retime.py), the recorded
    H200 pass curves (measured), the Predictor at the lesson's settings (model) and published results (cited). No model
    is loaded."""
    key = f"gpu_{lesson_name}_"
    settings = chosen_settings(settings, result)
    depth = int(settings.get("depth", settings.get("k", 4)) or 4)
    st.subheader("🖥 On a GPU")
    with st.expander(
        "Open: this run re-timed on an H200, the H200's measured passes, the roofline model and published results",
        expanded=False,
    ):
        if text:
            st.markdown(text)
        st.markdown(gpu.seed_sentence())
        if result is not None:
            _retimed(lesson_name, result, key)
        st.markdown("**Measured** (SpecLab's own runs on an NVIDIA H200)")
        curves, problems = _gpu_curves()
        for problem in problems:
            st.warning(f"A GPU recording could not be used: {problem}", icon=":material/warning:")
        if curves:
            marks = sorted({b * n for _, b, n in gpu.lesson_passes(lesson_name, settings)})
            _chart(gpu.curves_figure(curves, marks), key + "curves")
            st.caption(gpu.CAN_SHOW + " Dotted lines: the tokens per pass of this lesson's passes. " + gpu.knee_sentence(curves))
        st.markdown("**Model, not a measurement** (the roofline Predictor at this lesson's settings)")
        _chart(gpu.model_figure(lesson_name, settings), key + "model")
        _table(gpu.model_rows(lesson_name, settings))
        st.caption(
            gpu.model_label() + ". The line is one row carrying more tokens; the diamonds are this lesson's passes "
            "(more rows also read more KV cache). Data-sheet peaks are not reached by real kernels, so real passes "
            "take longer."
        )
        st.markdown(gpu.kv_sentence(depth=depth))
        cited = gpu.cited_rows(lesson_name)
        if cited:
            st.markdown("**Published** (acceptance depends on a trained drafter and real text, which random weights cannot show)")
            _table(cited)


def _retimed(lesson_name: str, result: dict, key: str) -> None:
    """The lesson's own run (live or recorded) beside the same steps re-timed with the recorded H200 pass costs."""
    m, label = result.get("measurement") or {}, str(result.get("label") or "")
    st.markdown(f"**Your run on an H200** ({retime.LABEL})")
    if lesson_name == "memory_bound":
        fig = retime.pass_figure(m.get("rows") or [], label)
        if fig is not None:
            _chart(fig, key + "retimed")
            st.caption(retime.machine_line() + ". " + retime.PASS_CAPTION)
        st.markdown(gpu.cpu_kv_sentence(m))
        st.caption(probe_note.pass_against_probe(m))
        note = probe_note.live_probe_note(m, label, _recording(lesson_name))
        if note:
            st.warning(note, icon=":material/warning:")
        return
    fig = retime.figure(m, label)
    if fig is None:
        recorded = result["source"] == "recorded" if "source" in result else None  # else the label says
        st.caption(retime.why_not(m, label, recorded))  # exactly why: a recording from before the shapes were kept, or what failed
        return
    _chart(fig, key + "retimed")
    _table(retime.rows(m))
    st.caption(" ".join([retime.machine_line() + ".", retime.CAPTION, *retime.drafting_lines(m)]))
    if lesson_name == "adaptive":  # what the gate trades on the H200, from the priced numbers
        st.markdown("\n\n".join(retime.gate_lines(m)))
