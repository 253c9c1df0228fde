"""How lessons run their contenders: a warm-up before the clock, then interleaved rounds (each contender once per
round, in turn), each lane the median run with every round's rates; this machine's pass curve and its room, measured
once per process and shared by every lesson. No streamlit.
"""

from __future__ import annotations

import datetime as dt
import statistics
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from app.common import measurement as ms
from app.common.warm import warm
from app.lessons.kit import numbers
from app.views import metrics
from engine import DecodeConfig, generate
from engine.decoding.passcurve import CURVE_CONTEXT, curve_key, pass_costs, pass_curve
from engine.formats import data_dir
from engine.loadmeter import LoadMeter
from engine.model.prefix_cache import PrefixCache
from engine.model.prefix_disk import DiskPrefixes, model_name


@dataclass(frozen=True)
class Job:
    """One contender: its prompts and config; sequential decodes the prompts one at a time (batch 1); warm: after its
    first run, read each batch's prompt pass from the pair's store (`prompt_store`)."""

    prompts: list[str]
    cfg: DecodeConfig
    sequential: bool = False
    warm: bool = True  # read the prompts' pass from the pair's store after its first run (`prompt_store`)


_STORES: dict[tuple[int, str], PrefixCache] = {}  # per model pair and kind: what its lessons read warm (`prompt_store`)


def prompt_store(pair) -> PrefixCache:
    """The pair's store of whole prompt batches (engine/model/prefix_cache.py, prompts=True): a lesson's rounds decode
    the same prompts again and again, and what a lesson times is decoding alone, so each batch's prompt pass runs once
    (in the warm-up, or the first round that meets it) and later runs read its keys and values, as a serving engine's
    prefix cache serves a repeated prompt. Lesson 2, which shows the prompt's pass, runs it every time (Job.warm)."""
    return _store(pair, "prompts")


def context_store(pair) -> PrefixCache:
    """The pair's long contexts (lesson 8's, engine/decoding/context_passes.py: about 100 MB over the embedded pair),
    kept apart from the prompt batches, whose hundreds of megabytes would push them out of one store (least recently
    used first) between the server's preparation and lesson 8's first run; and kept on disk (`contexts_dir`,
    engine/model/prefix_disk.py), so a restarted server reads a 4,096-token context back in under a second
    instead of prefilling it for 8 s before lesson 8's first run can start."""
    return _store(pair, "contexts")


def contexts_dir() -> Path:
    """The long contexts' folder: contexts in the data folder (engine/formats.py, `data_dir`: a Space's persistent
    storage where it has one, so they outlive a restart)."""
    return data_dir() / "contexts"


def _store(pair, kind: str) -> PrefixCache:
    key = (id(pair), kind)
    if key not in _STORES:
        disk = None
        if kind == "contexts":
            disk = DiskPrefixes(contexts_dir(), pair.device)
            disk.name(pair.target, model_name(curve_key(pair), pair.target))  # its weights, dtype and pass, not its id
        _STORES[key] = PrefixCache(prompts=kind == "prompts", disk=disk)
        weakref.finalize(pair, _STORES.pop, key, None)
    return _STORES[key]


def _run(pair, job: Job) -> list:
    prompts = [[p] for p in job.prompts] if job.sequential else [job.prompts]
    store = prompt_store(pair) if job.warm else None
    return [generate(pair, group, job.cfg, prefix_cache=store) for group in prompts]


def shapes(job: Job) -> tuple:
    """What decides a job's pass shapes: its rows per pass, plain or speculative, its drafter, chain or tree. Two jobs
    alike in these run the same kernels at the same sizes (a fixed policy only changes which of them a step takes);
    goodput also learns its prices as it runs, so it is warmed on its own."""
    c, rows = job.cfg, 1 if job.sequential else len(job.prompts)
    if c.mode == "autoregressive" or c.depth == 0:
        return (rows, "plain")
    return (rows, c.drafter, c.depth, c.tree_nodes, c.tree_topk, c.policy == "goodput")


