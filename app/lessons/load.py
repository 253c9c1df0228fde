"""Lesson 6 ("Speculate by load"): tokens/s against batch size for several depth policies, and what the run says.

Input rows are plain dicts, one per (batch, contender): {"batch", "contender", "tokens_per_s", "mean_depth",
"alpha"} and, in newer measurements, "tokens_per_s_runs" (every interleaved run) and "tpot_ms" (time per output
token of a request). Every sentence here is computed from those rows (and the student's prediction): who won
at each batch size, only by the one rule over the interleaved rounds (app/common/verdict.py); contenders that
did the same work (same mean k and α) called identical; each contender's worst case against plain decoding; and
the prediction against the measurement. Nothing here calls streamlit.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.lessons import knee, noise
from app.lessons.noise import serving_note
from app.views.palette import ink
from app.views.sweep import tokens_per_s_axes

COLORS = ["#8a8d99", "#1f4fd1", "#f2a93b", "#b8006b", "#0a7d32"]
DASHES = ("dot", "solid", "dash", "dashdot", "longdash")  # plain decoding dotted, as before
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star")


def contenders(rows: list[dict]) -> list[str]:
    """Contender names in the order they were measured."""
    return list(dict.fromkeys(r["contender"] for r in rows))


def batches(rows: list[dict]) -> list[int]:
    return sorted({r["batch"] for r in rows})


def load_rate(r: dict) -> float:
    """A row's decoding-alone tokens/s (median of its runs); an older row's whole-run rate (it has no other)."""
    rate = r.get("decode_tokens_per_s")
    return rate if rate is not None else r["tokens_per_s"]


def load_runs(r: dict) -> dict | None:
    """A row's decoding-alone rates over its runs; an older row's whole-run rates."""
    return r.get("decode_tokens_per_s_runs") or r.get("tokens_per_s_runs")


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
            y=[load_rate(c) if c else None for c in cells],
            mode="lines+markers",
            name=name,
            line={"color": COLORS[i % len(COLORS)], "width": 3 if i >= 3 else 2, "dash": DASHES[i % len(DASHES)]},
            marker={"symbol": SYMBOLS[i % len(SYMBOLS)], "size": 8},  # told apart by more than colour
            customdata=[c["mean_depth"] if c and c.get("mean_depth") is not None else 0.0 for c in cells],
            hovertemplate=f"{name}, batch %{{x}}: %{{y:.1f}} tokens/s, mean k %{{customdata:.2f}}<extra></extra>",
        )
    return ink(tokens_per_s_axes(fig))


def ratio(r: dict, base: dict) -> float:
    """r's speed over base's, the one number every table, chart and sentence shows: the one rule's ratio over
    their interleaved rounds (noise.judge), the ratio of their rates where they carry no rounds."""
    v = noise.judge(load_runs(r), load_runs(base))
    return v.ratio if v else load_rate(r) / load_rate(base)


def same_work(a: dict, b: dict) -> bool:
    """Did two contenders do the same work at one batch size: the same mean k and α (e.g. "off above batch 8" and
    "fixed k = 4" at batch 1, where the switch never acts)? Then they ran the same steps and differ only by noise."""
    return a["mean_depth"] == b["mean_depth"] and a.get("alpha") == b.get("alpha")


def winners(rows: list[dict]) -> list[dict]:
    """Per batch size: the contender with the highest median tokens/s, the runner-up, the one rule's verdict of the
    first against the second (noise.judge: None without rounds), whether it names the first the winner, and whether
    the two did the same work (same mean k and α: the same steps, so any gap is noise)."""
    out = []
    for b in batches(rows):
        ranked = sorted((r for r in rows if r["batch"] == b), key=load_rate, reverse=True)
        first = ranked[0]
        second = ranked[1] if len(ranked) > 1 else None
        v = noise.judge(load_runs(first), load_runs(second)) if second else None
        out.append(
            {
                "batch": b,
                "winner": first["contender"],
                "tokens_per_s": load_rate(first),
                "runner_up": second["contender"] if second else None,
                "runner_up_tokens_per_s": load_rate(second) if second else None,
                "verdict": v,
                "clear": bool(v and v.sign > 0),
                "same_work": bool(second and same_work(first, second)),
            }
        )
    return out


def worst_cases(rows: list[dict], plain: str = "plain decoding") -> list[tuple[str, float, int]]:
    """(contender, its lowest tokens/s ÷ plain decoding's at the same batch size, the batch where that was), best
    first: the same yardstick as lesson 4's always-on against plain."""
    base = {r["batch"]: r for r in rows if r["contender"] == plain}
    out = []
    for name in contenders(rows):
        if name == plain:
            continue
        ratios = [(ratio(r, base[r["batch"]]), r["batch"]) for r in rows if r["contender"] == name and r["batch"] in base]
        if ratios:
            worst, batch = min(ratios)
            out.append((name, worst, batch))
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
            runs = load_runs(r)
            table.append(
                {
                    "batch": b,
                    "policy": name,
                    "decoding tokens/s": round(load_rate(r), 1),
                    "× plain": round(ratio(r, base), 2) if base and load_rate(base) else None,
                    "runs (decoding tokens/s)": ", ".join(f"{v:.1f}" for v in runs["values"]) if runs else "one run",
                    "whole run tokens/s (prefill included)": round(r["tokens_per_s"], 1),
                    "TPOT ms": None if r.get("tpot_ms") is None else round(r["tpot_ms"], 1),
                    "mean k": None if r.get("mean_depth") is None else round(r["mean_depth"], 2),
                    "α": None if r.get("alpha") is None else round(r["alpha"], 2),
                    "against the next (the rule's ratio, 95% range)": _against_next(rows, b, name),
                }
            )
    return table


def _against_next(rows: list[dict], batch: int, name: str) -> str:
    """For the batch's highest median: the rule's ratio against the next, as its verdict sentence states it."""
    w = next((w for w in winners(rows) if w["batch"] == batch), None)
    if not w or w["winner"] != name or w["verdict"] is None:
        return ""
    return f"× {w['runner_up']}: {w['verdict'].interval}"


def prediction_line(rows: list[dict], prediction: float, *, plain: str, contender: str, batch: int) -> str | None:
    """The student's predicted speedup of `contender` over `plain` at `batch` against the measured one."""
    c, p = cell(rows, batch, contender), cell(rows, batch, plain)
    if c is None or p is None or not load_rate(p):
        return None
    measured = ratio(c, p)
    said = "win" if prediction > 1 else "lose" if prediction < 1 else "tie"
    did = "won" if measured > 1 else "lost" if measured < 1 else "tied"
    verdict = "as you predicted" if (said, did) in (("win", "won"), ("lose", "lost"), ("tie", "tied")) else f"you expected it to {said}"
    return (
        f"You predicted {prediction:.2f}× for {contender} at batch {batch}; it measured {measured:.2f}× "
        f"plain decoding ({load_rate(c):.1f} vs {load_rate(p):.1f} tokens/s, decoding alone): it {did}, {verdict}, and "
        f"your number was off by {abs(measured - prediction):.2f}."
    )


def _batch_line(w: dict) -> str:
    """One batch size's verdict by the one rule, every rate it names read from the table's rows."""
    if w["runner_up"] is None:
        return f"Batch {w['batch']}: **{w['winner']}** ran {w['tokens_per_s']:.1f} tokens/s."
    v, twin = w["verdict"], ""
    if w["same_work"]:
        twin = " The two ran identical settings at this batch (the same mean k and α, so the same steps): their gap is noise."
    if w["clear"]:
        return f"Batch {w['batch']}: **{w['winner']}** was fastest ({w['tokens_per_s']:.1f} tokens/s): {v.words(b=w['runner_up'])}.{twin}"
    said = v.words(b=w["runner_up"]) if v else f"one run each against {w['runner_up']}: can't tell"
    return (
        f"Batch {w['batch']}: no winner named. **{w['winner']}** had the highest median ({w['tokens_per_s']:.1f} tokens/s), "
        f"{w['runner_up']} the next ({w['runner_up_tokens_per_s']:.1f}): {said}.{twin}"
    )


def conclusion(rows: list[dict], plain: str = "plain decoding") -> list[str]:
    """Who won at each batch size (only by the one rule), every policy's worst case against plain decoding, and
    what a request waited per token at the largest batch."""
    lines = [_batch_line(w) for w in winners(rows)]
    worst = worst_cases(rows, plain)
    if worst:
        lines.append(
            "Worst case over the batch sizes, against plain decoding at the same batch (as in lesson 4): "
            + "; ".join(f"{name} {r:.2f}× (batch {batch})" for name, r, batch in worst)
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


# --- the depth each policy chose, step by step -----------------------------------------------------------
def policies(rows: list[dict], plain: str = "plain decoding") -> list[str]:
    """The contenders that speculate (every one but plain decoding), in the order measured."""
    return [n for n in contenders(rows) if n != plain]


def depth_text(r: dict) -> str:
    """'k = 2 at 7 steps, 3 at 2, 0 at 1 (mean 1.89)' from a row's steps, most frequent first."""
    depths = [d for _, d in r.get("steps") or []]
    counts = sorted({d: depths.count(d) for d in depths}.items(), key=lambda kv: (-kv[1], kv[0]))
    listed = ", ".join(f"{d} at {n} step{'s' if n != 1 else ''}" for d, n in counts)
    return f"k = {listed} (mean {r['mean_depth']:.2f})"


def usual_depth(r: dict) -> int | None:
    """The depth a row chose most often over its decode steps (the smaller one on a tie); None without steps."""
    depths = [d for _, d in r.get("steps") or []]
    return min(set(depths), key=lambda d: (-depths.count(d), d)) if depths else None


def graded(r: dict, most: int) -> bool:
    """Was the depth a row chose most often between 0 and its policy's maximum (a graded depth, neither off nor
    all-in)? A lone exploring step does not count."""
    d = usual_depth(r)
    return d is not None and 0 < d < most


def envelope_word(rows: list[dict], r: dict, fixed: str, plain: str) -> str:
    """A row against the better of plain decoding and fixed k at its batch, by the one rule."""
    pair = [x for x in (cell(rows, r["batch"], plain), cell(rows, r["batch"], fixed)) if x]
    best = max(pair, key=load_rate)
    word = noise.word(load_runs(r), load_runs(best))
    return f"{word} {best['contender']} ({load_rate(r):.1f} against {load_rate(best):.1f} tokens/s)"


def fixed_line(rows: list[dict], fixed: str, plain: str) -> str:
    """Fixed k against plain decoding at every batch size, by the one rule: the yardstick the policies beat."""
    parts = []
    for b in batches(rows):
        f, p = cell(rows, b, fixed), cell(rows, b, plain)
        if f and p and load_rate(p):
            v = noise.judge(load_runs(f), load_runs(p))
            said = f"{v.word} plain: {v.interval}" if v else "one run each: can't tell"
            parts.append(f"at batch {b} ({said})")
    return f"**{fixed}** against plain decoding, decoding alone: " + "; ".join(parts) + "."


def depth_lines(m: dict, plain: str = "plain decoding") -> list[str]:
    """Per load-aware policy: the depth it chose at each batch size, whether it ever chose a graded one, and how it
    fared against the better of plain decoding and fixed k there (the envelope of the fixed choices)."""
    rows, c = m["rows"], m.get("chosen") or {}
    fixed = next((n for n in policies(rows, plain) if n.startswith("fixed")), None)
    lines = [fixed_line(rows, fixed, plain)] if fixed else []
    for name in policies(rows, plain):
        if name == fixed:
            continue
        mine = [r for r in rows if r["contender"] == name]
        text = f"**{name}**: " + "; ".join(f"at batch {r['batch']} {depth_text(r)}, {envelope_word(rows, r, fixed, plain)}" for r in mine)
        most = c.get("most")
        if most and any(r.get("steps") for r in mine):
            at = [r["batch"] for r in mine if graded(r, most)]
            text += (
                f". Its usual depth was graded (between 0 and {most}) at batch {', '.join(map(str, at))}."
                if at
                else f". Its usual depth was never between 0 and {most}: at every batch size it mostly chose "
                + " or ".join(sorted({f"k = {usual_depth(r)}" for r in mine if r.get("steps")}))
                + "."
            )
        text += "" if text.endswith(".") else "."
        first = mine[0] if mine else None
        if name.startswith("goodput") and first and usual_depth(first) == 0 and fixed and cell(rows, first["batch"], fixed):
            vs = ratio(cell(rows, first["batch"], fixed), cell(rows, first["batch"], plain))
            text += (
                f" At batch {first['batch']} it was off at most steps, where fixed k ran {vs:.2f}× plain: it starts from "
                f"a prior guess of the acceptance, and a run of {len(first['steps'])} decode steps leaves it few steps to "
                "correct it."
            )
        lines.append(text)
    return lines


def room_line(m: dict) -> str | None:
    """The room of this machine's curve and the settings it chose (newer measurements)."""
    c, curve = m.get("chosen"), m.get("curve")
    if not c or not curve:
        return None
    k, mid, past = c["k"], c["mid"], c["past"]
    t, ms = curve["tokens"], curve["ms"]
    text = knee.room_words(c["room"], t, ms) + (
        f" So fixed k = {k} (one row's verify pass of {k + 1} tokens fits the room); batch {mid}, where a verify pass "
        f"of one guess a row ({2 * mid} tokens) fits it and a deeper one does not; and batch {past}, where fixed k's "
        f"verify pass carries {past * (k + 1)} tokens ({knee.cost_at(t, ms, past * (k + 1)):.2f}× a one-token pass, "
        f"against {knee.cost_at(t, ms, past):.2f}× for plain decoding's {past})."
    )
    table = m.get("table")
    if table:
        text += (
            " The batch table set from the room (the deepest draft whose verify pass fits it): "
            + ", ".join(f"k = {k_} for batch {lo}–{hi}" for lo, hi, k_ in table[:5])
            + "."
        )
    return text


def depth_figure(m: dict, label: str = "", plain: str = "plain decoding") -> go.Figure | None:
    """The depth chosen at each decode step: a panel per (batch size, speculating policy), batch sizes in rows and
    policies in columns, so no batch's line hides another's. None for an older recording without steps."""
    from app.lessons.figures import COLORS as PALETTE
    from app.lessons.figures import esc, frame

    rows = m["rows"]
    names = [n for n in policies(rows, plain) if any(r.get("steps") for r in rows if r["contender"] == n)]
    if not names:
        return None
    sizes = [b for b in batches(rows) if any((cell(rows, b, n) or {}).get("steps") for n in names)]
    titles = [esc(n) if i == 0 else "" for i in range(len(sizes)) for n in names]
    fig = make_subplots(rows=len(sizes), cols=len(names), subplot_titles=titles, shared_yaxes=True, vertical_spacing=0.08)
    for row, b in enumerate(sizes, start=1):
        style = row - 1
        line = {"color": PALETTE[style % len(PALETTE)], "width": 2.5, "shape": "hv", "dash": DASHES[style % len(DASHES)]}
        marker = {"symbol": SYMBOLS[style % len(SYMBOLS)], "size": 7}
        for col, name in enumerate(names, start=1):
            r = cell(rows, b, name)
            if r and r.get("steps"):
                depth = [d for _, d in r["steps"]]
                shown = {"legendgroup": str(b), "showlegend": col == 1, "row": row, "col": col}
                xs = list(range(1, len(depth) + 1))
                fig.add_scatter(x=xs, y=depth, mode="lines+markers", name=f"batch {b}", line=line, marker=marker, **shown)
        fig.update_yaxes(title_text=f"batch {b}: k", rangemode="tozero", row=row, col=1)
    fig.update_xaxes(title_text="decode step", row=len(sizes))
    return frame(fig, "The depth each policy chose at every decode step, at each batch size", label, height=120 + 150 * len(sizes))
