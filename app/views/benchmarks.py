"""The Benchmarks page's pictures and tables, from task bench rows (engine/bench/tasks.py, judged by the one rule):
Spec-Bench's leaderboard as a heat map (contenders as rows, tasks as columns, the decode-only speedup and τ in each
cell), the speedup against the batch per task, and the sentences that read them. No streamlit.
"""

from __future__ import annotations

import html
import math
import textwrap

import plotly.graph_objects as go

from app.common.measurement import BUSY_CORES
from app.views.bars import LABEL_CHARS
from app.views.palette import INK, ink, speedup_scale
from engine.bench.prompt_files import task_name
from engine.bench.tasks import CONTENDERS
from engine.verdict import MIN_GAP, span

MARKS = {"faster": "faster", "slower": "slower", "level": "level", "can't tell": "can't tell"}

LOOKUP = CONTENDERS["ngram"].name if "ngram" in CONTENDERS else "n-gram"  # the lookup's cells, as the recording names them


DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot", "solid")


SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star", "cross")


COLORS = ("#0072B2", "#E69F00", "#56B4E9", "#CC79A7", "#D55E00", "#8a8d99", "#000000")


def _title(claim: str, label: str, width: int = LABEL_CHARS) -> str:
    """The chart's claim in bold and, under it, where and when it was measured, wrapped to the chart's width (at a
    laptop's 560 px chart, bars.LABEL_CHARS: 150 characters ran off its right edge)."""
    lines = [f"<sup>{html.escape(line)}</sup>" for line in textwrap.wrap(label, width)]
    return "<br>".join([f"<b>{html.escape(claim)}</b>", *lines])


def tasks_of(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["task"] for r in rows))


def contenders_of(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["contender"] for r in rows if r["contender"] != "plain"))


def batches_of(rows: list[dict]) -> list[int]:
    return sorted({int(r["batch"]) for r in rows})


def _at(rows: list[dict], batch: int) -> dict:
    return {(r["contender"], r["task"]): r for r in rows if r["batch"] == batch}


def cell_text(r: dict) -> str:
    """'1.29× faster, τ 1.71'."""
    return f"{r['speedup']:.2f}× {MARKS.get(r['verdict'], r['verdict'])}, τ {r['tau'] or 1.0:.2f}"


def leaderboard_rows(rows: list[dict], batch: int) -> list[dict]:
    """The table under the heat map: one row per contender, one column per task (plain's decoding rate first)."""
    at, tasks = _at(rows, batch), tasks_of(rows)
    out = [
        {"contender": "plain decoding (tokens/s)"}
        | {task_name(t): f"{at[('plain', t)]['decode_tokens_per_s']:.1f}" for t in tasks if ("plain", t) in at}
    ]
    for name in contenders_of(rows):
        out.append({"contender": name} | {task_name(t): cell_text(at[(name, t)]) for t in tasks if (name, t) in at})
    return out


def range_rows(rows: list[dict], batch: int) -> list[dict]:
    """Every cell's numbers in full: speedup and its 95% range, the verdict, τ, the whole run's speedup, and how many
    rows' text differs from plain decoding's (where the recording counted them)."""
    out = []
    for r in rows:
        if r["batch"] != batch or r["contender"] == "plain":
            continue
        lo, hi = r.get("speedup_lo"), r.get("speedup_hi")
        out.append(
            {
                "task": task_name(r["task"]),
                "contender": r["contender"],
                "speedup (decoding)": f"{r['speedup']:.2f}×",
                "95% range": _range(lo, hi),
                "rounds": len(r["decode_tokens_per_s_runs"]),
                "the rule says": r["verdict"],
                "τ": f"{r['tau'] or 1.0:.2f}",
                "whole run (prefill included)": f"{r['whole_run_speedup']:.2f}×" if r.get("whole_run_speedup") else "—",
                ROWS_DIFFER: _differ(r.get("rows_differ")),
            }
        )
    return out


def _range(lo: float | None, hi: float | None) -> str:
    """The rule's own range (verdict.span: a bound beside "faster" never reads as touching 1), or "one round"."""
    return "one round" if lo is None or hi is None else span(lo, hi)


ROWS_DIFFER = "rows whose text differs from plain's"  # bfloat16 rounding can flip a near-tie (engine/bench/tasks.py)


def _differ(n) -> str:
    """A cell's rows whose text differs from plain decoding's: 'none', a count with what it means, or 'not recorded'."""
    if n is None:
        return "not recorded"
    return "none" if n == 0 else f"{n}: unequal work, read the speedup with care"


