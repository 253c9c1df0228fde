"""Lessons 4-7's experiments: switching speculation off by batch size, adaptive per-sequence depth, depth policies
against load, and width (a draft tree). Each takes (pair, probe, settings) and returns a measurement
(app/common/measurement.py). No streamlit.
"""

from __future__ import annotations

from app.common import measurement as ms
from app.lessons import knee, noise, pass_lessons, switch
from app.lessons.experiment_kit import lane_jobs, model_drafter
from app.lessons.load import cell, load_rate, ratio
from app.lessons.runs import Job, cell_of_runs, lane_pair, median_run, timed_rounds
from app.lessons.width import GOODPUT, goodput_fields
from engine import DecodeConfig
from engine.bench.prompts import batch_prompts
from engine.config import tree_capacity
from engine.costs import expected_tokens_per_step, ridge_tokens

TURN_OFF_ROUNDS = 3  # lesson 4: each run prefills 8 prompts (~1.9 s on a 2-thread Xeon): three lanes × (3 rounds + a warm-up)
POWERS = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # batch sizes a lesson may choose from the curve


def machine_curve(pair) -> tuple[dict, int]:
    """(this machine's pass curve as a measurement records it, its room in tokens per pass): the one lessons 1 to 3
    read (pass_lessons.machine_curve: the small end re-timed in interleaved rounds, or lesson 1's own rows), so every
    lesson of a process speaks of the same room."""
    return pass_lessons.machine_curve(pair)


# --- 4. turn it off ---------------------------------------------------------------------------------
def turn_it_off(pair, probe, s: dict) -> dict:
    """Plain, always-on (draft model, depth k) and off-above-batch-N decoding of one batch of prompts whose answers
    end at different lengths (app/lessons/switch.py), interleaved TURN_OFF_ROUNDS times; k, the batch and N chosen
    from this machine's room where their knobs are 0. Besides the lanes: each lane's decode rate while more than N
    rows decoded and once N or fewer remained, per run, and its median run's steps (live batch, depth, ms)."""
    curve, room = machine_curve(pair)
    c = switch.choose(room, s)
    prompts, tokens, k, drafter = switch.ragged_prompts(c["batch"]), c["tokens"], c["depth"], switch.DRAFTER
    jobs = lane_jobs(prompts, k, drafter, tokens)
    off = DecodeConfig(depth=k, drafter=drafter, max_new_tokens=tokens, policy="off_above_batch", disable_by_batch_size=c["n"])
    runs, warm = timed_rounds(pair, jobs | {"off": Job(prompts, off)}, TURN_OFF_ROUNDS)
    on = lane_pair(runs["ar"], runs["spec"])
    lanes = {"ar": on["ar"], "on": on["spec"], "off": ms.lane_of_runs([r[0] for r in runs["off"]])}
    traces = {"ar": runs["ar"], "on": runs["spec"], "off": runs["off"]}
    steps = {key: switch.step_rows(median_run(runs)[0]) for key, runs in traces.items()}
    phases = {key: switch.phases([r[0] for r in runs], c["n"]) for key, runs in traces.items()}
    return lanes | {"m": on["m"], "chosen": c, "curve": curve, "warmup": warm, "phases": phases, "steps": steps}


# --- 5. adaptive per sequence -----------------------------------------------------------------------
GATE_TOKENS = (32, 16)  # new tokens per sequence at batch 1 and at the large batch
GATE_BATCHES = (2, 4, 8)  # the large batch's candidates
GATE_ROUNDS = 4


def gate_choice(room: int, s: dict) -> dict:
    """Lesson 5's depth (knob 0: the deepest draft a one-row verify pass fits inside the room) and its two batches:
    1, and the smallest batch whose verify pass carries PAST x the room's tokens."""
    depth = int(s["depth"]) or knee.inside_depth(room, 1, most=8)
    return {"room": int(room), "depth": depth, "batch": knee.past_batch(room, depth, GATE_BATCHES)}


