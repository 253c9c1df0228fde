"""Lesson 6, speculate by load: plain decoding, fixed depth and load-aware policies (a batch table from this machine's
room, goodput) across batch sizes; the claim is that past the knee fixed depth loses while a table keyed by load keeps
up with plain. Its run, its words and charts (with the depth chosen per step) and its record.
"""

from __future__ import annotations

import streamlit as st

from app.common.drafters import label as drafter_label
from app.common.measurement import CHOSEN, SHAPES, SPREAD, WARMUP
from app.lessons.kit import knee, noise
from app.lessons.kit.experiment import CURVE_HELP, DEPTHS, Claim, Experiment, Knob, Prediction, cell_rounds, model_drafter
from app.lessons.kit.gpu import verify_passes
from app.lessons.kit.noise import serving_note
from app.lessons.kit.rows import (
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
    contenders,
    decode_steps,
    load_rate,
    load_runs,
    load_table,
    policies,
    ratio,
    smallest_plain,
    winners,
)
from app.lessons.kit.runs import Job, cell_of_runs, machine_curve, median_run, timed_rounds
from app.lessons.kit.show import noise_note, settings_note, show_chart, show_table
from app.lessons.l6_by_load.charts import by_load_figure, depth_figure
from engine import DecodeConfig
from engine.bench.prompts import batch_prompts
from engine.costs import expected_tokens_per_step

TABLE_RANGES = ((1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 32), (33, 64), (65, 128), (129, 256), (257, 1 << 20))


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


def fixed_label(k: int) -> str:
    return f"fixed k = {k}"


def load_choice(room: int, s: dict) -> dict:
    """Lesson 6's settings from the room: fixed k (knob 0: the deepest one-row draft inside the room, at most knee.MOST_DEPTH); the
    load-aware policies' most guesses (the same, at most LOAD_MAX); three batch sizes: 1, the largest power of two
    whose 1-guess verify pass (2 tokens a row) fits the room (where only a shallow draft can ride free: a graded
    depth), and the smallest whose fixed-k verify pass carries PAST x the room."""
    k = int(s["k"]) or knee.inside_depth(room, 1, most=knee.MOST_DEPTH)
    most = knee.inside_depth(room, 1, most=LOAD_MAX)
    mid = max([b for b in POWERS[1:] if 2 * b <= room] or [2])
    past = max(knee.past_batch(room, k, POWERS), 2 * mid)
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
    """Decoding-alone and whole-run tokens/s and time per output token of plain decoding and three depth policies at
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
    return ratio(c, p) if c and p and load_rate(p) else None


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


def depth_text(r: dict) -> str:
    """'k = 2 at 7 steps, 3 at 2, 0 at 1 (mean 1.89)' from a row's steps, most frequent first."""
    depths = [d for _, d in r.get("steps") or []]
    counts = sorted({d: depths.count(d) for d in depths}.items(), key=lambda kv: (-kv[1], kv[0]))
    listed = ", ".join(f"{d} at {n} step{'s' if n != 1 else ''}" for d, n in counts)
    return f"k = {listed} (mean {r['mean_depth']:.2f})"


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


def room_table(room: int, most: int) -> tuple[tuple[int, int, int], ...]:
    """A batch table (vLLM's num_speculative_tokens_per_batch_size rows: min batch, max batch, k) from the room: for
    each range of batch sizes, the deepest draft (at most `most`) whose verify pass at the range's largest batch still
    fits the room; 0 (off) where not even one guess a row fits."""
    return tuple((lo, hi, max(0, min(most, room // hi - 1))) for lo, hi in TABLE_RANGES)


def _batch_table(m: dict) -> str:
    return next(r["contender"] for r in m["rows"] if r["contender"].startswith("batch table"))


def show_by_load(m: dict, s: dict, label: str = "") -> None:
    rows = m["rows"]
    st.markdown(f"Drafter: {drafter_label(m['drafter'])}.")
    settings_note(m, s)
    show_chart(by_load_figure(m, s, label), "lesson_load_fig")
    depths = depth_figure(m, label)  # the depth chosen at every step (None: an older recording)
    if depths is not None:
        show_chart(depths, "lesson_load_depths")
    st.caption(
        "Decoding alone: the prompt's pass (prefill) is left out; the table's whole-run column keeps it in. Time per "
        "output token: the engine's wall clock per request (every request in a batch waits until "
        "its slowest row ends; this engine does not refill rows, continuous batching does)."
    )
    noise_note(rows)
    show_table(load_table(rows, PLAIN))
    lines = [line for line in (room_line(m),) if line] + conclusion(rows) + depth_lines(m)
    st.success("\n\n".join(lines))


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
    verdict=lambda m, s: [x for x in (room_line(m),) if x] + depth_lines(m) + conclusion(m["rows"]),
    table=lambda m, s: load_table(m["rows"], PLAIN),
    show=show_by_load,
    numbers=lambda m, s: [(f"batch {r['batch']}, {r['contender']}", f"{load_rate(r):.1f} tokens/s decoding") for r in m["rows"]],
    gpu_passes=lambda s: verify_passes(s, [1, 4, 16]),
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
            "Past the knee, fixed depth loses",
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
