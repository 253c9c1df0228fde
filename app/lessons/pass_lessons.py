"""Lessons 1-3's experiments: one pass against tokens per pass, speculation's extra FLOPs, and speculation at batch 1
against a large batch. Each takes (pair, probe, settings) and returns a measurement (app/common/measurement.py).

Their contenders come from the pass-cost curve of the machine that runs them (its small end timed again by the lesson,
machine_curve; app/lessons/knee.py reads its room): a setting of 0 means "from this machine's curve", and the
measurement records what it resolved to (`chosen`) beside the curve it read, so the page can show both. No streamlit.
"""

from __future__ import annotations

import datetime as dt
import statistics
import time

from app.common import measurement as ms
from app.lessons import knee, noise
from app.lessons.experiment_kit import lane_jobs, model_drafter
from app.lessons.runs import LARGE_BATCHES, knee_tokens, lane_pair, median_run, more_rounds, seed_passes, timed_rounds
from engine.bench.prompts import batch_prompts
from engine.costs import ridge_tokens
from engine.decoding.passcurve import CURVE_CONTEXT, curve_key, pass_costs, pass_curve
from engine.loadmeter import LoadMeter

ROOM_SIZES = (1, 2, 4, 8, 16, 32)  # the small end of the curve, where a CPU's room sits, doubling like lesson 1's rows
ROOM_ROUNDS = 5


_ROOMS: dict[str, tuple[dict, int]] = {}  # per process, keyed like the cached curve: lessons 1-3 share one room


def machine_curve(pair, refresh: bool = False) -> tuple[dict, int]:
    """(this machine's pass curve as a measurement records it, its room in tokens per pass: knee.room_tokens).

    The small end is timed again here, ROOM_ROUNDS interleaved rounds over ROOM_SIZES at batch 1, the median per size
    (about 2 s on 2 cores): the cached curve (engine/decoding/passcurve.py) is the fastest of 3 passes per size, timed
    once, and on a shared 2-core machine four of its back-to-back measurements put the room at 5, 12, 7 and 9 tokens
    (2026-12-03; one point over the line ends the room, and it has 17 points below 18 tokens); the medians of
    interleaved rounds over doubling sizes agree with lesson 1's rows (4 tokens, three recordings in a row). Where the
    room reaches past the last of ROOM_SIZES (a GPU's hundreds of tokens), the cached curve, which runs to 256 tokens,
    decides. Measured once per process (refresh: again), so lessons 1 to 3 read the same room, and lesson 1's own
    rows replace it when they find one (remember_room); the measurement says when."""
    key = curve_key(pair)
    if not refresh and key in _ROOMS:
        return _ROOMS[key]
    rounds = [pass_costs(pair, [1], list(ROOM_SIZES), context=CURVE_CONTEXT, repeats=3) for _ in range(ROOM_ROUNDS)]
    tokens, ms_ = list(ROOM_SIZES), [statistics.median(r[i]["ms"] for r in rounds) for i in range(len(ROOM_SIZES))]
    when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    label = f"{ROOM_ROUNDS} interleaved rounds at context {CURVE_CONTEXT}, median per size"
    if knee.room_tokens(tokens, ms_) >= ROOM_SIZES[-1]:
        curve = pass_curve(pair)
        tokens, ms_, label, when = list(curve.tokens), list(curve.ms), curve.key, curve.measured_at
    shape = {"tokens": tokens, "ms": ms_, "knee_tokens": knee_tokens(tokens, ms_)}
    _ROOMS[key] = (shape | {"key": label[:300], "measured_at": when}, knee.room_tokens(tokens, ms_))
    return _ROOMS[key]


def remember_room(pair, curve: dict, room: int) -> None:
    """Keep a measured room for the lessons that run next in this process (lesson 1's rows: the same kind of
    measurement, at the lesson's context)."""
    _ROOMS[curve_key(pair)] = (curve, room)


MOST_DEPTH = knee.MOST_DEPTH  # the deepest draft a lesson chooses (knee.py says why)


def inside_depth(room: int) -> int:
    """The depth lessons 2 and 3 choose: the deepest draft whose batch-1 verify pass fits in the room, at most
    MOST_DEPTH (knee.inside_depth)."""
    return knee.inside_depth(room, 1, most=MOST_DEPTH)


def past_tokens(room: int) -> int:
    """The pass lesson 1 reads "past the room": knee.PAST times the room's tokens."""
    return int(knee.PAST * room)


# --- 1. one token per pass leaves the arithmetic idle ----------------------------------------------
PASS_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
LARGEST = (0, 16, 32, 64, 128)  # the largest pass's options; 0 = "from this machine's curve" (largest_pass)
PASS_ROUNDS = 5  # every size once per round, the rounds in turn: about 2 s on 2 cores


