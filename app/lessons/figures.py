"""The charts and compact tables of the Lessons page's results: measurement dict in, plotly Figure or table rows out.

One `<experiment>_figure(m, s, label)` per lesson whose claim needs a picture (lesson 1 draws app/views/roofline.py's
pass-cost curves; lesson 6 adds time per output token here), and `<experiment>_table(m, s)` for the numbers under
it. Pure functions: no streamlit. Every text that reaches a figure (drafter and contender names, the run's label) is
HTML-escaped, because plotly renders tags in titles, legends and hover text. Colours are the Okabe-Ito colour-blind
safe set (no red/green pair), and every colour also has a name in the legend or on the bar.

Spread (app/common/measurement.py, L-C): where a lane or a row carries `tokens_per_s_runs` ({values, median, min,
max} over interleaved repeats) the bar shows the median and a whisker from min to max; without it, the single run.
Time per output token (TPOT, the latency one request sees per token) is the lane's `tpot_ms` where measured, else
batch ÷ tokens/s: this engine runs a batch until its slowest row ends, so every request waits for the whole batch.
"""

from __future__ import annotations

import html
import re
import textwrap

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.lessons import noise
from app.views.palette import INK, ink

# Okabe-Ito: blue, orange, sky blue, reddish purple, grey, vermillion (never paired with a green). These fill bars and
# draw lines; text is never drawn in them (orange on white is 2.25:1): labels use TEXT_COLOR, or readable(colour).
PLAIN_COLOR = "#8a8d99"
COLORS = ["#0072B2", "#E69F00", "#56B4E9", "#CC79A7", "#D55E00"]
WASTE_COLOR = "#CC79A7"
RIDGE_COLOR = "#D55E00"
TEXT_COLOR = INK  # 12.6:1 on white, 10.6:1 on plotly's plot background
# ... and each series is told apart by more than its colour: bar i gets PATTERNS[i], line i DASHES[i] and SYMBOLS[i].
PATTERNS = ("", "/", "x", ".", "\\", "+")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star")
LABEL_FONT = {"size": 11, "color": TEXT_COLOR}
# A label is drawn beside an unseen marker: plotly keeps text a marker's height off its point, clear of a whisker's
# cap in any font (with mode "text" alone a label's foot touched the cap under Streamlit's font).
LABEL_MARK = {"mode": "markers+text", "marker": {"size": 8, "opacity": 0}}
TICK_CHARS = 16  # a category's name wraps at this many characters
ROW_PX, HEADER_PX = 35, 38
MAX_LABEL = 160


def esc(text) -> str:
    """Plain text safe for a plotly string: tags escaped, length capped."""
    s = " ".join(str(text).split())
    return html.escape(s if len(s) <= MAX_LABEL else s[: MAX_LABEL - 1] + "…")


def table_height(rows: list) -> int:
    """A st.dataframe height that shows every row (no inner scroll) up to ~20 rows."""
    return HEADER_PX + ROW_PX * max(1, min(len(rows), 20))


TITLE_CHARS, LABEL_CHARS, MAX_SUBTITLE = 90, 120, 400  # characters per title line and per subtitle line; subtitle cap
LEGEND_ROW_CHARS = 110  # legend characters that fit on one row of a page-wide chart
PHRASE_CHARS = 40  # a phrase this short stays on one line


def _lines(text: str, width: int, cap: int) -> list[str]:
    """Plain text cut into lines of about `width` characters, each escaped: a long subtitle wraps instead of running
    off the chart. A short phrase (between ", " or "; ", e.g. a machine's name) is never split across lines."""
    s = " ".join(str(text).split())
    s = s if len(s) <= cap else s[: cap - 1] + "…"
    phrases = re.split(r"(?<=[,;]) ", s)
    glued = " ".join(p.replace(" ", "\0") if len(p) <= PHRASE_CHARS else p for p in phrases)
    return [html.escape(line.replace("\0", " ")) for line in textwrap.wrap(glued, width, break_long_words=False)] or [""]


