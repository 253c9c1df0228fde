"""The lessons' numbers, each defined once. The room and the knee of a measured pass curve (the room: the most
tokens a pass carries within ROOM, 1.25×, of a one-token pass; the knee: where it reaches KNEE, 1.5×), and the
settings lessons choose from the room. What interleaved rounds say, by the one verdict rule (engine/verdict.py): a
speedup with its 95% range, far rounds named and kept, a run disturbed by other work flagged. Lessons 6 and 7's
per-(batch, contender) tables. Every rate is decoding alone (the decode steps' tokens over their time, the prompt's
pass left out); a whole-run rate is read only where a chart shows it as the whole run (lesson 2). No streamlit.
"""

from __future__ import annotations

from app.common import measurement
from engine import verdict as rule
from engine.room import KNEE as KNEE  # the room and the knee: the engine's one rule, read as numbers.* by the lessons
from engine.room import ROOM as ROOM
from engine.room import knee_tokens as knee_tokens
from engine.room import room_tokens as room_tokens
from engine.verdict import Verdict

# --- the settings lessons choose from the room ---------------------------------------------------------------------
MOST_DEPTH = 3  # a chosen depth stops here: deeper drafts are accepted too rarely to pay for drafting them (with


# α ≈ 0.5, the EAGLE head's on held-out prompts, a chain's 4th draft survives with chance α^4 ≈ 6%), and a room that
# reads 4 tokens in one recording and 8 in the next (8 tokens cost 1.22-1.27x one on the 2-core EPYC) gives the same k
PAST = 4.0  # "far past the room" (glossary): a pass carrying at least this many times the room's tokens


def roofline_s(row: dict, m: dict) -> float:
    """A pass row's roofline time from a measurement's probed peaks: max(bytes ÷ bandwidth, FLOPs ÷ FLOP/s), seconds."""
    return max(row["bytes"] / m["peak_bandwidth"], row["flops"] / m["peak_flops"])


def cost_at(tokens, ms, n: float) -> float:
    """The curve's cost of an n-token pass as a multiple of its one-token pass (linear between measured points,
    the last point's slope past the end)."""
    xs, ys = list(tokens), list(ms)
    if n <= xs[0]:
        return 1.0
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if n <= x1:
            return (y0 + (y1 - y0) * (n - x0) / (x1 - x0)) / ys[0]
    slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
    return (ys[-1] + slope * (n - xs[-1])) / ys[0]