def warm_up(pair, jobs: dict) -> list[dict]:
    """One job of each pass shape (`shapes`) once before any timed round, in the jobs' order (a sequential job: its
    first prompt only; at most WARM_TOKENS new tokens), so no contender's timed rounds carry a cold start (first calls,
    allocations, caches) and no warm-up is paid twice for the same kernels. Reported apart, never in a lane: per job
    warmed its name, the seconds it took and its decoding-alone tokens/s."""
    out, warmed = [], set()
    for name, job in jobs.items():
        key = shapes(job)
        if key in warmed:
            continue
        warmed.add(key)
        store = prompt_store(pair) if job.warm else None
        trace, seconds = warm(pair, job.prompts[:1] if job.sequential else job.prompts, job.cfg, store)
        rate = ms.decode_rate(ms.decode_fields([trace]) | {"tokens_per_s": trace.summary["tokens_per_s"]})
        label = " ".join(str(part) for part in name) if isinstance(name, tuple) else str(name)
        out.append({"contender": label, "s": seconds, "decode_tokens_per_s": rate})
    return out


def timed_rounds(pair, jobs: dict, rounds: int) -> tuple[dict, list[dict]]:
    """(the timed rounds as `interleaved` returns them, the warm-up that preceded them: `warm_up`)."""
    warm = warm_up(pair, jobs)
    out: dict = {name: [] for name in jobs}
    for _ in range(rounds):
        for name, job in jobs.items():
            out[name].append(_run(pair, job))
    return out, warm


def more_rounds(pair, jobs: dict, rounds: int, out: dict) -> dict:
    """`rounds` more interleaved rounds of some of the jobs (already warm), appended to `out` (as timed_rounds
    returns it): a cheap contender pair whose rounds scatter gets more of them without repeating the dear ones."""
    for _ in range(rounds):
        for name, job in jobs.items():
            out[name].append(_run(pair, job))
    return out


def interleaved(pair, jobs: dict[str, Job], rounds: int) -> dict[str, list[list]]:
    """Run every job once untimed (warm_up), then once per round, in turn (A B C A B C …); per job, one list of
    traces per timed round (one trace for a batch, one per prompt when sequential)."""
    return timed_rounds(pair, jobs, rounds)[0]


def run_stats(traces: list) -> dict:
    """One run (one trace, or batch-1 traces decoded one after another) as the numbers a table row reads."""
    steps = numbers.decode_steps(traces)
    new = sum(t.summary["new_tokens"] for t in traces)
    wall = sum(t.summary["wall_s"] for t in traces)
    rows = [len(q.emitted) for s in steps for q in s.seqs]
    drafted = sum(len(q.drafted) for s in steps for q in s.seqs)
    accepted = sum(t.summary.get("accepted_tokens") or 0 for t in traces)
    rejections = sum(1 for s in steps for q in s.seqs if q.drafted and q.num_accepted < len(q.drafted))
    tpots = [ms.tpot_ms(t) for t in traces]
    other = [t.summary.get("other_cpu_s") for t in traces]
    return {
        "tokens_per_s": new / wall if wall else 0.0,
        "tokens_per_step": sum(rows) / len(rows) if rows and drafted else None,
        "verify_ms": statistics.median(s.verify_ms for s in steps) if steps else None,
        "flops": sum(t.summary["flops"] for t in traces),  # the whole run's: a warm run's prompt pass ran nothing
        "decode_flops": sum(st.flops for st in steps),  # the decode steps' alone: the same whether the prompts ran warm
        "mean_depth": statistics.mean(s.depth for s in steps) if steps else 0.0,
        "alpha": traces[0].summary.get("alpha")
        if len(traces) == 1
        else (accepted / (accepted + rejections) if drafted and accepted + rejections else None),
        "tpot_ms": statistics.mean(x for x in tpots if x is not None) if any(x is not None for x in tpots) else None,
        "other_cores": sum(other) / wall if wall and all(isinstance(o, (int, float)) for o in other) else None,
        **ms.decode_fields(traces),
    }


