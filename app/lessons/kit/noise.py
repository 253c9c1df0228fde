"""The lessons' words for noise, all from the one verdict rule (engine/verdict.py): a speedup over interleaved
rounds with its 95% range, far rounds named and kept, a run disturbed by other work flagged, and why throughput and
a request's wait can disagree. No streamlit.
"""

from __future__ import annotations

from app.common import measurement
from engine import verdict as rule
from engine.verdict import Verdict


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


def rate_runs(lane: dict) -> tuple[dict | None, bool]:
    """(a lane's spread of rates, decoding alone?): its decoding-alone tokens/s of every round where recorded, else
    (a recording from before decoding was timed apart from the prompt's pass) its whole-run tokens/s."""
    if lane.get("decode_tokens_per_s_runs"):
        return lane["decode_tokens_per_s_runs"], True
    return lane.get("tokens_per_s_runs"), False


def speedup(run: dict, whole: bool = False) -> dict | None:
    """A plain-vs-speculative pair's speedup as the chart, the table and the words all show it: the one rule's ratio
    (verdict.judge: the geometric mean over the interleaved rounds of speculative rate ÷ plain rate) with its 95%
    interval, decoding alone by default (whole=True: the whole run, prefill included). None where a lane has no
    rates. {"value", "lo", "hi", "rounds", "decode", "verdict", "far"}; lo/hi None with one round."""
    ar, spec = run.get("ar") or {}, run.get("spec") or {}
    (a, da), (b, db) = (((x.get("tokens_per_s_runs"), False) if whole else rate_runs(x)) for x in (ar, spec))
    v = judge(b, a)
    if v is None:
        return None
    far = sorted(set(far_rounds(a["values"])) | set(far_rounds(b["values"]))) if len(a["values"]) == len(b["values"]) else []
    return {"value": v.ratio, "lo": v.lo, "hi": v.hi, "rounds": v.rounds, "decode": da and db, "verdict": v, "far": far}


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
        return f"other processes kept {busy:.1f} cores busy during a run"
    bad, judged = unsteady_spreads(m)
    if bad:
        return f"in {bad} of {judged} rates measured in rounds, half the rounds or more were {FAR}× or more from the others"
    if recorded and "measurement" in recorded:
        recorded = recorded["measurement"] if recorded.get("machine") == machine else None
    live_bw, rec_bw = m.get("peak_bandwidth"), (recorded or {}).get("peak_bandwidth")
    if live_bw and rec_bw and live_bw * FAR < rec_bw:
        return f"its probe measured {live_bw / 1e9:.0f} GB/s against the recording's {rec_bw / 1e9:.0f} GB/s"
    return None