def inside_depth(room: int, batch: int = 1, most: int = 8) -> int:
    """The deepest draft (1..most) whose verify pass, batch × (k + 1) tokens, fits inside the room; 1 where even
    k = 1 does not fit (the page then says so)."""
    return max(1, min(most, room // max(batch, 1) - 1))


def past_batch(room: int, depth: int, options, factor: float = PAST) -> int:
    """The smallest batch among `options` whose verify pass, batch × (depth + 1) tokens, carries at least `factor`×
    (PAST×) the room; the largest option where none does."""
    ordered = sorted(int(b) for b in options)
    return next((b for b in ordered if b * (depth + 1) >= factor * room), ordered[-1])


def room_words(room: int, tokens, ms) -> str:
    """One sentence computed from the curve: how much room this machine has and what a pass past it costs."""
    past = int(PAST * room)
    return (
        f"On this machine a pass stays within {ROOM:.2f}× a one-token pass up to {room} token{'s' if room != 1 else ''} "
        f"(the room); a {past}-token pass costs {cost_at(tokens, ms, past):.2f}×."
    )


SAME_TIME = 1.10  # two passes within this factor of each other took "about the same time"


# --- rounds, by the one rule ----------------------------------------------------------------------------------------
def judge(a: dict | None, b: dict | None) -> Verdict | None:
    """a against b by the one rule (verdict.judge), None where either has no rates. a, b: measurement.spread."""
    return rule.judge(a, b) if a and b and a.get("values") and b.get("values") else None


def sign(a: dict | None, b: dict | None) -> int:
    """+1 a faster than b by the rule, -1 slower, 0 level, can't tell, or missing."""
    v = judge(a, b)
    return v.sign if v else 0


def word(a: dict | None, b: dict | None) -> str:
    """'faster than' / 'slower than' / 'level with' / 'not told apart from' (a against b, by the rule)."""
    v = judge(a, b)
    return v.word if v else "not told apart from"


def step_costs(run: dict) -> tuple[float | None, float | None]:
    """(verify pass, whole speculative step), each in mean plain steps of the same batch, both from the lanes'
    MEAN times, so a step never reads cheaper than its own verify pass. An older recording without the means
    falls back to its median verify ratio and leaves the step out (it mixed a median with a mean)."""
    ar, spec = run.get("ar") or {}, run.get("spec") or {}
    plain = ar.get("step_ms")
    if plain and spec.get("verify_ms") is not None and spec.get("step_ms") is not None:
        return spec["verify_ms"] / plain, spec["step_ms"] / plain
    return run["m"].get("median_verify_ratio"), None


# --- one statistic for chart, table and words ---------------------------------------------------------------------
FAR = 1.5  # a round whose rate is this many times above or below the median of the rounds is "far outside"


def far_rounds(values: list[float]) -> list[int]:
    """Indices of the rounds far outside the others: more than FAR× above or below the median of all rounds (a cold
    start, another process's burst). Needs three rounds or more. Such a round is never dropped from a verdict (dropping
    rounds after seeing them would name winners inside the noise): it widens the interval, and the page names it."""
    if len(values) < 3:
        return []
    mid = measurement.spread(values)["median"]
    return [i for i, v in enumerate(values) if mid > 0 and (v > FAR * mid or v * FAR < mid)]


def unsteady(far, rounds: int) -> bool:
    """Half the rounds or more far outside the others: a busy machine, not an odd round."""
    return 2 * len(far) >= rounds


def rate_rounds(x: dict | None) -> dict | None:
    """A lane's or a table row's decoding-alone tokens/s in every round (a measurement spread), None without rounds."""
    return x.get("decode_tokens_per_s_runs") if x else None


def rate_of(x: dict) -> float:
    """A lane's or a table row's decoding-alone tokens/s: its median run's, else the median of its rounds."""
    rate = x.get("decode_tokens_per_s")
    return rate if rate is not None else x["decode_tokens_per_s_runs"]["median"]


def tokens(n: int) -> str:
    """'1 token', '64 tokens'."""
    return f"{n} token{'s' if n != 1 else ''}"


def speedup(run: dict) -> dict | None:
    """A plain-vs-speculative pair's speedup as the chart, the table and the words all show it: the one rule's ratio
    (verdict.judge: the geometric mean over the interleaved rounds of speculative rate ÷ plain rate) with its 95%
    interval, decoding alone. None where a lane has no rates. {"value", "lo", "hi", "rounds", "verdict", "far"}; lo/hi
    None with one round."""
    ar, spec = run.get("ar") or {}, run.get("spec") or {}
    a, b = (rate_rounds(x) for x in (ar, spec))
    v = judge(b, a)
    if v is None:
        return None
    far = sorted(set(far_rounds(a["values"])) | set(far_rounds(b["values"]))) if len(a["values"]) == len(b["values"]) else []
    return {"value": v.ratio, "lo": v.lo, "hi": v.hi, "rounds": v.rounds, "verdict": v, "far": far}


def verdict(run: dict) -> int:
    """+1: speculation beat plain decoding by the one rule (decoding alone where recorded), -1 lost, 0 neither."""
    sp = speedup(run)
    return sp["verdict"].sign if sp else 0


def with_far(spread: dict | None) -> tuple[dict | None, list[int]]:
    """(a spread of rounds, the indices of its rounds far outside the others): the whisker spans every round, the
    far ones are marked, never dropped."""
    return (spread, far_rounds(spread["values"])) if spread else (None, [])


def _spreads(value) -> list[dict]:
    """Every spread of rounds (a `*_runs` dict with its values) anywhere in a measurement."""
    if isinstance(value, list):
        return [s for v in value for s in _spreads(v)]
    if not isinstance(value, dict):
        return []
    own = [v for k, v in value.items() if k.endswith("_runs") and isinstance(v, dict) and isinstance(v.get("values"), list)]
    return own + [s for k, v in value.items() if not k.endswith("_runs") for s in _spreads(v)]


def unsteady_spreads(m: dict) -> tuple[int, int]:
    """(the spreads of a measurement whose rounds were unsteady: half or more far outside the others, the spreads of
    three rounds or more): a contender whose rounds scatter that far ran on a busy machine (`unsteady`)."""
    judged = [s["values"] for s in _spreads(m) if len(s["values"]) >= 3]
    return sum(unsteady(far_rounds(values), len(values)) for values in judged), len(judged)


def disturbed_live(m: dict, recorded: dict | None, machine: str | None = None) -> str | None:
    """Why a live run's timings are suspect, or None: other processes kept more than measurement.BUSY_CORES cores
    busy during its own timing (every lane's, and lesson 1's metered passes), a contender's rounds scattered far apart
    (unsteady_spreads), or (lesson 1) its probed bandwidth fell far below the recording's on the same machine type.
    `recorded`: the recording's measurement, or the whole recording, whose probe is then read only where its machine
    is `machine` (the live run's): a slower probe on another machine is another machine, not a disturbed one."""
    busy = measurement.other_cores(m)
    if busy is not None and busy > measurement.BUSY_CORES:
        return f"other processes kept {busy:.2f} cores busy during a run"
    bad, judged = unsteady_spreads(m)
    if bad:
        return f"in {bad} of {judged} rates measured in rounds, half the rounds or more were {FAR}× or more from the others"
    if recorded and "measurement" in recorded:
        recorded = recorded["measurement"] if recorded.get("machine") == machine else None
    live_bw, rec_bw = m.get("peak_bandwidth"), (recorded or {}).get("peak_bandwidth")
    if live_bw and rec_bw and live_bw * FAR < rec_bw:
        return f"its probe measured {live_bw / 1e9:.0f} GB/s against the recording's {rec_bw / 1e9:.0f} GB/s"
    return None


# --- lessons 6 and 7's per-(batch, contender) tables ------------------------------------------------------------
def contenders(rows: list[dict]) -> list[str]:
    """Contender names in the order they were measured."""
    return list(dict.fromkeys(r["contender"] for r in rows))


def batches(rows: list[dict]) -> list[int]:
    return sorted({r["batch"] for r in rows})


def cell(rows: list[dict], batch: int, contender: str) -> dict | None:
    """The row of (batch, contender) in a per-(batch, contender) table (lessons 6 and 7), None if absent."""
    return next((r for r in rows if r["batch"] == batch and r["contender"] == contender), None)


def ratio(r: dict, base: dict) -> float:
    """r's speed over base's, the one number every table, chart and sentence shows: the one rule's ratio over
    their interleaved rounds (judge), the ratio of their rates where they carry no rounds."""
    v = judge(rate_rounds(r), rate_rounds(base))
    return v.ratio if v else rate_of(r) / rate_of(base)


def same_work(a: dict, b: dict) -> bool:
    """Did two contenders do the same work at one batch size: the same mean k and α (e.g. "off above batch 8" and
    "fixed k = 4" at batch 1, where the switch never acts)? Then they ran the same steps and differ only by noise."""
    return a["mean_depth"] == b["mean_depth"] and a.get("alpha") == b.get("alpha")


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
            runs = rate_rounds(r)
            table.append(
                {
                    "batch": b,
                    "policy": name,
                    "decoding tokens/s": round(rate_of(r), 1),
                    "× plain": round(ratio(r, base), 2) if base and rate_of(base) else None,
                    "runs (decoding tokens/s)": ", ".join(f"{v:.1f}" for v in runs["values"]) if runs else "one run",
                    "TPOT ms": None if r.get("tpot_ms") is None else round(r["tpot_ms"], 1),
                    "mean k": None if r.get("mean_depth") is None else f"{r['mean_depth']:.2f}",
                    "α": "— (no drafts)" if r.get("alpha") is None else f"{r['alpha']:.2f}",
                    "against the next (the rule's ratio, 95% range)": _against_next(rows, b, name),
                }
            )
    return table


POWERS = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # batch sizes a lesson may choose from the curve


# --- 6. speculate by load ---------------------------------------------------------------------------
LOAD_TOKENS, LOAD_MAX, LOAD_ROUNDS = 12, 6, 3  # 12 new tokens a run: 16 took a live run past 20 s in a browser (2026-12-04)


PLAIN = "plain decoding"


RATE_KEYS = ("decode_tokens_per_s", "decode_tokens_per_s_runs", "tokens_per_s", "tokens_per_s_runs")  # decoding alone; whole run


SHAPE_KEYS = ("decode_tokens", "passes")  # the median run's decode pass shapes, for the H200 re-timing (app/views/h200.py)


ROW_KEYS = (*RATE_KEYS, "alpha", "tpot_ms", "other_cores", *SHAPE_KEYS)


# --- 7. width: a draft tree ------------------------------------------------------------------------------


def _against_next(rows: list[dict], batch: int, name: str) -> str:
    """For the batch's highest median: the rule's ratio against the next, as its verdict sentence states it."""
    w = next((w for w in winners(rows) if w["batch"] == batch), None)
    if not w or w["winner"] != name or w["verdict"] is None:
        return ""
    return f"× {w['runner_up']}: {w['verdict'].interval}"


MAX_STEPS = 512  # steps kept per lane (the schema's list cap, engine/checks.py SPEC_MAX_LIST)


def decode_steps(traces: list) -> list:
    return [st for t in traces for st in t.steps if st.kind == "decode"]


def winners(rows: list[dict]) -> list[dict]:
    """Per batch size: the contender with the highest median tokens/s, the runner-up, the one rule's verdict of the
    first against the second (judge: None without rounds), whether it names the first the winner, and whether
    the two did the same work (same mean k and α: the same steps, so any gap is noise)."""
    out = []
    for b in batches(rows):
        ranked = sorted((r for r in rows if r["batch"] == b), key=rate_of, reverse=True)
        first = ranked[0]
        second = ranked[1] if len(ranked) > 1 else None
        v = judge(rate_rounds(first), rate_rounds(second)) if second else None
        out.append(
            {
                "batch": b,
                "winner": first["contender"],
                "tokens_per_s": rate_of(first),
                "runner_up": second["contender"] if second else None,
                "runner_up_tokens_per_s": rate_of(second) if second else None,
                "verdict": v,
                "clear": bool(v and v.sign > 0),
                "same_work": bool(second and same_work(first, second)),
            }
        )
    return out


NAMED = {"tree": "the tree", "chain": "the chain"}  # a contender of lessons 6 and 7, in a sentence


def cell_contest(m: dict, a: str, b: str) -> tuple:
    """Contenders a and b at the largest batch of a per-(batch, contender) table, with their rounds."""
    batch = max(r["batch"] for r in m["rows"])
    return f"{NAMED.get(a, a)} at batch {batch}", NAMED.get(b, b), *(rate_rounds(cell(m["rows"], batch, x)) for x in (a, b))


def smallest_plain(m: dict) -> tuple[int, dict] | None:
    """(the smallest batch, plain decoding's row there) of a per-(batch, contender) table."""
    batch = min(r["batch"] for r in m["rows"])
    row = cell(m["rows"], batch, PLAIN)
    return (batch, row) if row else None


# --- the depth each policy chose, step by step -----------------------------------------------------------
def policies(rows: list[dict], plain: str = "plain decoding") -> list[str]:
    """The contenders that speculate (every one but plain decoding), in the order measured."""
    return [n for n in contenders(rows) if n != plain]


# --- a lane's rate and a pair's ratio as (value, min, max), for the charts -------------------------------------
def spread_of(obj: dict, key: str = "tokens_per_s_runs") -> tuple[float, float, float] | None:
    """(median, min, max) of a repeated measurement, None where the run was measured once."""
    sp = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(sp, dict) or not all(isinstance(sp.get(k), (int, float)) for k in ("median", "min", "max")):
        return None
    return float(sp["median"]), float(sp["min"]), float(sp["max"])


def _rule(spec: dict, ar: dict, fallback: float) -> tuple[float, float | None, float | None]:
    """The one rule's speedup spec ÷ ar over the interleaved rounds and its 95% range (speedup): the number a
    chart's bar, its whisker, the table and the verdict sentence all show; `fallback` where there are no rounds."""
    sp = speedup({"ar": ar, "spec": spec})
    return (sp["value"], sp["lo"], sp["hi"]) if sp else (fallback, None, None)


def tpot_ms(lane: dict) -> float | None:
    """Time per output token one request sees, ms: the engine's wall-clock figure the lane recorded (None: not run)."""
    value = lane.get("tpot_ms")
    return float(value) if isinstance(value, (int, float)) else None


def decode_rate(obj: dict) -> tuple[float, float | None, float | None]:
    """A lane's or a row's decoding-alone tokens/s: (median, min, max) over its rounds, or its one run's rate."""
    return spread_of(obj, "decode_tokens_per_s_runs") or (float(obj["decode_tokens_per_s"]), None, None)


def decode_ratio(spec: dict, ar: dict) -> tuple[float, float | None, float | None]:
    """Decoding-alone speedup spec/ar by the one rule over the interleaved rounds, with its 95% range."""
    s, a = decode_rate(spec)[0], decode_rate(ar)[0]
    return _rule(spec, ar, s / a if a else 0.0)