def _legend_rows(fig: go.Figure) -> int:
    names = [str(t.name) for t in fig.data if t.name and t.showlegend is not False]
    return max(1, -(-sum(len(n) + 6 for n in names) // LEGEND_ROW_CHARS)) if names else 0


def frame(fig: go.Figure, title: str, label: str, height: int = 380) -> go.Figure:
    """Title (the claim) and, under it, where and when it was measured, both wrapped to the chart's width; the legend
    at the foot of the chart, under the x-axis title (room is made for its rows, so neither covers the other)."""
    title_lines = [f"<b>{line}</b>" for line in _lines(title, TITLE_CHARS, MAX_SUBTITLE)]
    label_lines = [f"<sup>{line}</sup>" for line in _lines(label, LABEL_CHARS, MAX_SUBTITLE)] if label else []
    top = 40 + 24 * len(title_lines) + 20 * len(label_lines)
    bottom = 60 + 24 * _legend_rows(fig)
    fig.update_layout(
        title={
            "text": "<br>".join(title_lines + label_lines),
            "x": 0,
            "xanchor": "left",
            "y": 1.0,
            "yref": "container",
            "yanchor": "top",
            "pad": {"t": 18},
        },
        height=height + top - 50 + bottom - 45,
        margin={"l": 55, "r": 20, "t": top, "b": bottom},
        legend={"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0.0, "x": 0},
        barmode="group",
    )
    return ink(fig)  # under Streamlit's theme too, every text at AA contrast


# --- spread -------------------------------------------------------------------------------------
def spread_of(obj: dict, key: str = "tokens_per_s_runs") -> tuple[float, float, float] | None:
    """(median, min, max) of a repeated measurement, None where the run was measured once."""
    sp = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(sp, dict) or not all(isinstance(sp.get(k), (int, float)) for k in ("median", "min", "max")):
        return None
    return float(sp["median"]), float(sp["min"]), float(sp["max"])


def lane_rate(lane: dict) -> tuple[float, float | None, float | None]:
    """A lane's tokens/s: (value, min, max); min/max None for a single run."""
    sp = spread_of(lane)
    return sp if sp else (float(lane["summary"]["tokens_per_s"]), None, None)


def label_above_whiskers(fig: go.Figure, xs: list, values: list[tuple[float, float | None, float | None]], text: list[str], **cell) -> None:
    """Each bar's label just above its whisker's top (the bar's own top where it has no whisker), as a text trace: a
    bar's own outside text sits at the bar's top, where the whisker runs through it. One bar per x (not grouped)."""
    tops = [hi if hi is not None else v for v, _, hi in values]
    fig.add_scatter(
        x=xs, y=tops, text=text, textposition="top center", textfont=LABEL_FONT, showlegend=False, hoverinfo="skip", **LABEL_MARK, **cell
    )
    fig.data[-1].update(cliponaxis=False)
    fig.update_yaxes(range=[0, 1.15 * max(tops, default=1.0) or 1.0], **cell)


def grouped_bars(fig: go.Figure, cats: list[str], series: list[dict], **cell) -> list[list[float]]:
    """Bars of several series side by side in each category, drawn at numeric positions (category j at x = j, its
    ticks named) so that each bar's label can sit at the bar's own centre just above its whisker. `series`: dicts of
    name, values [(value, min, max) or None per category], color, and optionally text (a label per bar), hovertext,
    legendgroup, showlegend. Series i is hatched with PATTERNS[i]. Returns each series' bar centres."""
    width = 0.8 / max(len(series), 1)
    centres, tops, ticks = [], [0.0], list(range(len(cats)))
    for i, sr in enumerate(series):
        vals = [v if v is not None and v[0] is not None else (None, None, None) for v in sr["values"]]
        xs = [j - 0.4 + width * (i + 0.5) for j in ticks]
        centres.append(xs)
        fig.add_bar(
            x=xs,
            y=[v for v, _, _ in vals],
            width=width * 0.95,
            offset=-width * 0.95 / 2,  # a bar with an offset is left out of plotly's own grouping: it stands at its x
            name=esc(sr["name"]),
            marker={"color": sr["color"], "pattern": {"shape": PATTERNS[i % len(PATTERNS)]}},
            error_y=_whiskers([v if v[0] is not None else (0.0, None, None) for v in vals]),
            hovertext=sr.get("hovertext"),
            legendgroup=sr.get("legendgroup"),
            showlegend=sr.get("showlegend", True),
            **cell,
        )
        top = [(hi if hi is not None else v) for v, _, hi in vals]
        tops += [t for t in top if t is not None]
        if sr.get("text"):
            keep = [k for k, t in enumerate(top) if t is not None]
            fig.add_scatter(
                x=[xs[k] for k in keep],
                y=[top[k] for k in keep],
                text=[sr["text"][k] for k in keep],
                **LABEL_MARK,
                textposition="top center",
                textfont=LABEL_FONT,
                showlegend=False,
                hoverinfo="skip",
                cliponaxis=False,
                **cell,
            )
    names = ["<br>".join(textwrap.wrap(esc(c), TICK_CHARS)) for c in cats]  # wrapped, never tilted
    fig.update_xaxes(tickvals=ticks, ticktext=names, tickangle=0, range=[-0.5, len(cats) - 0.5], **cell)
    fig.update_yaxes(range=[0, 1.18 * max(tops) or 1.0], **cell)
    return centres


def _whiskers(values: list[tuple[float, float | None, float | None]]) -> dict | None:
    if all(lo is None for _, lo, _ in values):
        return None
    return {
        "type": "data",
        "symmetric": False,
        "array": [(hi - v) if hi is not None else 0.0 for v, _, hi in values],
        "arrayminus": [(v - lo) if lo is not None else 0.0 for v, lo, _ in values],
        "color": "#333",
        "thickness": 1.5,
    }


def _rule(spec: dict, ar: dict, fallback: float, whole: bool = False) -> tuple[float, float | None, float | None]:
    """The one rule's speedup spec ÷ ar over the interleaved rounds and its 95% range (noise.speedup): the number a
    chart's bar, its whisker, the table and the verdict sentence all show; `fallback` where there are no rounds."""
    sp = noise.speedup({"ar": ar, "spec": spec}, whole=whole)
    return (sp["value"], sp["lo"], sp["hi"]) if sp else (fallback, None, None)


def ratio_range(spec: dict, ar: dict) -> tuple[float, float | None, float | None]:
    """Whole-run speedup spec/ar (prefill included) by the one rule over the rounds, with its 95% range."""
    s, a = lane_rate(spec)[0], lane_rate(ar)[0]
    return _rule(spec, ar, s / a if a else 0.0, whole=True)


def tpot_ms(lane: dict, batch: int) -> float | None:
    """Time per output token one request sees, ms: measured where the lane has it, else batch ÷ tokens/s."""
    if isinstance(lane.get("tpot_ms"), (int, float)):
        return float(lane["tpot_ms"])
    rate = lane_rate(lane)[0] if "summary" in lane else lane.get("tokens_per_s")
    return 1000.0 * batch / rate if rate else None


# --- lessons 1-3: app/lessons/pass_figures.py ----------------------------------------------------


# --- lessons 4 and 6: policies against load, throughput beside latency --------------------------
def decode_rate(obj: dict) -> tuple[float, float | None, float | None]:
    """A lane's or a row's decoding-alone tokens/s (median, min, max over its runs); an older recording's whole-run
    rate, which is all it has."""
    sp = spread_of(obj, "decode_tokens_per_s_runs") or spread_of(obj)
    if sp:
        return sp
    value = obj.get("decode_tokens_per_s") or obj.get("tokens_per_s") or obj.get("summary", {}).get("tokens_per_s")
    return float(value), None, None


def decode_ratio(spec: dict, ar: dict) -> tuple[float, float | None, float | None]:
    """Decoding-alone speedup spec/ar by the one rule over the interleaved rounds, with its 95% range."""
    s, a = decode_rate(spec)[0], decode_rate(ar)[0]
    return _rule(spec, ar, s / a if a else 0.0)


def _policy_lanes(m: dict, s: dict) -> list[tuple[str, dict]]:
    n = int((m.get("chosen") or s).get("n", 0))
    return [("plain", m["ar"]), ("always on", m["on"]), (f"off above batch {n}", m["off"])]


PHASE_NAMES = {"full": "while more than N rows decoded", "shrunk": "once N or fewer remained"}


def turn_it_off_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    """Decoding-alone tokens/s of each policy over the whole run and, where the measurement has them, in each phase
    (more than N rows decoding, N or fewer), every bar with its runs' range."""
    batch = int((m.get("chosen") or s).get("batch", 1))
    lanes = _policy_lanes(m, s)
    phases = m.get("phases") or {}
    keys = ("ar", "on", "off")
    titles = ("decoding alone, whole run (tokens/s)", "decoding alone, by phase (tokens/s)")
    fig = make_subplots(rows=1, cols=2 if phases else 1, subplot_titles=titles[: 2 if phases else 1])
    colors = [PLAIN_COLOR, COLORS[0], COLORS[1]]
    vals = [decode_rate(ln) for _, ln in lanes]
    names = [name for name, _ in lanes]
    fig.add_bar(x=names, y=[v for v, _, _ in vals], marker_color=colors, error_y=_whiskers(vals), showlegend=False, row=1, col=1)
    label_above_whiskers(fig, names, vals, [f"{v:.0f}" for v, _, _ in vals], row=1, col=1)
    if phases:
        series = [
            {"name": name, "values": [spread_of(phases.get(key, {}), p) for p in PHASE_NAMES], "color": color}
            for (name, _), key, color in zip(lanes, keys, colors)
        ]
        grouped_bars(fig, list(PHASE_NAMES.values()), series, row=1, col=2)
    return frame(fig, f"Batch {batch}, rows ending at different lengths: each policy's decoding speed", label, height=420)


def _times(r: tuple[float, float | None, float | None]) -> str:
    """'0.92× (0.88–0.98)': a ratio and its 95% range, as the verdict sentences state them."""
    v, lo, hi = r
    return f"{v:.2f}×" + (f" ({lo:.2f}–{hi:.2f})" if lo is not None else "")


def turn_it_off_table(m: dict, s: dict) -> list[dict]:
    """Per policy: decoding-alone tokens/s (median, runs' range, × plain), the whole run's (prefill included), each
    phase's decoding rate, time per output token, and the decode steps that speculated."""
    batch = int((m.get("chosen") or s).get("batch", 1))
    base, whole_base = decode_rate(m["ar"])[0], lane_rate(m["ar"])[0]
    phases = m.get("phases") or {}
    out = []
    for (name, ln), key in zip(_policy_lanes(m, s), ("ar", "on", "off")):
        v, lo, hi = decode_rate(ln)
        whole = lane_rate(ln)[0]
        t = tpot_ms(ln, batch)
        row = {
            "policy": name,
            "decoding tokens/s": round(v, 1),
            "range (runs)": f"{lo:.0f}–{hi:.0f}" if lo is not None else "one run",
            "× plain (95% range)": _times(decode_ratio(ln, m["ar"])) if base else None,
            "× always on (95% range)": _times(decode_ratio(ln, m["on"])) if key == "off" else "",
            "whole run tokens/s (prefill included)": round(whole, 1),
            "whole run × plain": round(ratio_range(ln, m["ar"])[0], 2) if whole_base else None,
        }
        for phase, title in PHASE_NAMES.items():
            sp = phases.get(key, {}).get(phase)
            if phases:
                row[f"{title} (tokens/s)"] = round(sp["median"], 1) if sp else None
        row["time per output token (ms)"] = round(t, 1) if t else None
        row["speculated steps"] = f"{ln.get('speculated_steps', 0)} of {ln.get('decode_steps', 0)}"
        out.append(row)
    return out


def by_load_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    """Decoding-alone tokens/s of each policy against batch size (runs' range as whiskers), and time per output token
    against batch size."""
    rows = m["rows"]
    xs = sorted({r["batch"] for r in rows})
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("decoding tokens/s, all sequences (higher is better)", "time per output token, ms (lower is better)"),
    )
    for i, name in enumerate(dict.fromkeys(r["contender"] for r in rows)):
        cells = [next((r for r in rows if r["batch"] == b and r["contender"] == name), None) for b in xs]
        vals = [decode_rate(c) if c else (None, None, None) for c in cells]
        color = PLAIN_COLOR if i == 0 else COLORS[(i - 1) % len(COLORS)]
        style = {"color": color, "dash": DASHES[i % len(DASHES)], "width": 2.5}
        marker = {"symbol": SYMBOLS[i % len(SYMBOLS)], "size": 8}
        ok = [v for v in vals if v[0] is not None]
        fig.add_scatter(
            x=[str(b) for b in xs],
            y=[v for v, _, _ in vals],
            mode="lines+markers",
            name=esc(name),
            line=style,
            marker=marker,
            error_y=_whiskers(ok) if len(ok) == len(vals) else None,
            legendgroup=str(i),
            row=1,
            col=1,
        )
        fig.add_scatter(
            x=[str(b) for b in xs],
            y=[tpot_ms(c, b) if c else None for c, b in zip(cells, xs, strict=True)],
            mode="lines+markers",
            name=esc(name),
            line=style,
            marker=marker,
            legendgroup=str(i),
            showlegend=False,
            row=1,
            col=2,
        )
    fig.update_xaxes(title_text="batch size", type="category")
    fig.update_yaxes(rangemode="tozero")
    return frame(fig, "Each policy against load: decoding speed and per-request latency", label, height=420)


# --- lesson 5: adaptive depth -------------------------------------------------------------------
def adaptive_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    """Per batch: drafts per step and tokens kept per step, all drafts against the confidence gate."""
    conf, depth_k = float(s.get("conf", 0)), int((m.get("chosen") or s).get("depth", 0))
    fig = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=("drafted per step (depth)", "kept per step", "× plain, decoding alone"),
    )
    xs = [f"batch {b['batch']}" for b in m["batches"]]
    panels = {1: [], 2: [], 3: []}
    for i, (key, name) in enumerate((("fixed", f"all {depth_k} drafts"), ("gated", f"stop below {conf:.2f}"))):
        depth = [b[f"m_{key}"].get("drafted_depth") for b in m["batches"]]
        kept = [b[key]["summary"].get("tokens_per_step") for b in m["batches"]]
        speed = [decode_ratio(b[key], b["ar"]) for b in m["batches"]]
        common = {"name": name, "color": COLORS[i], "legendgroup": key}
        panels[1].append(
            {**common, "values": [(d, None, None) for d in depth], "text": [f"{d:.1f}" if d is not None else "" for d in depth]}
        )
        panels[2].append({**common, "values": [(k, None, None) for k in kept], "text": [f"{k:.2f}" if k is not None else "" for k in kept]})
        panels[3].append({**common, "values": speed, "text": [f"{v:.2f}×" for v, _, _ in speed]})
    for col, series in panels.items():
        grouped_bars(fig, xs, [{**sr, "showlegend": col == 1} for sr in series], row=1, col=col)
    fig.add_hline(y=1.0, line_dash="dot", line_color="#333", row=1, col=3)
    return frame(fig, "The gate drafts less where the drafter is unsure; does it keep as many tokens?", label, height=400)


def adaptive_table(m: dict, s: dict) -> list[dict]:
    out = []
    for b in m["batches"]:
        for key in ("fixed", "gated"):
            sm, c = b[key]["summary"], b[f"m_{key}"]
            speed, lo, hi = decode_ratio(b[key], b["ar"])
            out.append(
                {
                    "batch": b["batch"],
                    "drafts": "all" if key == "fixed" else f"stop below {float(s.get('conf', 0)):.2f}",
                    "drafted per step": round(c["drafted_depth"], 2) if c.get("drafted_depth") is not None else None,
                    "kept per step": round(sm["tokens_per_step"], 2) if sm.get("tokens_per_step") is not None else None,
                    "α": round(sm["alpha"], 3) if sm.get("alpha") is not None else None,
                    "decoding tokens/s (median)": round(decode_rate(b[key])[0], 1),
                    "speedup over plain (decoding alone)": round(speed, 2),
                    "95% range": f"{lo:.2f}–{hi:.2f}" if lo is not None else "one run",
                    "whole-run speedup (prefill included)": round(ratio_range(b[key], b["ar"])[0], 2),
                    "wasted GFLOP": round(sm["flops_wasted"] / 1e9, 1),
                }
            )
    return out


# --- lesson 7: width ----------------------------------------------------------------------------
def pass_text(c: dict | None) -> str:
    """A bar's tokens per pass: a fixed shape's, or (≈) goodput's mean over its steps (its shape varies per step)."""
    if not c:
        return ""
    return f"≈{c['tokens_per_pass']} tok/pass" if c.get("mean_nodes") is not None else f"{c['tokens_per_pass']} tok/pass"


def width_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    """Decoding-alone tokens/s of plain, chain, tree and (newer measurements) goodput at both batches (the median on
    each bar, above its whisker; tokens per pass in its hover and the table), and tokens emitted per pass. What goodput
    chose per step is app/lessons/width_steps.py's picture."""
    rows = m["rows"]
    xs = sorted({r["batch"] for r in rows})
    cats = [f"batch {b}" for b in xs]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("decoding tokens/s, all sequences", "tokens emitted per pass (per row)"))
    rates, emitted = [], []
    for i, name in enumerate(dict.fromkeys(r["contender"] for r in rows)):
        cells = [next((r for r in rows if r["batch"] == b and r["contender"] == name), None) for b in xs]
        vals = [decode_rate(c) if c else None for c in cells]
        color = PLAIN_COLOR if name == "plain decoding" else COLORS[i % len(COLORS)]
        common = {"name": name, "color": color, "legendgroup": str(i)}
        text = [f"{v[0]:.0f}" if v else "" for v in vals]
        rates.append({**common, "values": vals, "text": text, "hovertext": [pass_text(c) for c in cells]})
        kept = [(c.get("tokens_per_step") or (1.0 if name == "plain decoding" else None)) if c else None for c in cells]
        emitted.append({**common, "values": [(k, None, None) for k in kept], "showlegend": False})
    grouped_bars(fig, cats, rates, row=1, col=1)
    grouped_bars(fig, cats, emitted, row=1, col=2)
    return frame(fig, "Tree against chain: more tokens per pass buys more accepted tokens, until the pass gets dear", label, height=400)