def cell_of_runs(runs: list[list]) -> dict:
    """A contender's repeats as one table row: the median run's numbers (by decoding-alone tokens/s), the median and
    every run's decoding-alone tokens/s, and the same for the whole run (prefill included)."""
    stats = [run_stats(traces) for traces in runs]
    rates = [ms.decode_rate(s) for s in stats]
    whole = [s["tokens_per_s"] for s in stats]
    return stats[ms.median_index(rates)] | {
        "decode_tokens_per_s": statistics.median(rates),
        "decode_tokens_per_s_runs": ms.spread(rates),
        "tokens_per_s": statistics.median(whole),
        "tokens_per_s_runs": ms.spread(whole),
    }


def median_run(runs: list[list]) -> list:
    """The traces of a contender's median run by decoding-alone tokens/s: the run whose numbers cell_of_runs reports."""
    return runs[ms.median_index([ms.decode_rate(run_stats(traces)) for traces in runs])]


def lane_pair(ar_runs: list[list], spec_runs: list[list]) -> dict:
    """Plain and speculative repeats as lanes (each the median run by decoding-alone tokens/s, with every run's
    rates) and the compare numbers of the two median runs, so the speedup is the ratio of the median decode rates."""
    ar_traces = [r[0] for r in ar_runs]
    spec_traces = [r[0] for r in spec_runs]
    ar = ar_traces[ms.median_index([ms.decode_rate(t.summary) for t in ar_traces])]
    sp = spec_traces[ms.median_index([ms.decode_rate(t.summary) for t in spec_traces])]
    return {
        "ar": ms.lane_of_runs(ar_traces),
        "spec": ms.lane_of_runs(spec_traces),
        "m": ms.plain_numbers(metrics.compare(ar, sp)),
    }


LARGE_BATCHES = (4, 8, 16, 32)  # the large batch's options; 0 = "from this machine's pass curve"


CHOSEN_MOST = 16  # the largest batch a lesson chooses from the curve by itself (a student may still pick 32): at 32, on a
# room of 17 tokens, lesson 3's live run took 44 s and lesson 6's 24 s in a browser (2026-12-06); 16 keeps them near 10 s


def chosen(options) -> tuple[int, ...]:
    """The batches a 0 setting chooses from: `options` up to CHOSEN_MOST."""
    return tuple(b for b in options if b <= CHOSEN_MOST) or (min(options),)


def knee_tokens(tokens, ms_) -> float:
    """The knee of a measured pass curve as a recording stores it (app/lessons/kit/numbers.py `knee_tokens`, the one
    definition), the last point measured where the curve never reaches it (the knee lies past the curve)."""
    found = numbers.knee_tokens(tokens, ms_)
    return float(tokens[-1]) if found is None else found


ROOM_SIZES = (1, 2, 4, 8, 12, 16, 24, 32)  # the small end of the curve, where a CPU's room sits (12 and 24 between the doublings)


ROOM_ROUNDS = 5


_ROOMS: dict[str, tuple[dict, int]] = {}  # per process, keyed like the cached curve: lessons 1-3 share one room


ROOM_TRIES = 2  # a first measurement beside other work is taken again, up to this many times in all (about 2 s each)


RETRY_S = 30.0  # a room still measured beside other work is measured again by a lesson that asks this long after


_TRIED: dict[str, float] = {}  # per curve key: when its room was last measured (time.monotonic)


