"""A lesson's own runs re-timed on the H200: the same decode steps priced with SpecLab's recorded H200 pass costs.

Each lane (app/common/measurement.py `lane`) and table cell (app/lessons/runs.py `run_stats`) carries `passes`, a
histogram `[tokens_per_pass, depth, steps]` of its decode steps, and `decode_tokens`. `h200_rate(lane)` prices
every step at the recorded time of one H200 pass of that many tokens (engine/roofline/retime.py: a straight line
between the recorded sizes on either side, never beyond them) and returns the decode tokens per second with a note
saying what was priced and how. Default curve: the Qwen2.5-7B shape replayed as a CUDA graph
(docs/measurements/h200-gpu_graphs.json, NVIDIA H200, 2026-11-30): a serving-sized model, timed the way servers run
it, recorded with no KV context. Drafting is priced only for the n-gram lookup (timed on the H200 machine,
docs/measurements/h200-gpu_bench.json); the distilled draft model and the EAGLE head were never timed there, so a
speculative lane's re-timed rate then counts the target's passes alone (a ceiling) and its note says so.

Every re-timed number is labelled LABEL with the recording's machine and date; a CPU number is never one of them.
Pure: no streamlit, no torch.
"""

from __future__ import annotations

import functools

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.lessons import gpu
from app.lessons.figures import COLORS, esc, frame
from engine.roofline.recordings import RecordingError
from engine.roofline.retime import DraftPrices, PassPrices, recorded_draft_prices, retime

LABEL = "re-timed from H200 recordings, not run on a GPU"
SHAPE, MODE = "qwen2.5-7b", "graph"
NAMES = {
    "ar": "plain",
    "spec": "speculative",
    "on": "always on",
    "off": "off above the batch limit",
    "fixed": "all drafts",
    "gated": "gated",
}
NAMES |= {"ngram": "n-gram"}
DRAFTERS = {"model": "distilled draft model", "eagle": "EAGLE head", "ngram": "n-gram lookup"}
SKIP = {"runs", "batches", "rows", "measurement", "m", "seed"}
CPU_COLOR, GPU_COLOR = COLORS[1], COLORS[0]
KNEE = gpu.KNEE_FACTOR
CAPTION = (
    "The same decode steps, the same tokens per pass and the same accepted tokens per step, each priced at the time "
    "the H200 took for one pass of that many tokens (a straight line between the recorded sizes, never beyond them). "
    "Acceptance is this run's; the recording's random weights only set the time. It read no KV cache, and the "
    "recorded passes kept logits for the last position only, so a long context or a wide verify pass would cost a "
    "little more there."
)
PASS_CAPTION = (
    "Each pass size this machine timed, beside the H200's recorded pass of the same size, each as a multiple of its "
    "own one-token pass (hover for the ms): a larger model (the Qwen2.5-7B shape) on a far faster memory, so the "
    "shapes compare, not the times. Where a line stays near 1× the extra tokens ride on idle arithmetic."
)


@functools.cache
def h200_prices(shape: str = SHAPE, mode: str = MODE) -> PassPrices | None:
    """The recorded H200 curve of `shape` in `mode` as pass prices, None where it is not shipped."""
    curves, _ = gpu.recorded_curves()
    c = next((c for c in curves if c.shape == shape and c.mode == mode), None)
    if c is None:
        return None
    how = "CUDA graph" if mode == "graph" else "eager"
    context = f"context {c.context}" if c.context else "no KV context (zero-context passes)"
    return PassPrices(c.tokens, c.ms, f"{c.device}, {c.date}: {c.shape} shape, random weights, {how}, {context} ({c.source})")


@functools.cache
def draft_prices(drafter: str) -> DraftPrices | None:
    try:
        return recorded_draft_prices(drafter)
    except RecordingError:
        return None


def machine_line(shape: str = SHAPE, mode: str = MODE) -> str:
    """The recording behind the re-timing: machine, date, shape, mode, context, file."""
    prices = h200_prices(shape, mode)
    return f"{LABEL}: {prices.label}" if prices else f"{LABEL}: no recorded H200 curve for {shape} ({mode})"


def is_lane(obj) -> bool:
    """A lane or table cell with pass shapes: `passes` as [tokens_per_pass, depth, steps] triples and `decode_tokens`
    (Barrow's seed passes, a list of pass dicts, are not one)."""
    passes = obj.get("passes") if isinstance(obj, dict) else None
    return (
        isinstance(passes, list)
        and isinstance(obj.get("decode_tokens"), (int, float))
        and all(isinstance(p, (list, tuple)) and len(p) == 3 and all(isinstance(x, (int, float)) for x in p) for p in passes)
    )


