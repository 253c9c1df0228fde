"""Lessons 1-3's charts and the tables under them: measurement dict in, plotly Figure or table rows out (no streamlit).

Every number a chart, its table and the words under it show comes from one statistic: a pass's median over its
rounds (lesson 1), and for lessons 2 and 3 the speedup decoding alone as app/lessons/noise.py `speedup` computes it
(the one rule's geometric mean over interleaved rounds of speculative ÷ plain, whiskers its 95% range), with the
whole-run figure (prefill included) beside it, labelled. Text reaching a figure is escaped (figures.esc).
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.lessons import knee, noise
from app.lessons.figures import COLORS, LABEL_FONT, LABEL_MARK, PLAIN_COLOR, RIDGE_COLOR, WASTE_COLOR, _whiskers, frame, grouped_bars
from app.lessons.pass_conclusions import drafter_label, per_token, room_of


# --- lesson 1: the room, and past it ------------------------------------------------------------
def memory_bound_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    """A pass's cost in one-token passes against the tokens it carries (log-log), with the rounds' range, the
    room's line (knee.ROOM× a one-token pass) and the line of a cost in step with the tokens (n tokens, n×)."""
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    base = rows[0]["ms"]
    xs = [r["tokens_per_pass"] for r in rows]
    kept = [noise.with_far(r.get("ms_runs")) for r in rows]
    vals = [(r["ms"] / base, k["min"] / base, k["max"] / base) if k else (r["ms"] / base, None, None) for r, (k, _) in zip(rows, kept)]
    far = [(r["tokens_per_pass"], r["ms_runs"]["values"][i] / base) for r, (_, idx) in zip(rows, kept) for i in idx]
    fig = go.Figure()
    fig.add_scatter(x=xs, y=xs, mode="lines", name="in step with the tokens (n tokens cost n×)", line={"color": PLAIN_COLOR, "dash": "dot"})
    fig.add_scatter(
        x=xs,
        y=[v for v, _, _ in vals],
        mode="lines+markers",
        name="measured: median of the rounds, whisker = their range",
        line={"color": COLORS[0], "width": 3},
        error_y=_whiskers(vals),
        hovertemplate="%{x} tokens per pass: %{y:.2f}× a one-token pass<extra></extra>",
    )
    # Each label off its whisker's end (beside the point it sat on the whisker), and off the room's line: under the
    # whisker for a pass inside the room, above it past the room.
    inside = [v < knee.ROOM for v, _, _ in vals]
    fig.add_scatter(
        x=xs,
        y=[(lo if lo is not None else v) if low else (hi if hi is not None else v) for (v, lo, hi), low in zip(vals, inside)],
        text=[f"{v:.2f}×" for v, _, _ in vals],
        **LABEL_MARK,  # an unseen marker: the label a marker's height off the whisker's cap
        textposition=["bottom center" if low else "top center" for low in inside],
        textfont=LABEL_FONT,
        showlegend=False,
        hoverinfo="skip",
        cliponaxis=False,
    )
    ends = [e for v, lo, hi in vals for e in (lo or v, hi or v)] + [xs[-1]]
    fig.update_yaxes(range=[math.log10(min(ends) / 1.3), math.log10(max(ends) * 1.3)])  # room for the labels
    if far:
        fig.add_scatter(
            x=[x for x, _ in far],
            y=[y for _, y in far],
            mode="markers",
            marker={"symbol": "x-open", "size": 10, "color": RIDGE_COLOR},
            name="a round far outside the others (kept in the whisker)",
        )
    room = knee.room_tokens(xs, [r["ms"] for r in rows])
    fig.add_scatter(  # the room's line, named in the legend: its label on the plot sat on the labels and whiskers
        x=[xs[0], xs[-1]],
        y=[knee.ROOM] * 2,
        mode="lines",
        line={"color": RIDGE_COLOR, "dash": "dash"},
        name=f"{knee.ROOM}× a one-token pass: the room reaches {room} token{'s' if room != 1 else ''} here",
        hoverinfo="skip",
    )
    fig.update_xaxes(type="log", title_text="tokens per pass (batch 1)", tickvals=xs)  # plotly's minor log ticks crowd
    fig.update_yaxes(type="log", title_text="time ÷ a one-token pass", tickvals=[0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000])
    return frame(fig, "Inside the room a pass costs about a one-token pass; past it, cost grows with the tokens", label, height=420)


