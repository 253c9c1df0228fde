"""Noise and cost helpers for the Lessons' conclusions: a winner only beyond the run's own spread, step costs
from one statistic, and what this engine's batching means for a request's latency (no streamlit).

Every contender of a live lesson runs several times, interleaved (app/lessons/runs.py); its tokens/s of each run
is a `measurement.spread`. A winner is named only when every run of one beat every run of the other.
"""

from __future__ import annotations

from app.lessons import measurement


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