def adaptive(pair, probe, s: dict) -> dict:
    """Depth k drafting every token vs stopping below a joint confidence, at batch 1 and past the knee, with plain
    decoding; the three interleaved GATE_ROUNDS times at each batch after a warm-up run each."""
    curve, room = machine_curve(pair)
    c = gate_choice(room, s)
    drafter, depth, threshold = model_drafter(pair), c["depth"], float(s["conf"])
    out, warm = [], []
    for batch, tokens in zip((1, c["batch"]), GATE_TOKENS):
        prompts = batch_prompts("heldout", batch)
        jobs = {"ar": Job(prompts, DecodeConfig(mode="autoregressive", max_new_tokens=tokens))}
        for name, t in (("fixed", 0.0), ("gated", threshold)):
            jobs[name] = Job(prompts, DecodeConfig(depth=depth, drafter=drafter, max_new_tokens=tokens, confidence_threshold=t))
        runs, w = timed_rounds(pair, jobs, GATE_ROUNDS)
        warm += [x | {"contender": f"{x['contender']}, batch {batch}"} for x in w]
        fixed, gated = lane_pair(runs["ar"], runs["fixed"]), lane_pair(runs["ar"], runs["gated"])
        out.append(
            {
                "batch": batch,
                "ar": fixed["ar"],
                "fixed": fixed["spec"],
                "gated": gated["spec"],
                "m_fixed": fixed["m"],
                "m_gated": gated["m"],
            }
        )
    return {"drafter": drafter, "batches": out, "chosen": c, "curve": curve, "warmup": warm}


def gate_ratio(m: dict, s: dict) -> float | None:
    """At batch 1, the gated run's decoding-alone speed over drafting all k's: the one rule's ratio over the
    interleaved rounds, the number the verdict sentence states."""
    b = m["batches"][0]
    v = noise.judge(switch.decode_spread(b["gated"]), switch.decode_spread(b["fixed"]))
    return v.ratio if v else None


def gate_models(m: dict, s: dict) -> list[tuple[str, float | None]]:
    b = m["batches"][0]
    out = []
    for name, key in (
        ("Leviathan, Theorem 3.8", "predicted_speedup"),
        ("Leviathan with the measured verify cost", "predicted_measured_verify"),
    ):
        g, f = b["m_gated"].get(key), b["m_fixed"].get(key)
        out.append((f"{name}: gated ÷ fixed", g / f if g is not None and f else None))
    return out


# --- 6. speculate by load ---------------------------------------------------------------------------
LOAD_TOKENS, LOAD_MAX, LOAD_ROUNDS = 12, 6, 3  # 12 new tokens a run: 16 took a live run past 20 s in a browser (2026-12-04)
PLAIN = "plain decoding"
RATE_KEYS = ("decode_tokens_per_s", "decode_tokens_per_s_runs", "tokens_per_s", "tokens_per_s_runs")  # decoding alone; whole run
SHAPE_KEYS = ("decode_tokens", "passes")  # the median run's decode pass shapes, for the H200 re-timing (app/lessons/retime.py)
ROW_KEYS = (*RATE_KEYS, "alpha", "tpot_ms", "other_cores", *SHAPE_KEYS)


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


TABLE_RANGES = ((1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 32), (33, 64), (65, 128), (129, 256), (257, 1 << 20))