def memory_bound_table(m: dict) -> list[dict]:
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    base = rows[0]["ms"]
    out = []
    for prev, r in zip([None, *rows], rows):
        sp, far = noise.with_far(r.get("ms_runs"))
        cheaper = prev is not None and r["ms"] < prev["ms"]
        out.append(
            {
                "tokens per pass": r["tokens_per_pass"],
                "ms (median)": round(r["ms"], 2),
                "rounds (ms)": (f"{sp['min']:.1f}–{sp['max']:.1f}" if sp else "one round")
                + (f", round {', '.join(str(i + 1) for i in far)} far from the others" if far else ""),
                "× one-token pass": round(r["ms"] / base, 2),
                "note": "same within noise as the smaller pass" if cheaper else "",
                "GFLOP": round(r["flops"] / 1e9, 2),
                "FLOP/byte": round(r["flops"] / r["bytes"], 2) if r["bytes"] else None,
            }
        )
    return out


# --- lesson 2: more FLOPs, fewer bytes, less time -------------------------------------------------
def more_flops_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    """Left: speculative ÷ plain per decoded token (decoding alone): FLOPs, bytes moved and time, against the line
    of 1×. Right: FLOPs per decoded token, on kept tokens and on rejected drafts, plain against speculative."""
    titles = ("speculative ÷ plain, per decoded token", "FLOPs per decoded token (MFLOP)")
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, column_widths=[0.55, 0.45])
    ratios = per_token(m)
    if ratios:
        names = ["FLOPs done", "bytes moved", "time"]
        ys = [ratios["flops"], ratios["bytes"], ratios["time"]]
        fig.add_bar(
            x=names,
            y=ys,
            marker={"color": [COLORS[0], COLORS[1], COLORS[2]], "pattern": {"shape": ["", "/", "."]}},
            text=[f"{y:.2f}×" if y is not None else "" for y in ys],
            textposition="outside",
            name="speculative ÷ plain",
            showlegend=False,
            row=1,
            col=1,
        )
        fig.add_hline(y=1.0, line_dash="dot", line_color="#333", annotation_text="1× = the same as plain", row=1, col=1)
        costs = m["decode_costs"]
        lanes = [("plain", costs["ar"]), ("speculative", costs["spec"])]
        useful = [(c["flops"] - c["flops_wasted"]) / c["tokens"] / 1e6 for _, c in lanes]
        wasted = [c["flops_wasted"] / c["tokens"] / 1e6 for _, c in lanes]
        fig.add_bar(x=[n for n, _ in lanes], y=useful, name="FLOPs on kept tokens", marker_color=COLORS[0], row=1, col=2)
        fig.add_bar(
            x=[n for n, _ in lanes],
            y=wasted,
            name="FLOPs on rejected drafts (wasted)",
            marker={"color": WASTE_COLOR, "pattern": {"shape": "/"}},
            row=1,
            col=2,
        )
    frame(fig, "More FLOPs, far fewer bytes, less time: speculation does more arithmetic per token and reads the weights less often", label)
    fig.update_layout(barmode="stack")
    return fig


def more_flops_table(m: dict, s: dict) -> list[dict]:
    costs = m.get("decode_costs") or {}
    sp = noise.speedup(m)
    out = []
    for name, key in (("plain", "ar"), ("speculative", "spec")):
        ln, c = m[key], costs.get(key)
        runs, decode = noise.rate_runs(ln)
        whole = ln.get("tokens_per_s_runs")
        out.append(
            {
                "decoding": name,
                "tokens/s, decoding alone" if decode else "tokens/s, whole run": round(runs["median"], 1) if runs else None,
                "rounds": f"{runs['min']:.0f}–{runs['max']:.0f}" if runs else "one run",
                "× plain (the rule's ratio, 95% range)": "1 (the yardstick)"
                if key == "ar"
                else (f"{sp['value']:.2f}× ({sp['lo']:.2f}–{sp['hi']:.2f}×)" if sp and sp["lo"] else f"{sp['value']:.2f}×" if sp else None),
                "tokens/s, whole run (prefill included)": round(whole["median"], 1) if whole else None,
                "decode passes": int(ln["decode_steps"]),
                "MFLOP per decoded token": round(c["flops"] / c["tokens"] / 1e6) if c else None,
                "MB moved per decoded token": round(c["bytes"] / c["tokens"] / 1e6, 1) if c else None,
            }
        )
    return out


