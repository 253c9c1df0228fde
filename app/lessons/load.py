"""Lesson 6 ("Speculate by load"): tokens/s against batch size for several depth policies, and what the run says.

Input rows are plain dicts, one per (batch, contender): {"batch", "contender", "tokens_per_s", "mean_depth",
"alpha"} and, in newer measurements, "tokens_per_s_runs" (every interleaved run) and "tpot_ms" (time per output
token of a request). Every sentence here is computed from those rows (and the student's prediction): who won
at each batch size, and only beyond the spread of the runs; contenders that did the same work (same mean k
and α) called identical; each contender's worst case against plain decoding; and the prediction against the
measurement. Nothing here calls streamlit.
"""

from __future__ import annotations

import plotly.graph_objects as go

from app.lessons.noise import clear_winner, serving_note
from app.views.sweep import tokens_per_s_axes

COLORS = ["#8a8d99", "#1f4fd1", "#f2a93b", "#b8006b", "#0a7d32"]


def contenders(rows: list[dict]) -> list[str]:
    """Contender names in the order they were measured."""
    return list(dict.fromkeys(r["contender"] for r in rows))


def batches(rows: list[dict]) -> list[int]:
    return sorted({r["batch"] for r in rows})


def cell(rows: list[dict], batch: int, contender: str) -> dict | None:
    """The row of (batch, contender) in a per-(batch, contender) table (lessons 6 and 7), None if absent."""
    return next((r for r in rows if r["batch"] == batch and r["contender"] == contender), None)


def load_figure(rows: list[dict]) -> go.Figure:
    """One line per contender: measured tokens/s (all sequences) at each batch size; hover adds the mean k."""
    xs = batches(rows)
    fig = go.Figure()
    for i, name in enumerate(contenders(rows)):
        cells = [cell(rows, b, name) for b in xs]
        fig.add_scatter(
            x=[str(b) for b in xs],
            y=[c["tokens_per_s"] if c else None for c in cells],
            mode="lines+markers",
            name=name,
            line={"color": COLORS[i % len(COLORS)], "width": 3 if i >= 3 else 2, "dash": "dot" if i == 0 else None},
            customdata=[c["mean_depth"] if c and c.get("mean_depth") is not None else 0.0 for c in cells],
            hovertemplate=f"{name}, batch %{{x}}: %{{y:.1f}} tokens/s, mean k %{{customdata:.2f}}<extra></extra>",
        )
    return tokens_per_s_axes(fig)


def same_work(a: dict, b: dict) -> bool:
    """Did two contenders do the same work at one batch size: the same mean k and α (e.g. "off above batch 8" and
    "fixed k = 4" at batch 1, where the switch never acts)? Then they ran the same steps and differ only by noise."""
    return a["mean_depth"] == b["mean_depth"] and a.get("alpha") == b.get("alpha")


def winners(rows: list[dict]) -> list[dict]:
    """Per batch size: the fastest contender (by median tokens/s), the runner-up, how far ahead the winner was
    (ratio - 1), whether that is beyond the spread (every run of the winner above every run of the runner-up,
    noise.clear_winner), and the contenders that did the same work as the winner."""
    out = []
    for b in batches(rows):
        ranked = sorted((r for r in rows if r["batch"] == b), key=lambda r: r["tokens_per_s"], reverse=True)
        first = ranked[0]
        twins = [r["contender"] for r in ranked[1:] if same_work(first, r)]
        others = [r for r in ranked[1:] if r["contender"] not in twins]
        second = others[0] if others else None
        margin = first["tokens_per_s"] / second["tokens_per_s"] - 1 if second and second["tokens_per_s"] > 0 else None
        clear = bool(second) and clear_winner(first.get("tokens_per_s_runs"), second.get("tokens_per_s_runs")) > 0
        out.append(
            {
                "batch": b,
                "winner": first["contender"],
                "tokens_per_s": first["tokens_per_s"],
                "runner_up": second["contender"] if second else None,
                "margin": margin,
                "clear": clear,
                "same_work": twins,
            }
        )
    return out


def worst_cases(rows: list[dict], plain: str = "plain decoding") -> list[tuple[str, float, int]]:
    """(contender, its lowest tokens/s ÷ plain decoding's at the same batch size, the batch where that was), best
    first: the same yardstick as lesson 4's always-on against plain."""
    base = {r["batch"]: r["tokens_per_s"] for r in rows if r["contender"] == plain}
    out = []
    for name in contenders(rows):
        if name == plain:
            continue
        ratios = [(r["tokens_per_s"] / base[r["batch"]], r["batch"]) for r in rows if r["contender"] == name and base.get(r["batch"])]
        if ratios:
            ratio, batch = min(ratios)
            out.append((name, ratio, batch))
    return sorted(out, key=lambda t: -t[1])