def _speculative(passes) -> bool:
    return any(int(d) > 0 and int(n) > 0 for _, d, n in passes)


def h200_rate(lane: dict, drafter: str | None = None, shape: str = SHAPE, mode: str = MODE) -> tuple[float | None, str]:
    """(decode tokens/s of the lane's steps re-timed on the recorded H200 passes, or None; a note saying why or how)."""
    if not is_lane(lane):
        return None, "not re-timed: this run was recorded without its pass shapes (run it live, or re-record it)"
    passes, tokens = lane["passes"], lane["decode_tokens"]
    prices = h200_prices(shape, mode)
    if prices is None:
        return None, f"not re-timed: no recorded H200 curve for {shape} ({mode})"
    speculative = _speculative(passes)
    drafter = drafter if drafter is not None else str(lane.get("drafter") or "")
    draft = draft_prices(drafter) if speculative and drafter else None
    try:
        r = retime(passes, int(tokens), prices, draft)
    except ValueError as exc:
        return None, f"not re-timed: {exc}"
    if r.outside:
        return None, (
            f"not re-timed: {r.outside} of {r.steps} steps carried up to {r.largest} tokens per pass, outside the recorded "
            f"{prices.tokens[0]}–{prices.tokens[-1]} (never extrapolated)"
        )
    if r.tokens_per_s is None:
        return None, "not re-timed: no decode steps"
    if not speculative:
        how = "no drafting (plain steps)"
    elif draft is not None:
        how = f"drafting {r.draft_ms / r.drafted_steps:.2f} ms per drafting step, from {draft.label}"
    else:
        how = (
            f"drafting not included: the {DRAFTERS.get(drafter, drafter or 'drafter')} was never timed on the H200, so "
            "this counts the target's passes alone (a ceiling on the rate)"
        )
    return r.tokens_per_s, f"{r.steps} decode steps at {r.target_ms / r.steps:.2f} ms per pass on average; {how}"


def h200_speedup(lane: dict, base: dict, drafter: str | None = None) -> tuple[float | None, str]:
    """Re-timed decode tokens/s of `lane` ÷ those of `base` (plain decoding at the same batch), with both notes."""
    rate, note = h200_rate(lane, drafter)
    base_rate, base_note = h200_rate(base)
    if rate is None or not base_rate:
        return None, note if rate is None else base_note
    return rate / base_rate, note


def speedup_bar(x: list[str], pairs: list[tuple[dict, dict]]) -> go.Bar:
    """For a lesson's own speedup chart: one bar per x category, the lane of each (lane, plain lane) pair re-timed on
    the H200 over its plain lane, named LABEL and hatched so it never reads as this machine's; a pair that cannot be
    re-timed gets no bar. Add it to the same subplot as the measured speedups (fig.add_trace(bar, row=, col=))."""
    values = [h200_speedup(lane, base)[0] for lane, base in pairs]
    return go.Bar(
        x=[esc(v) for v in x],
        y=values,
        name=esc(LABEL),
        marker={"color": GPU_COLOR, "pattern": {"shape": "/"}, "opacity": 0.6},
        text=[f"{v:.2f}× (H200)" if v else "" for v in values],
        textposition="outside",
        hovertemplate="%{x}: %{y:.2f}× (" + esc(LABEL) + ")<extra></extra>",
    )


def cpu_rate(lane: dict) -> float | None:
    """This machine's decode tokens/s for the lane (decoding alone), None where the lane lacks it."""
    rate = lane.get("decode_tokens_per_s")
    if isinstance(rate, (int, float)) and rate > 0:
        return float(rate)
    tokens, seconds = lane.get("decode_tokens"), lane.get("decode_s")
    if isinstance(tokens, (int, float)) and isinstance(seconds, (int, float)) and seconds > 0:
        return tokens / seconds
    return None


# --- every lane of a lesson's measurement -----------------------------------------------------------------
def lanes_of(m) -> list[dict]:
    """Every lane or table cell in a measurement that carries pass shapes: {name, batch, lane, plain}, in order."""
    out: list[dict] = []

    def walk(obj, names: list[str], batch):
        if isinstance(obj, list):
            for item in obj:
                walk(item, names, batch)
            return
        if not isinstance(obj, dict):
            return
        if isinstance(obj.get("batch"), int):
            batch = obj["batch"]
        if is_lane(obj):
            name = str(obj.get("contender") or " · ".join(names) or "run")
            plain = not _speculative(obj["passes"]) and "plain" in name
            out.append({"name": name, "batch": batch, "lane": obj, "plain": plain, "group": tuple(names[:-1])})
            return
        for key, value in obj.items():
            if isinstance(value, (dict, list)):
                walk(value, names + ([] if key in SKIP else [NAMES.get(key, key)]), batch)

    walk(m, [], None)
    return out