def leaderboard_figure(rows: list[dict], batch: int, label: str) -> go.Figure:
    """Spec-Bench's leaderboard at one batch as a heat map: the colour is the decode-only speedup over plain decoding
    on a log scale centred on 1 (blue faster, orange slower), each cell's text its speedup, the rule's word and τ."""
    at, tasks, names = _at(rows, batch), tasks_of(rows), contenders_of(rows)
    z = [[math.log2(at[(n, t)]["speedup"]) if (n, t) in at else None for t in tasks] for n in names]
    # one short word a line ("1.54×", "faster", "τ 2.27"): a cell is ~55 px wide on a laptop with the sidebar open
    text = [[cell_text(at[(n, t)]).replace(", ", "<br>").replace("× ", "×<br>", 1) if (n, t) in at else "" for t in tasks] for n in names]
    span = max([abs(v) for row in z for v in row if v is not None] + [0.3])
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[task_name(t) for t in tasks],
            y=names,
            text=text,
            texttemplate="%{text}",
            textfont={"size": 11},
            colorscale=speedup_scale(),
            zmin=-span,
            zmax=span,
            colorbar={"title": "speedup", "tickvals": [-1, -0.5, 0, 0.5, 1], "ticktext": ["0.5×", "0.71×", "1×", "1.41×", "2×"]},
            hovertemplate="%{y} on %{x}: %{text}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    title = _title(f"Decode-only speedup over plain decoding by task, batch {batch}", label)
    top = 60 + 18 * title.count("<br>")
    fig.update_layout(title={"text": title, "x": 0}, height=100 + top + 62 * len(names), margin={"l": 10, "r": 10, "t": top, "b": 40})
    return ink(fig)


def batch_figure(rows: list[dict], contender: str, label: str) -> go.Figure:
    """One contender's decode-only speedup against the batch, one line per task, each point's whisker the rule's 95%
    range; the dotted line at 1× is plain decoding."""
    fig = go.Figure()
    for i, task in enumerate(tasks_of(rows)):
        cells = sorted((r for r in rows if r["task"] == task and r["contender"] == contender), key=lambda r: r["batch"])
        if not cells:
            continue
        up = [(r["speedup_hi"] - r["speedup"]) if r.get("speedup_hi") is not None else 0 for r in cells]
        down = [(r["speedup"] - r["speedup_lo"]) if r.get("speedup_lo") is not None else 0 for r in cells]
        fig.add_scatter(
            x=[r["batch"] for r in cells],
            y=[r["speedup"] for r in cells],
            error_y={"type": "data", "array": up, "arrayminus": down, "thickness": 1.2, "width": 4},
            mode="lines+markers",
            name=task_name(task),
            line={"color": COLORS[i % len(COLORS)], "dash": DASHES[i % len(DASHES)]},
            marker={"symbol": SYMBOLS[i % len(SYMBOLS)], "size": 9},
            hovertemplate=task_name(task) + ", batch %{x}: %{y:.2f}×<extra></extra>",
        )
    fig.add_hline(
        y=1.0, line={"color": INK, "dash": "dot", "width": 1}, annotation_text="plain decoding", annotation_position="bottom right"
    )
    fig.update_xaxes(type="log", title_text="batch (rows decoded together)", tickvals=batches_of(rows))
    fig.update_yaxes(title_text="speedup over plain (decoding alone)")
    title = _title(f"{contender}: the speedup as the batch grows, per task", label)  # the label wrapped, never cut
    top = 40 + 18 * title.count("<br>")
    fig.update_layout(
        title={"text": title, "x": 0},
        height=400 + top,
        margin={"l": 60, "r": 20, "t": top + 20, "b": 90},
        legend={"orientation": "h", "y": -0.25},
    )
    return ink(fig)