def room_table(room: int, most: int) -> tuple[tuple[int, int, int], ...]:
    """A batch table (vLLM's num_speculative_tokens_per_batch_size rows: min batch, max batch, k) from the room: for
    each range of batch sizes, the deepest draft (at most `most`) whose verify pass at the range's largest batch still
    fits the room; 0 (off) where not even one guess a row fits."""
    return tuple((lo, hi, max(0, min(most, room // hi - 1))) for lo, hi in TABLE_RANGES)


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
            steps = [[st.batch, st.depth] for st in switch.decode_steps(median_run(runs[name]))][: switch.MAX_STEPS]
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


# --- 7. width: a draft tree ------------------------------------------------------------------------------
WIDTH_DEPTH, WIDTH_PROMPTS, WIDTH_TOKENS, WIDTH_ROUNDS = 4, 3, 16, 3  # most chain depth; prompts at batch 1; tokens; rounds
# (three rounds: five took a live run to 27 s in a browser, 2026-12-04)
WIDTH_CONTENDERS = (PLAIN, "chain", "tree", GOODPUT)
WIDTH_BATCHES = (2, 4, 8, 16)  # the large batch's candidates


def width_choice(room: int, s: dict) -> dict:
    """Lesson 7's shapes from the room: the chain, the deepest one-row draft inside it (at most WIDTH_DEPTH); the
    tree (knob 0), the widest whose one-row verify pass still fits the room (room - 1 nodes) where that is wider
    than the chain, else twice the chain's nodes (this machine then has no room for width, and the page says so);
    its branching (knob 0) half its nodes, 2 to 4; the nodes at most what a tree as deep as the chain can draft with
    that branching (a small room gives a shallow chain); the large batch, the smallest whose tree verify pass carries
    PAST x the room."""
    depth = knee.inside_depth(room, 1, most=WIDTH_DEPTH)
    nodes = int(s["nodes"]) or (room - 1 if room - 1 > depth else 2 * depth)
    topk = int(s["topk"]) or max(2, min(4, nodes // 2))
    nodes = min(nodes, tree_capacity(depth, topk))
    batch = int(s["batch"]) or knee.past_batch(room, nodes, WIDTH_BATCHES)
    return {"room": int(room), "depth": depth, "nodes": nodes, "topk": topk, "batch": batch}


def width_configs(drafter: str, depth: int, nodes: int, topk: int) -> list[DecodeConfig]:
    """Plain decoding, a chain of `depth`, a tree of `nodes` nodes (top-`topk`) as deep, and the goodput policy
    choosing per step between plain, a chain of k ≤ `depth` and that tree cut to its best n ≤ `nodes`."""
    spec = {"drafter": drafter, "depth": depth, "max_new_tokens": WIDTH_TOKENS}
    tree = {"tree_nodes": nodes, "tree_topk": topk}
    return [
        DecodeConfig(mode="autoregressive", max_new_tokens=WIDTH_TOKENS),
        DecodeConfig(**spec),
        DecodeConfig(**tree, **spec),
        DecodeConfig(policy="goodput", **tree, **spec),
    ]


def width(pair, probe, s: dict) -> dict:
    """The four contenders at batch 1 (WIDTH_PROMPTS held-out prompts, one after another) and at the large batch,
    each run WIDTH_ROUNDS times, interleaved at each batch size; the shapes chosen from this machine's room where
    their knobs are 0. Goodput's row adds the shape its median run verified at each step (app/lessons/width.py
    `goodput_fields`); it starts from what earlier goodput runs of this process learnt."""
    curve, room = machine_curve(pair)
    c = width_choice(room, s)
    drafter, depth, nodes, topk = model_drafter(pair), c["depth"], c["nodes"], c["topk"]
    rows, warm = [], []
    for b in (1, c["batch"]):
        prompts = batch_prompts("heldout", WIDTH_PROMPTS if b == 1 else b)
        configs = width_configs(drafter, depth, nodes, topk)
        jobs = {name: Job(prompts, cfg, sequential=b == 1) for name, cfg in zip(WIDTH_CONTENDERS, configs)}
        runs, w = timed_rounds(pair, jobs, WIDTH_ROUNDS)
        warm += [x | {"contender": f"{x['contender']}, batch {b}"} for x in w]
        for name, per_row in zip(WIDTH_CONTENDERS, (0, depth, nodes, None)):
            cl = cell_of_runs(runs[name])
            keys = ("verify_ms", "flops", "tokens_per_step", "other_cores", *RATE_KEYS, *SHAPE_KEYS)
            own = goodput_fields(b, median_run(runs[name])) if per_row is None else {"tokens_per_pass": b * (per_row + 1)}
            rows.append({"batch": b, "contender": name} | own | {k: cl.get(k) for k in keys})
    ridge = ridge_tokens(pair.target_costs, probe.peak_flops, probe.peak_bandwidth)
    return {"drafter": drafter, "ridge_tokens": ridge, "depth": depth, "nodes": nodes, "topk": topk, "rows": rows} | {
        "chosen": c,
        "curve": curve,
        "warmup": warm,
    }