def largest_pass(room: int) -> int:
    """The largest pass lesson 1 times: the smallest of PASS_SIZES carrying twice the pass past the room (so the
    curve shows a point past it and one further on), at least 16 tokens, at most the last size."""
    return next((n for n in PASS_SIZES if n >= max(16, 2 * past_tokens(room))), PASS_SIZES[-1])


def memory_bound(pair, probe, s: dict) -> dict:
    """One target pass at batch 1 with 1..`largest` new tokens (PASS_ROUNDS rounds over every size, the median of
    3 timed passes per size and round; a row's ms is the median over the rounds, its spread the rounds'), this
    machine's probed peaks to read it against, and its pass curve, from which `largest` 0 is chosen; where the rows
    find the room, they become the curve lessons 2 and 3 choose from next (remember_room)."""
    largest = int(s["largest"]) or largest_pass(machine_curve(pair)[1])
    sizes = [n for n in PASS_SIZES if n <= largest]
    rounds, other_cores = metered(lambda: pass_costs(pair, [1], sizes, context=int(s["context"]), repeats=3), PASS_ROUNDS)
    rows = []
    for per_size in zip(*rounds):
        times = [row["ms"] for row in per_size]
        row = {key: per_size[ms.median_index(times)][key] for key in ms.PASS_ROW}  # the fields the schema records
        rows.append(row | {"ms_runs": ms.spread(times)})
    tokens, times = [r["tokens_per_pass"] for r in rows], [r["ms"] for r in rows]
    if knee.room_tokens(tokens, times) < tokens[-1]:  # the rows found the room: lessons 2 and 3 read this one next
        when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        label = f"lesson 1's rows: {PASS_ROUNDS} interleaved rounds at context {int(s['context'])}, median per size"
        curve = {"tokens": tokens, "ms": times, "knee_tokens": knee_tokens(tokens, times), "key": label, "measured_at": when}
        remember_room(pair, curve, knee.room_tokens(tokens, times))
    return {
        "rows": rows,
        "peak_bandwidth": probe.peak_bandwidth,
        "peak_flops": probe.peak_flops,
        "ridge_point": probe.ridge_point,
        "dtype": probe.dtype,
        "ridge_tokens": ridge_tokens(pair.target_costs, probe.peak_flops, probe.peak_bandwidth),
        "chosen": {"room": machine_curve(pair)[1], "largest": largest},  # the room, from these rows where they found one
        "curve": machine_curve(pair)[0],
        "other_cores": other_cores,  # what other processes kept busy while the rows were timed (noise.disturbed_live)
    }


def metered(timed, rounds: int) -> tuple[list, float | None]:
    """([timed() for each round], the cores other processes kept busy meanwhile: their CPU seconds over the rounds'
    wall seconds, None without psutil). A pass is timed outside any decode loop, so no trace's LoadMeter counts
    the other load for it: lesson 1 meters its own rounds (engine/loadmeter.py)."""
    meter, wall, out = LoadMeter(), 0.0, []
    for _ in range(rounds):
        t0 = time.perf_counter()
        meter.resume()
        out.append(timed())
        meter.pause()
        wall += time.perf_counter() - t0
    other = meter.fields()["other_cpu_s"]
    return out, (other / wall if other is not None and wall > 0 else None)


def _row(rows: list[dict], tokens: int) -> dict:
    return min(rows, key=lambda r: abs(r["tokens_per_pass"] - tokens))


def read_tokens(m: dict) -> int:
    """The pass lesson 1's prediction, chart and words read as "past the room": knee.PAST times the room these rows
    measured (knee.room_tokens over the medians), the nearest measured pass to it."""
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    room = knee.room_tokens([r["tokens_per_pass"] for r in rows], [r["ms"] for r in rows])
    return int(_row(rows, past_tokens(room))["tokens_per_pass"])


def pass_ratio(m: dict, s: dict) -> float | None:
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    return _row(rows, read_tokens(m))["ms"] / rows[0]["ms"] if rows and rows[0]["ms"] > 0 else None


def roofline_ratio(m: dict, s: dict) -> list[tuple[str, float | None]]:
    """The roofline's ratio: time = max(bytes / peak bandwidth, FLOPs / peak FLOP/s), the read pass over 1 token."""
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    if not rows:
        return [("roofline from the probed peaks", None)]

    def t(r):
        return max(r["bytes"] / m["peak_bandwidth"], r["flops"] / m["peak_flops"])

    return [("roofline from the probed peaks: max(bytes ÷ bandwidth, FLOPs ÷ FLOP/s)", t(_row(rows, read_tokens(m))) / t(rows[0]))]


# --- 2. speculation does more work, and the seed's k + 1 tokens per pass ------------------------------
MORE_ROUNDS = 5  # two short batch-1 lanes: five interleaved rounds (after a warm-up) stay well inside 20 s


