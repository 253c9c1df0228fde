"""Lesson 6 ("Speculate by load"): tokens/s against batch size for several depth policies, and what the run says.

Input rows are plain dicts, one per (batch, contender): {"batch", "contender", "tokens_per_s", "mean_depth",
"alpha"}, measured by the Lessons page. Every sentence here is computed from those rows (and the student's
prediction): who won at each batch size and by how much, each contender's worst case against the winner,
and the prediction against the measurement. Nothing here calls streamlit.
"""

from __future__ import annotations

import plotly.graph_objects as go

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


def winners(rows: list[dict]) -> list[dict]:
    """Per batch size: the fastest contender, the runner-up, and how far ahead the winner was (ratio - 1)."""
    out = []
    for b in batches(rows):
        ranked = sorted((r for r in rows if r["batch"] == b), key=lambda r: r["tokens_per_s"], reverse=True)
        first = ranked[0]
        second = ranked[1] if len(ranked) > 1 else None
        margin = first["tokens_per_s"] / second["tokens_per_s"] - 1 if second and second["tokens_per_s"] > 0 else None
        out.append(
            {
                "batch": b,
                "winner": first["contender"],
                "tokens_per_s": first["tokens_per_s"],
                "runner_up": second["contender"] if second else None,
                "margin": margin,
            }
        )
    return out


def worst_cases(rows: list[dict]) -> list[tuple[str, float, int]]:
    """(contender, its lowest tokens/s ÷ the winner's over the batch sizes, the batch where that was), best first."""
    best = {w["batch"]: w["tokens_per_s"] for w in winners(rows)}
    out = []
    for name in contenders(rows):
        ratios = [(r["tokens_per_s"] / best[r["batch"]], r["batch"]) for r in rows if r["contender"] == name and best[r["batch"]] > 0]
        if ratios:
            ratio, batch = min(ratios)
            out.append((name, ratio, batch))
    return sorted(out, key=lambda t: -t[1])


def load_table(rows: list[dict], plain: str) -> list[dict]:
    """One table row per (batch, contender): tokens/s, × plain decoding at that batch, mean k, α."""
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


def conclusion(rows: list[dict]) -> list[str]:
    """Who won at each batch size and by how much, then every contender's worst case against the winner."""
    lines = []
    for w in winners(rows):
        ahead = f", {w['margin']:.0%} ahead of {w['runner_up']}" if w["margin"] is not None else ""
        lines.append(f"Batch {w['batch']}: **{w['winner']}** was fastest ({w['tokens_per_s']:.1f} tokens/s{ahead}).")
    worst = worst_cases(rows)
    if worst:
        lines.append(
            "Worst case over the batch sizes (tokens/s ÷ the winner's): "
            + "; ".join(f"{name} {ratio:.2f}× (batch {batch})" for name, ratio, batch in worst)
            + "."
        )
    return lines