def findings(rows: list[dict], batch: int) -> list[str]:
    """What the leaderboard at one batch shows, each sentence computed from its cells: per task the contenders the
    rule calls faster (the best first), or that none was; and where n-gram lookup gains the most tokens per pass."""
    at, out = _at(rows, batch), []
    for task in tasks_of(rows):
        cells = sorted((r for (n, t), r in at.items() if t == task and n != "plain"), key=lambda r: -r["speedup"])
        faster = [r for r in cells if r["verdict"] == "faster"]
        if len(faster) == 1 or (faster and ahead(faster[0], faster[1:])):
            best = faster[0]
            others = ", ".join(f"{r['contender']} {r['speedup']:.2f}×" for r in faster[1:])
            won = "was fastest" if others else "was the one contender faster than plain"
            out.append(
                f"**{task_name(task)}**: {best['contender']} {won}, {best['speedup']:.2f}× plain (τ {best['tau'] or 1:.2f})"
                + (f"; also faster than plain: {others}." if others else ".")
            )
        elif faster:
            named = ", ".join(f"{r['contender']} {r['speedup']:.2f}×" for r in faster)
            out.append(
                f"**{task_name(task)}**: faster than plain by the rule: {named}. None clears the others' ranges by the "
                f"rule's {MIN_GAP:.0%} gap, so none is named the fastest: a higher median alone names no winner."
            )
        elif cells:
            out.append(
                f"**{task_name(task)}**: no contender was faster than plain decoding by the rule (best "
                f"{cells[0]['contender']} {cells[0]['speedup']:.2f}×, {cells[0]['verdict']})."
            )
    lookup = [r for (n, t), r in at.items() if n == LOOKUP]  # the lookup alone, not "n-gram, else EAGLE"
    if len(lookup) >= 2:
        hi, lo = max(lookup, key=lambda r: r["tau"] or 1), min(lookup, key=lambda r: r["tau"] or 1)
        out.append(
            f"n-gram lookup drafts by copying text already in the prompt or the answer: its τ ran from "
            f"{lo['tau'] or 1:.2f} on {task_name(lo['task'])} to {hi['tau'] or 1:.2f} on {task_name(hi['task'])}, "
            "where the answer repeats more of what it reads."
        )
    return out


def ahead(best: dict, others: list[dict]) -> bool:
    """Is `best` ahead of every other cell beyond the noise: its 95% range above each other's, and at least MIN_GAP
    (engine/verdict.py) higher? (Two ranges that do not overlap: a stricter test than the rule's paired one, which
    these cells, each judged against plain, do not allow.)"""
    lo = best.get("speedup_lo")
    return lo is not None and all(
        (hi := r.get("speedup_hi")) is not None and lo > hi and best["speedup"] >= (1 + MIN_GAP) * r["speedup"] for r in others
    )


def beside_rows(live: list[dict], recorded: list[dict], task: str, batch: int) -> list[dict]:
    """A live run's cells beside the recording's for the same task and batch: speedup (the rule's word) and τ."""
    rec = {r["contender"]: r for r in recorded if r["task"] == task and r["batch"] == batch}
    anywhere = {r["contender"] for r in recorded}
    out = []
    for r in live:
        if r["contender"] == "plain":
            continue
        other = rec.get(r["contender"])
        missing = "not recorded at this batch" if r["contender"] in anywhere else "not in the recording"
        out.append(
            {
                "contender": r["contender"],
                "live": cell_text(r),
                "recorded": cell_text(other) if other else missing,
                "speedup live ÷ recorded": f"{r['speedup'] / other['speedup']:.2f}×" if other else "—",
            }
        )
    return out


def beside_note(rec: dict, machine: str, prompts: int, tokens: int) -> str:
    """Why a live cell may differ from the recorded one, from what differs between the two runs."""
    s = rec["settings"]
    parts = []
    if machine != rec["machine"]:
        parts.append(f"this page runs on {machine}, the recording on {rec['machine']}: another machine has another room for drafts")
    if prompts != s.get("per_task") or tokens != s.get("max_new_tokens"):
        parts.append(
            f"the live run decoded {prompts} prompt{'s' if prompts != 1 else ''} for {tokens} tokens, the recording "
            f"{s.get('per_task')} for {s.get('max_new_tokens')}: τ depends on which prompts and how far into each answer"
        )
    parts.append("each run's own noise, shown by its 95% range")
    return "Live and recorded can differ because " + "; ".join(parts) + "."


def busy_cores(rows: list[dict]) -> float | None:
    """The median over cells of the cores other processes kept busy while each cell ran (None: not recorded)."""
    seen = sorted(r["other_cores"] for r in rows if r.get("other_cores") is not None)
    return seen[len(seen) // 2] if seen else None


def disturbed_note(rows: list[dict]) -> str | None:
    """'DISTURBED: …' where other work kept more than BUSY_CORES cores busy in the median cell, else None."""
    busy = busy_cores(rows)
    if busy is None or busy <= BUSY_CORES:
        return None
    return f"DISTURBED: other processes kept {busy:.1f} cores busy in the median cell while it ran; its timings are noisy"