def load_table(rows: list[dict], plain: str) -> list[dict]:
    """One table row per (batch, contender): tokens/s (median, and every run), × plain decoding at that batch, time
    per output token of a request (TPOT), mean k, α."""
    table = []
    for b in batches(rows):
        base = cell(rows, b, plain)
        for name in contenders(rows):
            r = cell(rows, b, name)
            if r is None:
                continue
            table.append(
                {
                    "batch": b,
                    "policy": name,
                    "tokens/s": round(r["tokens_per_s"], 1),
                    "× plain": round(r["tokens_per_s"] / base["tokens_per_s"], 2) if base and base["tokens_per_s"] else None,
                    "runs (tokens/s)": ", ".join(f"{v:.1f}" for v in r["tokens_per_s_runs"]["values"])
                    if r.get("tokens_per_s_runs")
                    else "one run",
                    "TPOT ms": None if r.get("tpot_ms") is None else round(r["tpot_ms"], 1),
                    "mean k": None if r.get("mean_depth") is None else round(r["mean_depth"], 2),
                    "α": None if r.get("alpha") is None else round(r["alpha"], 2),
                }
            )
    return table


def prediction_line(rows: list[dict], prediction: float, *, plain: str, contender: str, batch: int) -> str | None:
    """The student's predicted speedup of `contender` over `plain` at `batch` against the measured one."""
    c, p = cell(rows, batch, contender), cell(rows, batch, plain)
    if c is None or p is None or not p["tokens_per_s"]:
        return None
    measured = c["tokens_per_s"] / p["tokens_per_s"]
    said = "win" if prediction > 1 else "lose" if prediction < 1 else "tie"
    did = "won" if measured > 1 else "lost" if measured < 1 else "tied"
    verdict = "as you predicted" if (said, did) in (("win", "won"), ("lose", "lost"), ("tie", "tied")) else f"you expected it to {said}"
    return (
        f"You predicted {prediction:.2f}× for {contender} at batch {batch}; it measured {measured:.2f}× "
        f"plain decoding ({c['tokens_per_s']:.1f} vs {p['tokens_per_s']:.1f} tokens/s): it {did}, {verdict}, and "
        f"your number was off by {abs(measured - prediction):.2f}."
    )


def _batch_line(w: dict) -> str:
    """One batch size's verdict; contenders that did the winner's work are named with it, as identical."""
    names = " and ".join(f"**{n}**" for n in [w["winner"], *w["same_work"]])
    if w["same_work"]:
        names += " (identical settings at this batch: the same mean k and α, so the same steps; their gap is noise)"
    verb = "were" if w["same_work"] else "was"
    if w["runner_up"] is None:
        return f"Batch {w['batch']}: {names} ran {w['tokens_per_s']:.1f} tokens/s."
    if w["clear"]:
        return (
            f"Batch {w['batch']}: {names} {verb} fastest ({w['tokens_per_s']:.1f} tokens/s, {w['margin']:.0%} "
            f"ahead of {w['runner_up']}, every run above every run of it)."
        )
    return (
        f"Batch {w['batch']}: no clear winner: {names} had the highest median ({w['tokens_per_s']:.1f} tokens/s, "
        f"{w['margin']:.0%} ahead of {w['runner_up']}), but their runs overlap or ran once."
    )


def conclusion(rows: list[dict], plain: str = "plain decoding") -> list[str]:
    """Who won at each batch size (only beyond the spread), every policy's worst case against plain decoding, and
    what a request waited per token at the largest batch."""
    lines = [_batch_line(w) for w in winners(rows)]
    worst = worst_cases(rows, plain)
    if worst:
        lines.append(
            "Worst case over the batch sizes, against plain decoding at the same batch (as in lesson 4): "
            + "; ".join(f"{name} {ratio:.2f}× (batch {batch})" for name, ratio, batch in worst)
            + "."
        )
    top = max(batches(rows)) if rows else None
    timed = [r for r in rows if r["batch"] == top and r.get("tpot_ms") is not None]
    if timed:
        lines.append(
            f"Per request at batch {top}, time per output token: "
            + "; ".join(f"{r['contender']} {r['tpot_ms']:.1f} ms" for r in timed)
            + ". "
            + serving_note({}, {}, top)
        )
    return lines