def base_of(entry: dict, entries: list[dict]) -> dict | None:
    """The plain lane at the entry's batch (and in its group): what its speedup is over."""
    same = [e for e in entries if e["plain"] and e["batch"] == entry["batch"]]
    return next((e for e in same if e["group"] == entry["group"]), same[0] if same else None)


def rows(m) -> list[dict]:
    """One table row per lane: this machine's decode tokens/s and speedup, and the same steps re-timed on the H200."""
    entries = lanes_of(m)
    out = []
    for e in entries:
        base = base_of(e, entries)
        cpu, h200 = cpu_rate(e["lane"]), h200_rate(e["lane"])
        cpu_base = cpu_rate(base["lane"]) if base else None
        gpu_speed = h200_speedup(e["lane"], base["lane"])[0] if base else None
        out.append(
            {
                "run": (f"batch {e['batch']}: " if e["batch"] is not None else "") + e["name"],
                "this machine, decode tokens/s (measured)": round(cpu, 1) if cpu else None,
                "× plain here": round(cpu / cpu_base, 2) if cpu and cpu_base else None,
                f"H200, decode tokens/s ({LABEL})": round(h200[0], 0) if h200[0] else None,
                "× plain on the H200 (re-timed)": round(gpu_speed, 2) if gpu_speed else None,
                "how it was re-timed": h200[1],
            }
        )
    return out


def figure(m, label: str = "") -> go.Figure | None:
    """Speedup over plain decoding per lane: measured on this machine beside the same steps re-timed on the H200, on
    the same axes; None where no lane carries pass shapes."""
    table = [r for r in rows(m) if r["× plain here"] is not None or r["× plain on the H200 (re-timed)"] is not None]
    if not table:
        return None
    xs = [esc(r["run"]) for r in table]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("speedup over plain decoding", "decode tokens/s (log scale)"))
    series = (
        (f"this machine (measured{', ' + label if label else ''})", "× plain here", "this machine, decode tokens/s (measured)", CPU_COLOR),
        (LABEL, "× plain on the H200 (re-timed)", f"H200, decode tokens/s ({LABEL})", GPU_COLOR),
    )
    for i, (name, speed_key, rate_key, color) in enumerate(series):
        common = {"name": esc(name), "marker": {"color": color, "pattern": {"shape": "" if i == 0 else "/"}}, "legendgroup": str(i)}
        speeds = [r[speed_key] for r in table]
        fig.add_bar(x=xs, y=speeds, text=[f"{v:.2f}×" if v else "" for v in speeds], textposition="outside", row=1, col=1, **common)
        fig.add_bar(x=xs, y=[r[rate_key] for r in table], showlegend=False, row=1, col=2, **common)
    fig.add_hline(y=1.0, line_dash="dot", line_color="#333", row=1, col=1)
    fig.update_yaxes(type="log", row=1, col=2)
    return frame(fig, "Your run on both sides of a knee: this machine, and the same steps on an H200", machine_line(), height=440)


def pass_figure(pass_rows: list[dict], label: str = "") -> go.Figure | None:
    """Lesson 1: each pass size this machine timed, and the H200's recorded pass of the same size, both as a multiple
    of their own one-token pass (log x); None where no size lies in the recorded range."""
    prices = h200_prices()
    pts = [(r["tokens_per_pass"], r["ms"], prices.price(r["tokens_per_pass"]) if prices else None) for r in pass_rows]
    pts = [p for p in pts if p[2] is not None]
    if not pts:
        return None
    fig = go.Figure()
    xs = [t for t, _, _ in pts]
    for name, ms, color, dash in (
        (f"this machine ({label or 'measured'})", [c for _, c, _ in pts], CPU_COLOR, None),
        (LABEL, [g for _, _, g in pts], GPU_COLOR, "dash"),
    ):
        fig.add_scatter(
            x=xs,
            y=[m / ms[0] for m in ms],
            customdata=ms,
            mode="lines+markers",
            name=esc(name),
            line={"color": color, "dash": dash},
            hovertemplate="%{x} tokens per pass: %{y:.2f}× the one-token pass (%{customdata:.2f} ms)<extra></extra>",
        )
    fig.add_hline(y=KNEE, line_dash="dot", line_color="#333", annotation_text=f"{KNEE:g}× (the knee)")
    fig.update_xaxes(type="log", title_text="tokens per pass")
    fig.update_yaxes(title_text="× the one-token pass", rangemode="tozero")
    return frame(fig, "The same pass sizes: how fast each machine's pass grows with the tokens it carries", machine_line(), height=400)
