"""Lesson 6, speculate by load: plain decoding, fixed depth and load-aware policies (a batch table from this machine's
room, goodput) across batch sizes; the claim is that far past the room fixed depth loses while a table keyed by load keeps
up with plain. Its run, its words and charts (with the depth chosen per step) and its record.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.common.measurement import CHOSEN, SHAPES, SPREAD, WARMUP
from app.lessons.kit import numbers
from app.lessons.kit.experiment import CURVE_HELP, DECODING_ALONE, DEPTHS, Claim, Experiment, Knob, Prediction, cell_rounds, model_drafter
from app.lessons.kit.gpu import verify_passes
from app.lessons.kit.numbers import (
    LOAD_MAX,
    LOAD_ROUNDS,
    LOAD_TOKENS,
    MAX_STEPS,
    PLAIN,
    POWERS,
    ROW_KEYS,
    batches,
    cell,
    cell_contest,
    decode_rate,
    decode_steps,
    load_table,
    policies,
    rate_of,
    ratio,
    smallest_plain,
    tpot_ms,
)
from app.lessons.kit.runs import Job, cell_of_runs, chosen, machine_curve, median_run, timed_rounds
from app.views.bars import PLAIN_COLOR, SYMBOLS, esc, frame, whiskers
from engine import DecodeConfig
from engine.bench.prompts import batch_prompts
from engine.costs import expected_tokens_per_step

COLORS = ["#8a8d99", "#1f4fd1", "#f2a93b", "#b8006b", "#0a7d32"]


DASHES = ("dot", "solid", "dash", "dashdot", "longdash")  # plain decoding dotted, as before


def by_load_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    """Decoding-alone tokens/s of each policy against batch size (runs' range as whiskers), and time per output token
    against batch size."""
    rows = m["rows"]
    xs = sorted({r["batch"] for r in rows})
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("tokens/s, all rows (higher: better)", "TPOT, ms (lower: better)"),
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
            error_y=whiskers(ok) if len(ok) == len(vals) else None,
            legendgroup=str(i),
            row=1,
            col=1,
        )
        fig.add_scatter(
            x=[str(b) for b in xs],
            y=[tpot_ms(c) if c else None for c in cells],
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


def depth_figure(m: dict, label: str = "", plain: str = "plain decoding") -> go.Figure | None:
    """The depth chosen at each decode step: a panel per (batch size, speculating policy), batch sizes in rows and
    policies in columns, so no batch's line hides another's. None for an older recording without steps."""
    from app.views.bars import COLORS as PALETTE
    from app.views.bars import esc, frame

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


TABLE_RANGES = ((1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 32), (33, 64), (65, 128), (129, 256), (257, 1 << 20))


def fixed_label(k: int) -> str:
    return f"fixed k = {k}"


def load_choice(room: int, s: dict) -> dict:
    """Lesson 6's settings from the room: fixed k (knob 0: the deepest one-row draft inside the room, at most numbers.MOST_DEPTH); the
    load-aware policies' most guesses (the same, at most LOAD_MAX); three batch sizes: 1, the largest power of two
    whose 1-guess verify pass (2 tokens a row) fits the room (where only a shallow draft can ride free: a graded
    depth), and the smallest whose fixed-k verify pass carries PAST x the room."""
    k = int(s["k"]) or numbers.inside_depth(room, 1, most=numbers.MOST_DEPTH)
    most = numbers.inside_depth(room, 1, most=LOAD_MAX)
    mid = max([b for b in POWERS[1:] if 2 * b <= room] or [2])
    past = max(numbers.past_batch(room, k, chosen(POWERS)), 2 * mid)
    return {"room": int(room), "k": k, "most": most, "mid": mid, "past": past}


def load_contenders(drafter: str, c: dict) -> dict[str, DecodeConfig]:
    spec = {"drafter": drafter, "max_new_tokens": LOAD_TOKENS}
    k, most = c["k"], c["most"]
    table = room_table(c["room"], most)
    return {
        PLAIN: DecodeConfig(mode="autoregressive", max_new_tokens=LOAD_TOKENS),
        fixed_label(k): DecodeConfig(depth=k, **spec),
        f"batch table from the room (k ≤ {most})": DecodeConfig(depth=most, policy="batch_table", batch_table=table, **spec),
        f"goodput (k ≤ {most})": DecodeConfig(depth=most, policy="goodput", **spec),
    }


def by_load(pair, probe, s: dict) -> dict:
    """Decoding-alone tokens/s and time per output token of plain decoding and three depth policies at
    three batch sizes chosen from this machine's room (held-out prompts), every contender run LOAD_ROUNDS times,
    interleaved at each batch size; each row keeps its median run's depth at every decode step, and the measurement
    the batch table it set from the room (room_table)."""
    curve, room = machine_curve(pair)
    c = load_choice(room, s)
    drafter = model_drafter(pair)
    contenders = load_contenders(drafter, c)
    table = room_table(room, c["most"])
    rows, warm = [], []
    for batch in (1, c["mid"], c["past"]):
        prompts = batch_prompts("heldout", batch)
        runs, w = timed_rounds(pair, {name: Job(prompts, cfg) for name, cfg in contenders.items()}, LOAD_ROUNDS)
        warm += [x | {"contender": f"{x['contender']}, batch {batch}"} for x in w]
        for name in contenders:
            cl = cell_of_runs(runs[name])
            steps = [[st.batch, st.depth] for st in decode_steps(median_run(runs[name]))][:MAX_STEPS]
            depth = {"mean_depth": cl["mean_depth"] if name != PLAIN else 0.0, "steps": steps}
            rows.append({"batch": batch, "contender": name} | depth | {key: cl.get(key) for key in ROW_KEYS})
    return {"drafter": drafter, "rows": rows, "chosen": c, "curve": curve, "warmup": warm, "table": [list(r) for r in table]}


def fixed_k(m: dict, s: dict) -> int:
    return int(m["chosen"]["k"]) if m.get("chosen") else int(s["k"])


def load_speedup(m: dict, s: dict) -> float | None:
    """Fixed k's decoding-alone speed over plain decoding's at the largest batch (load.ratio: the one rule's ratio,
    the number the table and the verdict show)."""
    batch = max(r["batch"] for r in m["rows"])
    c, p = cell(m["rows"], batch, fixed_label(fixed_k(m, s))), cell(m["rows"], batch, PLAIN)
    return ratio(c, p) if c and p and rate_of(p) else None


def load_models(m: dict, s: dict) -> list[tuple[str, float | None]]:
    c = cell(m["rows"], max(r["batch"] for r in m["rows"]), fixed_label(fixed_k(m, s)))
    bound = expected_tokens_per_step(c["alpha"], c["mean_depth"]) if c and c["alpha"] is not None else None
    return [("Leviathan with a free drafter and a free verify (c = 0): E[tokens per step], an upper bound", bound)]


def load_leviathan(m: dict, s: dict) -> dict | None:
    c = cell(m["rows"], max(r["batch"] for r in m["rows"]), fixed_label(fixed_k(m, s)))
    if not c or c["alpha"] is None:
        return None
    return {"alpha": c["alpha"], "k": c["mean_depth"], "c": None, "measured": load_speedup(m, s)}


def _fixed(m: dict) -> str:
    return f"fixed k = {m['chosen']['k']}"


def room_table(room: int, most: int) -> tuple[tuple[int, int, int], ...]:
    """A batch table (vLLM's num_speculative_tokens_per_batch_size rows: min batch, max batch, k) from the room: for
    each range of batch sizes, the deepest draft (at most `most`) whose verify pass at the range's largest batch still
    fits the room; 0 (off) where not even one guess a row fits."""
    return tuple((lo, hi, max(0, min(most, room // hi - 1))) for lo, hi in TABLE_RANGES)


def _batch_table(m: dict) -> str:
    return next(r["contender"] for r in m["rows"] if r["contender"].startswith("batch table"))


def notes(m: dict, s: dict) -> list[str]:
    """Each policy against plain decoding at every batch size and the depth it drafted there, read off the table's
    × plain and mean k columns (which of them won is the claims' and the table's rule, not a sentence's)."""
    rows = m["rows"]
    bs = batches(rows)
    cells = {name: [(cell(rows, b, name), cell(rows, b, PLAIN)) for b in bs] for name in policies(rows, PLAIN)}
    times = "; ".join(f"{name} " + ", ".join(f"{ratio(r, p):.2f}×" for r, p in pairs if r and p) for name, pairs in cells.items())
    depths = "; ".join(f"{name} " + ", ".join(f"{r['mean_depth']:.2f}" for r, _ in pairs if r) for name, pairs in cells.items())
    at = ", ".join(map(str, bs))
    out = [f"Against plain decoding at batch {at} (the × plain column): {times}.", f"Mean depth k drafted at batch {at}: {depths}."]
    table = m.get("table")
    if table:  # the batch table the policy set from the room: [min batch, max batch, k]
        ranges = [f"k = {k} for batch {lo}" + (f"–{hi}" if hi > lo else "") for lo, hi, k in table if lo <= max(bs)]  # the batches measured
        out.append("The batch table set from the room: " + ", ".join(ranges) + ".")
    return out


CAPTION = DECODING_ALONE + (
    " TPOT (time per output "
    "token): the engine's wall clock per request; every request in a batch waits until its slowest row ends (this "
    "engine does not refill rows, continuous batching does), so a policy can raise the batch's tokens/s and still "
    "lengthen each request's wait."
)


RECORD = Experiment(
    by_load,
    (Knob("l6_k", "Fixed depth k", (0, *DEPTHS), 0, CURVE_HELP + ": the deepest one-row draft inside the room (at most 3)"),),
    Prediction(
        "The speedup of fixed depth k over plain decoding (decoding alone) at the largest batch (1.0 = the same speed)?",
        "e.g. 1.3",
        load_speedup,
        load_models,
    ),
    needs=("eagle", "model"),
    leviathan=load_leviathan,
    notes=notes,
    table=lambda m, s: load_table(m["rows"], PLAIN),
    figures=lambda m, s, label: [by_load_figure(m, s, label), depth_figure(m, label)],
    caption=CAPTION,
    numbers=lambda m, s: [(f"batch {r['batch']}, {r['contender']}", f"{rate_of(r):.1f} tokens/s decoding") for r in m["rows"]],
    gpu_passes=lambda s: verify_passes(s, sorted({1, int(s.get("mid") or 4), int(s.get("past") or 16)})),  # the run's batches
    contest=lambda m, s: cell_contest(m, fixed_label(fixed_k(m, s)), PLAIN),
    plain=smallest_plain,
    name="by_load",
    schema={
        "drafter": "str",
        "rows": [
            {
                "batch": "int",
                "contender": "str",
                "tokens_per_s": "num",
                "mean_depth": "num",
                "alpha": "num?",
                "tokens_per_s_runs?": SPREAD,
                "tpot_ms?": "num?",
                "other_cores?": "num?",
                "decode_tokens_per_s?": "num?",
                "decode_tokens_per_s_runs?": SPREAD,
                "steps?": [["int"]],  # [live batch, depth] of each decode step of the median run
                **SHAPES,
            }
        ],
        **CHOSEN,
        **WARMUP,
        "table?": [["int"]],  # the batch table the policy derived from the curve: [min batch, max batch, k]
    },
    claims=(
        Claim(
            "Far past the room, fixed depth with this drafter loses",
            "fixed k",
            "plain decoding",
            "the largest batch",
            cell_rounds(_fixed, PLAIN, lambda m: m["chosen"]["past"]),
            -1,
            lead=True,
        ),
        Claim(
            "A batch table from the room keeps up with plain there",
            "the batch table",
            "plain decoding",
            "the largest batch",
            cell_rounds(_batch_table, PLAIN, lambda m: m["chosen"]["past"]),
            0,
            lead=True,
        ),
    ),
)
