"""From traces to a lesson's lanes: a decoding run reduced to the plain numbers a lesson reads (app/common/measurement.py
checks them against the schema). Decoding is kept apart from the prompt's pass (decode_fields). No streamlit, no
torch: a Trace goes in through `lane()`, which reads only its public fields.
"""

from __future__ import annotations

import statistics

from engine.trace.rates import joined_decoding, ranking_rate

# --- from traces to lanes ----------------------------------------------------------------------
SUMMARY_KEYS = (
    "new_tokens",
    "wall_s",
    "tokens_per_s",
    "ttft_s",
    "decode_tokens_per_s",
    "tpot_ms",
    "target_forwards",
    "flops",
    "flops_wasted",
    "bytes",
    "alpha",
    "acceptance_rate",
    "tokens_per_step",
    "drafted_tokens",
    "accepted_tokens",
)


def _decode_steps(trace) -> list:
    return [s for s in trace.steps if s.kind == "decode"]


def draft_share(trace) -> float:
    """Fraction of the decode steps' time spent drafting."""
    steps = _decode_steps(trace)
    total = sum(s.step_ms for s in steps)
    return sum(s.draft_ms for s in steps) / total if total > 0 else 0.0


def verified_slots(trace) -> tuple[int, int]:
    """(draft positions the target verified, real draft tokens among them): the rest is padding, the slots of rows
    that had stopped drafting while another row in the batch went on."""
    steps = [s for s in _decode_steps(trace) if s.depth > 0]
    return (sum(s.tokens_per_pass - s.batch for s in steps), sum(len(q.drafted) for s in steps for q in s.seqs))


def tpot_ms(trace) -> float | None:
    """Time per output token of a request: the engine's one definition (engine/trace/records.py `decode_timing`,
    wall clock from the first token to each row's last token, over the tokens it wrote in decode steps, averaged over
    the rows), read from the trace's summary, so the Playground, the lessons and `python -m engine bench` quote one
    number. A row that ends early stops its clock there; the batch itself runs until its slowest row ends (this
    engine does not refill a finished row's slot)."""
    value = trace.summary.get("tpot_ms")
    return float(value) if isinstance(value, (int, float)) else None


def decode_fields(traces: list) -> dict:
    """Decoding apart from the prompt's pass, over one run (one trace, or batch-1 traces decoded one after another):
    time to first token (summed), tokens written by decode steps, the time they took, their rate, and the run's
    decode passes as [tokens per pass, draft depth, steps] (what app/views/h200.py re-prices on a GPU)."""
    shapes: dict[tuple[int, int], int] = {}
    for step in (s for t in traces for s in _decode_steps(t)):
        shape = (int(step.tokens_per_pass), int(step.depth))
        shapes[shape] = shapes.get(shape, 0) + 1
    return joined_decoding(traces) | {"passes": [[n, k, c] for (n, k), c in sorted(shapes.items())]}


decode_rate = ranking_rate  # the engine's one rule (engine/trace/rates.py), under the name the lessons read


def _mean_ms(steps: list, field: str) -> float | None:
    return sum(getattr(s, field) for s in steps) / len(steps) if steps else None


def lane(trace) -> dict:
    """One decoding run reduced to what the lessons read: its summary numbers, drafter and depth, the share of
    step time spent drafting, the verified draft slots, how many decode steps speculated, the MEAN decode step,
    verify pass and draft time (one statistic for all three, so a step never reads cheaper than its own verify
    pass), the time per output token of a request, and the cores other processes kept busy meanwhile."""
    s = trace.summary
    steps = _decode_steps(trace)
    other, wall = s.get("other_cpu_s"), s.get("wall_s")
    return {
        "summary": {key: s.get(key) for key in SUMMARY_KEYS},
        "drafter": str(trace.config.get("drafter", "")) if trace.config.get("mode") == "speculative" else "",
        "depth": int(trace.config.get("depth", 0)) if trace.config.get("mode") == "speculative" else 0,
        "draft_share": draft_share(trace),
        "verified_slots": list(verified_slots(trace)),
        "decode_steps": len(steps),
        "speculated_steps": sum(1 for st in steps if st.depth > 0),
        "step_ms": _mean_ms(steps, "step_ms"),
        "verify_ms": _mean_ms(steps, "verify_ms"),
        "draft_ms": _mean_ms(steps, "draft_ms"),
        "tpot_ms": tpot_ms(trace),
        "other_cores": other / wall if isinstance(other, (int, float)) and wall else None,
        **decode_fields([trace]),
    }


def spread(values: list[float]) -> dict:
    """Repeated measurements of one contender: the values in the order measured, their median, min and max."""
    if not values:
        raise ValueError("a spread needs at least one value")
    ordered = sorted(values)
    return {"values": list(values), "median": statistics.median(ordered), "min": ordered[0], "max": ordered[-1]}


def median_index(values: list[float]) -> int:
    """Index of the run whose value is the median (the lower middle one for an even count)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    return order[(len(values) - 1) // 2]


def lane_of_runs(traces: list) -> dict:
    """Repeats of one contender as one lane: the median run's lane (by decoding-alone tokens/s), every run's
    decoding-alone tokens/s and every run's whole-run tokens/s (prefill included)."""
    lanes = [lane(t) for t in traces]
    rates = [ranking_rate(x | x["summary"]) for x in lanes]
    whole = [t.summary["tokens_per_s"] for t in traces]
    return lanes[median_index(rates)] | {"decode_tokens_per_s_runs": spread(rates), "tokens_per_s_runs": spread(whole)}


def plain_numbers(m: dict) -> dict:
    """A `metrics.compare` dict with only its number fields (the first-differences map is dropped)."""
    return {k: v for k, v in m.items() if v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))}
