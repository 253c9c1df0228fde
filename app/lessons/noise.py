"""Noise and cost helpers for the Lessons' conclusions: a winner only beyond the run's own spread, step costs
from one statistic, and what this engine's batching means for a request's latency (no streamlit).

Every contender of a live lesson runs several times, interleaved (app/lessons/runs.py); its tokens/s of each run
is a `measurement.spread`. A winner is named only when every run of one beat every run of the other.
"""

from __future__ import annotations

from app.common import measurement


def clear_winner(a: dict | None, b: dict | None) -> int:
    """+1 when a beat b beyond the spread (every run of a above every run of b), -1 the other way, 0 when the runs
    overlap or either contender ran only once (a single run has no spread to judge by). a, b: measurement.spread."""
    if not a or not b or len(a["values"]) < 2 or len(b["values"]) < 2:
        return 0
    return 1 if a["min"] > b["max"] else -1 if a["max"] < b["min"] else 0


def runs_text(spread: dict | None, unit: str = "tokens/s") -> str:
    """'median 41.2 tokens/s over 3 runs, 39.8-42.0' (or '' without a spread)."""
    if not spread:
        return ""
    n = len(spread["values"])
    return f"median {spread['median']:.1f} {unit} over {n} run{'s' if n != 1 else ''}, {spread['min']:.1f}–{spread['max']:.1f}"


def speed_verdict(ar: dict, spec: dict) -> str:
    """Whether the speculative lane beat plain decoding beyond the spread of their interleaved runs."""
    a, b = ar.get("tokens_per_s_runs"), spec.get("tokens_per_s_runs")
    if not a or not b:
        return "one run each, no spread to judge by: read it as a trend"
    verdict = clear_winner(b, a)
    ranges = f"speculative {runs_text(b)}; plain {runs_text(a)}"
    if verdict > 0:
        return f"faster in every run ({ranges})"
    if verdict < 0:
        return f"slower in every run ({ranges})"
    return f"no clear winner, the runs overlap ({ranges})"


def speedup_spread(run: dict) -> dict | None:
    """The speedup of each interleaved round (its speculative run over its plain run), as a spread."""
    a, b = (run.get(k, {}).get("tokens_per_s_runs") for k in ("ar", "spec"))
    if not a or not b or len(a["values"]) != len(b["values"]):
        return None
    ratios = [s / p for s, p in zip(b["values"], a["values"]) if p > 0]
    return measurement.spread(ratios) if ratios else None


def step_costs(run: dict) -> tuple[float | None, float | None]:
    """(verify pass, whole speculative step), each in mean plain steps of the same batch, both from the lanes'
    MEAN times, so a step never reads cheaper than its own verify pass. An older recording without the means
    falls back to its median verify ratio and leaves the step out (it mixed a median with a mean)."""
    ar, spec = run.get("ar") or {}, run.get("spec") or {}
    plain = ar.get("step_ms")
    if plain and spec.get("verify_ms") is not None and spec.get("step_ms") is not None:
        return spec["verify_ms"] / plain, spec["step_ms"] / plain
    return run["m"].get("median_verify_ratio"), None


def serving_note(ar: dict, spec: dict, batch: int) -> str:
    """Time per output token of a request beside the batch's tokens/s, and what this engine's batching costs."""
    a, b = ar.get("tpot_ms"), spec.get("tpot_ms")
    text = ""
    if a is not None and b is not None:
        text = (
            f"Per request at batch {batch}: {b:.1f} ms per output token speculating against {a:.1f} ms plain "
            f"({'shorter' if b < a else 'longer'} waits for each user). "
        )
    return text + (
        "This engine runs a batch until its slowest row ends: a finished row leaves and no waiting request takes "
        "its slot, so the last steps run with fewer rows. A server with continuous batching (vLLM, SGLang, "
        "TensorRT-LLM) refills a finished row's slot at the next step, so its batch stays full: no thin tail of "
        "steps, but every verify pass stays as large as the full batch makes it."
    )


# --- one statistic for chart, table and words; rounds far outside the others ------------------------------------
FAR = 1.5  # a round whose rate is this many times above or below the median of the other rounds is "far outside"


def far_rounds(values: list[float]) -> list[int]:
    """Indices of the rounds far outside the others: more than FAR× above or below the median of all rounds (a cold
    start, another process's burst; one odd round cannot move the median). Needs three rounds or more: with two,
    neither can be called the odd one. Only a minority can be odd: where half the rounds or more are far from the
    median, the machine was unsteady, not a round (`unsteady`), and every round is kept."""
    if len(values) < 3:
        return []
    mid = measurement.spread(values)["median"]
    far = [i for i, v in enumerate(values) if mid > 0 and (v > FAR * mid or v * FAR < mid)]
    return [] if unsteady(far, len(values)) else far


def unsteady(far, rounds: int) -> bool:
    """Half the rounds or more far outside the others: a busy machine, not an odd round (nothing is left out)."""
    return 2 * len(far) >= rounds


def rate_runs(lane: dict) -> tuple[dict | None, bool]:
    """(a lane's spread of rates, decoding alone?): its decoding-alone tokens/s of every round where recorded, else
    (a recording from before decoding was timed apart from the prompt's pass) its whole-run tokens/s."""
    if lane.get("decode_tokens_per_s_runs"):
        return lane["decode_tokens_per_s_runs"], True
    return lane.get("tokens_per_s_runs"), False