def decode_costs(traces: list) -> dict:
    """FLOPs, bytes moved and FLOPs on rejected drafts of one run's decode steps (the prompt's pass left out), both
    models, and the tokens those steps wrote: what lesson 2 divides per decoded token."""
    steps = [st for t in traces for st in t.steps if st.kind == "decode"]
    return {
        "tokens": sum(len(q.emitted) for st in steps for q in st.seqs),
        "flops": sum(st.flops for st in steps),
        "bytes": sum(st.bytes for st in steps),
        "flops_wasted": sum(st.flops_wasted for st in steps),
    }


def more_flops(pair, probe, s: dict) -> dict:
    """The n-gram lookup against plain decoding on an extractive prompt (batch 1) at a depth inside this machine's
    room (depth 0: inside_depth), MORE_ROUNDS interleaved rounds after a warm-up; the decode steps' FLOPs and
    bytes of each median run; and Barrow's seed passes at depth + 1 tokens."""
    curve, room = machine_curve(pair)
    depth = int(s["depth"]) or inside_depth(room)
    runs, warm = timed_rounds(pair, lane_jobs(batch_prompts("extractive", 1), depth, "ngram", int(s["tokens"])), MORE_ROUNDS)
    costs = {name: decode_costs(median_run(runs[name])) for name in ("ar", "spec")}
    return lane_pair(runs["ar"], runs["spec"]) | {
        "seed": seed_passes(pair, depth),
        "decode_costs": costs,
        "chosen": {"room": room, "depth": depth},
        "curve": curve,
        "warmup": warm,
    }


def operations_models(m: dict, s: dict) -> list[tuple[str, float | None]]:
    return [("Leviathan's operations factor, Theorem 3.11 (decode steps only)", m["m"].get("operations_factor"))]


# --- 3. inside the room and past it -------------------------------------------------------------------
RIDGE_ROUNDS = 3  # six contenders at two batch sizes, after a warm-up: three interleaved rounds keep a live run within
# 20 s on 2 cores, where five took 26-27 s in a browser (2026-12-04)
BATCH1_MORE = 4  # batch 1's pair is cheap (a fraction of a second a round) and its short runs scatter (one round 1.67x,
# the next 1.25x on a 2-thread Xeon, 2026-12-05): four more rounds of it, so the rule can tell with 7


def ridge_settings(room: int, s: dict) -> dict:
    """Lesson 3's contenders from the room: the deepest draft whose batch-1 verify pass fits in it (at most MOST_DEPTH),
    and the smallest large batch whose verify pass carries knee.PAST× the room; a knob's non-zero value wins."""
    depth = int(s["depth"]) or inside_depth(room)
    return {"room": room, "depth": depth, "batch": int(s["batch"]) or knee.past_batch(room, depth, LARGE_BATCHES)}


def past_the_ridge(pair, probe, s: dict) -> dict:
    """A model drafter at batch 1 and at a large batch on held-out prompts, and the n-gram lookup at the large batch
    on extractive prompts (its best case) for contrast; each beside plain decoding of the same prompts, all six
    interleaved RIDGE_ROUNDS times after one warm-up run each, batch 1's pair BATCH1_MORE times more. Depth and
    large batch 0 are chosen from this machine's pass curve (ridge_settings), so batch 1's verify pass sits inside
    the room and the large batch's well past it."""
    drafter, tokens = model_drafter(pair), int(s["tokens"])
    curve, room = machine_curve(pair)
    chosen = ridge_settings(room, s)
    depth, batch = chosen["depth"], chosen["batch"]
    jobs = {}
    for b in (1, batch):
        for key, job in lane_jobs(batch_prompts("heldout", b), depth, drafter, 2 * tokens if b == 1 else tokens).items():
            jobs[(b, key)] = job
    for key, job in lane_jobs(batch_prompts("extractive", batch), depth, "ngram", tokens).items():
        jobs[("ngram", key)] = job
    runs, warm = timed_rounds(pair, jobs, RIDGE_ROUNDS)
    more_rounds(pair, {k: jobs[k] for k in ((1, "ar"), (1, "spec"))}, BATCH1_MORE, runs)
    return {
        "drafter": drafter,
        "runs": [{"batch": b, **lane_pair(runs[(b, "ar")], runs[(b, "spec")])} for b in (1, batch)],
        "ngram": lane_pair(runs[("ngram", "ar")], runs[("ngram", "spec")]),
        "ridge_tokens": ridge_tokens(pair.target_costs, probe.peak_flops, probe.peak_bandwidth),
        "curve": curve,
        "chosen": chosen,
        "warmup": warm,
    }


def large_batch_speedup(m: dict, s: dict) -> float | None:
    """Lesson 3's measured answer: the large batch's speedup decoding alone, the statistic its chart, table and words
    show (noise.speedup: the median over rounds), the compare ratio where the runs carry no rounds."""
    run = sorted(m["runs"], key=lambda r: r["batch"])[-1]
    sp = noise.speedup(run)
    return sp["value"] if sp else run["m"].get("speedup")