# --- lesson 3: inside the room and past it ----------------------------------------------------------
def ridge_points(m: dict, s: dict) -> list[dict]:
    """One point per (drafter, batch): the speedup decoding alone as noise.speedup has it (the rule's ratio over the
    rounds, its 95% range, rounds far from the others), the whole run's, tokens per pass plain and speculative, α."""
    model = drafter_label(m["drafter"])
    runs = sorted(m["runs"], key=lambda r: r["batch"])
    pairs = [(model, r["batch"], r) for r in runs] + [("n-gram lookup, extractive prompts", runs[-1]["batch"], m["ngram"])]
    out = []
    for name, batch, run in pairs:
        depth = int(run["spec"].get("depth") or s.get("depth") or 0)
        sp, whole = noise.speedup(run), noise.speedup(run, whole=True)
        out.append(
            {
                "drafter": name,
                "batch": batch,
                "speedup": sp["value"] if sp else run["m"]["speedup"],
                "lo": sp["lo"] if sp else None,
                "hi": sp["hi"] if sp else None,
                "far": sp["far"] if sp else [],
                "decode": bool(sp and sp["decode"]),
                "whole": whole["value"] if whole else run["m"].get("whole_run_speedup"),
                "verdict": sp["verdict"] if sp else None,
                "plain_tokens": batch,
                "spec_tokens": batch * (depth + 1),
                "alpha": run["spec"]["summary"].get("alpha"),
            }
        )
    return out


def past_the_ridge_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    points = ridge_points(m, s)
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("speedup over plain decoding, decoding alone", "tokens per pass against this machine's room")
    )
    batches = sorted({p["batch"] for p in points})
    xs = [f"batch {b}" for b in batches]
    names = list(dict.fromkeys(p["drafter"] for p in points))
    at = {(p["drafter"], p["batch"]): p for p in points}
    series = []
    for i, name in enumerate(names):
        mine = [at.get((name, b)) for b in batches]
        vals = [(p["speedup"], p["lo"], p["hi"]) if p else None for p in mine]
        series.append({"name": name, "values": vals, "color": COLORS[i % len(COLORS)], "text": [f"{v[0]:.2f}×" if v else "" for v in vals]})
    centres = grouped_bars(fig, xs, series, row=1, col=1)
    whole = [(x, p["whole"]) for name, cs in zip(names, centres) for x, b in zip(cs, batches) if (p := at.get((name, b)))]
    fig.add_scatter(
        x=[x for x, _ in whole],
        y=[w for _, w in whole],
        mode="markers",
        marker={"symbol": "diamond-open", "size": 11, "color": "#333"},
        name="whole run, prefill included",
        row=1,
        col=1,
    )
    fig.add_hline(y=1.0, line_dash="dot", line_color="#333", row=1, col=1)  # named in the axis title: no label over a bar
    first = points[0]["drafter"]
    depth_tokens = {p["batch"]: p["spec_tokens"] for p in points if p["drafter"] == first}
    fig.add_bar(x=xs, y=batches, name="plain: tokens per pass", marker={"color": PLAIN_COLOR, "pattern": {"shape": "."}}, row=1, col=2)
    fig.add_bar(
        x=xs,
        y=[depth_tokens.get(b) for b in batches],
        name="speculative verify: tokens per pass",
        marker={"color": COLORS[0], "pattern": {"shape": "x"}},
        row=1,
        col=2,
    )
    room = room_of(m)
    if room:  # a legend entry, not a label on the line: it never lands on a bar
        fig.add_scatter(
            x=xs,
            y=[room] * len(xs),
            mode="lines",
            line={"color": RIDGE_COLOR, "dash": "dash"},
            name=f"this machine's room ≈ {room} tokens",
            row=1,
            col=2,
        )
    fig.update_yaxes(title_text="× plain decoding (dotted: 1× = no gain)", row=1, col=1)
    fig.update_yaxes(title_text="tokens per pass", row=1, col=2)
    return frame(fig, "Inside the room speculation pays; past it, each draft token costs time and the drafter decides", label, height=420)


def past_the_ridge_table(m: dict, s: dict) -> list[dict]:
    return [
        {
            "drafter": p["drafter"],
            "batch": p["batch"],
            "tokens per pass (plain → verify)": f"{p['plain_tokens']} → {p['spec_tokens']}",
            "speedup, decoding alone" if p["decode"] else "speedup (whole run only)": round(p["speedup"], 2),
            "95% range": f"{p['lo']:.2f}–{p['hi']:.2f}" if p["lo"] is not None else "one run",
            "verdict": (p["verdict"].kind if p["verdict"] else "one run: can't tell")
            + (f" (round {', '.join(str(i + 1) for i in p['far'])} far from the others, kept)" if p["far"] else ""),
            "whole run, prefill included": round(p["whole"], 2) if p["whole"] is not None else None,
            "α": round(p["alpha"], 2) if p["alpha"] is not None else None,
        }
        for p in ridge_points(m, s)
    ]