def _kept(spread: dict | None, drop: set[int]) -> dict | None:
    if not spread:
        return None
    values = [v for i, v in enumerate(spread["values"]) if i not in drop]
    return measurement.spread(values) if values else None


def speedup(run: dict, whole: bool = False) -> dict | None:
    """A plain-vs-speculative pair's speedup as the chart, the table and the words all show it: the median over the
    interleaved rounds of (speculative rate ÷ plain rate) in that round, decoding alone by default (whole=True: the
    whole run, prefill included), with the rounds' range. A round far outside the others in either lane (far_rounds)
    is left out of the median and the range and named in `far`. None where a lane has no repeated rates.
    {"value", "lo", "hi", "rounds", "far", "decode"}."""
    ar, spec = run.get("ar") or {}, run.get("spec") or {}
    (a, da), (b, db) = (((x.get("tokens_per_s_runs"), False) if whole else rate_runs(x)) for x in (ar, spec))
    if not a or not b or len(a["values"]) != len(b["values"]):
        return None
    far = set(far_rounds(a["values"])) | set(far_rounds(b["values"]))
    shaky = unsteady(far, len(a["values"]))
    far = set() if shaky else far  # each lane's odd round, together most rounds: the machine, not a round
    ratios = [s / p for i, (s, p) in enumerate(zip(b["values"], a["values"])) if p > 0 and i not in far]
    if not ratios:
        return None
    sp = measurement.spread(ratios)
    return {
        "value": sp["median"],
        "lo": sp["min"],
        "hi": sp["max"],
        "rounds": len(ratios),
        "far": sorted(far),
        "decode": da and db,
        "unsteady": shaky,
    }


def verdict(run: dict) -> int:
    """+1: speculation beat plain decoding in every interleaved round kept (its rate ÷ plain's in that round above 1,
    decoding alone where recorded), -1 lost in every one, 0: the rounds disagree (or too few). Rounds far outside the
    others are left out on both sides (speedup). Lanes without paired rounds: beyond the spread (clear_winner)."""
    (a, _), (b, _) = rate_runs(run.get("ar") or {}), rate_runs(run.get("spec") or {})
    if not a or not b:
        return 0
    if len(a["values"]) == len(b["values"]) >= 2:  # interleaved rounds: judged round by round (a drift cancels in each ratio)
        sp = speedup(run)
        return 1 if sp and sp["rounds"] >= 2 and sp["lo"] > 1 else -1 if sp and sp["rounds"] >= 2 and sp["hi"] < 1 else 0
    return clear_winner(b, a)


def far_text(run: dict) -> str:
    """'round 2 of 5 left out, far outside the others: a cold start or other load' or ''."""
    s = speedup(run)
    if s and s.get("unsteady"):
        return f"half the {s['rounds']} rounds or more were far from the others: a busy machine, so every round is kept"
    if not s or not s["far"]:
        return ""
    n = len((rate_runs(run["ar"])[0] or {"values": []})["values"])
    rounds = ", ".join(str(i + 1) for i in s["far"])
    plural = "s" if len(s["far"]) > 1 else ""
    return f"round{plural} {rounds} of {n} left out, far outside the others: a cold start or other load"


def kept_runs(spread: dict | None) -> tuple[dict | None, list[int]]:
    """(a spread without its rounds far outside the others, the indices of those rounds): the range a chart's
    whisker, a table and a verdict use, the far rounds shown apart."""
    if not spread:
        return None, []
    far = far_rounds(spread["values"])
    return _kept(spread, set(far)), far


def same_within_noise(small: dict, large: dict) -> bool:
    """Two passes' rounds (measurement.spread of ms) overlap: the larger pass's lower median is noise, not a saving."""
    return not (small["min"] > large["max"] or large["min"] > small["max"])


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
    bad = 0
    for values in judged:
        mid = measurement.spread(values)["median"]
        far = [v for v in values if mid > 0 and (v > FAR * mid or v * FAR < mid)]
        bad += unsteady(far, len(values))
    return bad, len(judged)


def disturbed_live(m: dict, recorded: dict | None) -> str | None:
    """Why a live run's timings are suspect, or None: other processes kept more than measurement.BUSY_CORES cores
    busy during a run, a contender's rounds scattered far apart (unsteady_spreads), or (lesson 1) its probed
    bandwidth fell far below the recording's on the same machine type."""
    busy = measurement.other_cores(m)
    if busy is not None and busy > measurement.BUSY_CORES:
        return f"other processes kept {busy:.1f} cores busy during a run"
    bad, judged = unsteady_spreads(m)
    if bad:
        return f"in {bad} of {judged} rates measured in rounds, half the rounds or more were {FAR}× or more from the others"
    live_bw, rec_bw = m.get("peak_bandwidth"), (recorded or {}).get("peak_bandwidth")
    if live_bw and rec_bw and live_bw * FAR < rec_bw:
        return f"its probe measured {live_bw / 1e9:.0f} GB/s against the recording's {rec_bw / 1e9:.0f} GB/s"
    return None