def machine_curve(pair, refresh: bool = False) -> tuple[dict, int]:
    """(this machine's pass curve as a measurement records it, its room in tokens per pass: numbers.room_tokens).

    The small end is timed again here, ROOM_ROUNDS interleaved rounds over ROOM_SIZES at batch 1, the median per size
    (about 2 s on 2 cores): the cached curve (engine/decoding/passcurve.py) is the fastest of 3 passes per size, timed
    once, and on a shared 2-core machine four of its back-to-back measurements put the room at 5, 12, 7 and 9 tokens
    (2026-12-03; one point over the line ends the room, and it has 17 points below 18 tokens); the medians of
    interleaved rounds over doubling sizes agree with lesson 1's rows (4 tokens, three recordings in a row). Where the
    room reaches past the last of ROOM_SIZES (a GPU's hundreds of tokens), the cached curve, which runs to 256 tokens,
    decides. The rounds are metered (`other_cores`: what other processes kept busy meanwhile): a curve measured beside
    other work (more than measurement.BUSY_CORES; a browser drawing the first page beside a 2-core server put the room
    at 1-2 tokens where quiet measurements read 4 to 12, 2026-12-08) is measured again, up to ROOM_TRIES times, and
    the quietest kept; one still disturbed is measured once more by a lesson that asks RETRY_S later (so a busy
    machine pays for it at most every half minute, not in every call). Otherwise measured once
    per process (refresh: again), so lessons 1 to 3 read the same room, and lesson 1's own rows replace it when they
    find one (remember_room); the measurement says when."""
    key = curve_key(pair)
    kept = _ROOMS.get(key)
    if kept is not None and not refresh and (not ms.curve_busy(kept[0]) or time.monotonic() - _TRIED.get(key, 0.0) < RETRY_S):
        return kept
    tries = 1 if kept is not None and not refresh else ROOM_TRIES
    _TRIED[key] = time.monotonic()
    for _ in range(tries):
        found = _room_curve(pair)
        if kept is None or refresh or (found[0]["other_cores"] or 0.0) < (kept[0].get("other_cores") or 0.0):
            kept, refresh = found, False
        if not ms.curve_busy(kept[0]):
            break
    _ROOMS[key] = kept
    return kept


def _room_curve(pair) -> tuple[dict, int]:
    """One metered measurement of the curve's small end (machine_curve), the cached curve where the room runs past it."""
    meter = LoadMeter()
    t0 = time.perf_counter()
    meter.resume()
    rounds = [pass_costs(pair, [1], list(ROOM_SIZES), context=CURVE_CONTEXT, repeats=3) for _ in range(ROOM_ROUNDS)]
    meter.pause()
    wall, other = time.perf_counter() - t0, meter.fields()["other_cpu_s"]
    tokens, ms_ = list(ROOM_SIZES), [statistics.median(r[i]["ms"] for r in rounds) for i in range(len(ROOM_SIZES))]
    when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    label = f"{ROOM_ROUNDS} interleaved rounds at context {CURVE_CONTEXT}, median per size"
    if numbers.room_tokens(tokens, ms_) >= ROOM_SIZES[-1]:
        curve = pass_curve(pair)
        tokens, ms_, label, when = list(curve.tokens), list(curve.ms), curve.key, curve.measured_at
    shape = {"tokens": tokens, "ms": ms_, "knee_tokens": knee_tokens(tokens, ms_), "key": label[:300], "measured_at": when}
    shape["other_cores"] = round(other / wall, 2) if other is not None and wall > 0 else None
    return shape, numbers.room_tokens(tokens, ms_)


def remember_room(pair, curve: dict, room: int) -> None:
    """Keep a measured room for the lessons that run next in this process (lesson 1's rows: the same kind of
    measurement, at the lesson's context), unless it was measured beside other work and the room kept was quieter."""
    key, busy = curve_key(pair), curve.get("other_cores") or 0.0
    kept = _ROOMS.get(key)
    if kept is None or not ms.curve_busy(curve) or busy < (kept[0].get("other_cores") or 0.0):
        _ROOMS[key] = (curve, room)


MOST_DEPTH = numbers.MOST_DEPTH  # the deepest draft a lesson chooses (numbers.py says why)


def inside_depth(room: int) -> int:
    """The depth lessons 2 and 3 choose: the deepest draft whose batch-1 verify pass fits in the room, at most
    MOST_DEPTH (numbers.inside_depth)."""
    return numbers.inside_depth(room, 1, most=MOST_DEPTH)


def metered(timed, rounds: int) -> tuple[list, float | None]:
    """([timed() for each round], the cores other processes kept busy meanwhile: their CPU seconds over the rounds'
    wall seconds, None without psutil). A pass is timed outside any decode loop, so no trace's LoadMeter counts
    the other load for it: a lesson of passes meters its own rounds (engine/loadmeter.py)."""
    meter, wall, out = LoadMeter(), 0.0, []
    for _ in range(rounds):
        t0 = time.perf_counter()
        meter.resume()
        out.append(timed())
        meter.pause()
        wall += time.perf_counter() - t0
    other = meter.fields()["other_cpu_s"]
    return out, (other / wall if other is not None and wall > 0 else None)
