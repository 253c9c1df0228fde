"""Lessons 1-3's experiments: one pass against tokens per pass, speculation's extra FLOPs, and speculation at batch 1
against a large batch. Each takes (pair, probe, settings) and returns a measurement (app/lessons/measurement.py).
No streamlit.
"""

from __future__ import annotations

from app.lessons import measurement as ms
from app.lessons.experiment_kit import lane_jobs, lanes, model_drafter
from app.lessons.runs import interleaved, knee_tokens, lane_pair, large_batch, seed_passes
from engine.bench.prompts import batch_prompts
from engine.costs import ridge_tokens
from engine.decoding.passcurve import pass_costs, pass_curve

# --- 1. one token per pass leaves the arithmetic idle ----------------------------------------------
PASS_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)


PASS_ROUNDS = 3


def memory_bound(pair, probe, s: dict) -> dict:
    """One target pass at batch 1 with 1..`largest` new tokens (PASS_ROUNDS rounds over every size, the median of
    3 timed passes per size and round; a row's ms is the median over the rounds, its spread the rounds'), and
    this machine's probed peaks to read it against."""
    sizes = [n for n in PASS_SIZES if n <= s["largest"]]
    rounds = [pass_costs(pair, [1], sizes, context=int(s["context"]), repeats=3) for _ in range(PASS_ROUNDS)]
    rows = []
    for per_size in zip(*rounds):
        times = [row["ms"] for row in per_size]
        row = {key: per_size[ms.median_index(times)][key] for key in ms.PASS_ROW}  # the fields the schema records
        rows.append(row | {"ms_runs": ms.spread(times)})
    return {
        "rows": rows,
        "peak_bandwidth": probe.peak_bandwidth,
        "peak_flops": probe.peak_flops,
        "ridge_point": probe.ridge_point,
        "dtype": probe.dtype,
        "ridge_tokens": ridge_tokens(pair.target_costs, probe.peak_flops, probe.peak_bandwidth),
    }


def _row(rows: list[dict], tokens: int) -> dict:
    return min(rows, key=lambda r: abs(r["tokens_per_pass"] - tokens))


def pass_ratio(m: dict, s: dict) -> float | None:
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    return _row(rows, 16)["ms"] / rows[0]["ms"] if rows and rows[0]["ms"] > 0 else None


def roofline_ratio(m: dict, s: dict) -> list[tuple[str, float | None]]:
    """The roofline's ratio: time = max(bytes / peak bandwidth, FLOPs / peak FLOP/s), 16 tokens over 1."""
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    if not rows:
        return [("roofline from the probed peaks", None)]

    def t(r):
        return max(r["bytes"] / m["peak_bandwidth"], r["flops"] / m["peak_flops"])

    return [("roofline from the probed peaks: max(bytes ÷ bandwidth, FLOPs ÷ FLOP/s)", t(_row(rows, 16)) / t(rows[0]))]


# --- 2. speculation does more work, and the seed's five tokens per pass -----------------------------
def more_flops(pair, probe, s: dict) -> dict:
    """The n-gram lookup against plain decoding on an extractive prompt (batch 1), and Barrow's seed passes."""
    out = lanes(pair, batch_prompts("extractive", 1), int(s["depth"]), "ngram", int(s["tokens"]))
    return out | {"seed": seed_passes(pair, int(s["depth"]))}


def operations_models(m: dict, s: dict) -> list[tuple[str, float | None]]:
    return [("Leviathan's operations factor, Theorem 3.11 (decode steps only)", m["m"].get("operations_factor"))]


# --- 3. past the ridge ------------------------------------------------------------------------------
RIDGE_ROUNDS = 2  # six contenders at two batch sizes: two interleaved rounds keep a live run near 20 s on 2 cores


def past_the_ridge(pair, probe, s: dict) -> dict:
    """A model drafter at depth k on held-out prompts at batch 1 and a large batch, and the n-gram lookup at the
    large batch on extractive prompts (its best case) for contrast; each beside plain decoding of the same
    prompts, all six interleaved RIDGE_ROUNDS times. batch 0 picks the large batch from this machine's pass curve
    (engine/decoding/passcurve.py, measured once per machine) so its verify pass sits well past the knee."""
    drafter, depth, tokens = model_drafter(pair), int(s["depth"]), int(s["tokens"])
    curve = pass_curve(pair)
    knee = knee_tokens(curve.tokens, curve.ms)
    batch = int(s["batch"]) or large_batch(knee, depth)
    jobs = {}
    for b in (1, batch):
        for key, job in lane_jobs(batch_prompts("heldout", b), depth, drafter, 2 * tokens if b == 1 else tokens).items():
            jobs[(b, key)] = job
    for key, job in lane_jobs(batch_prompts("extractive", batch), depth, "ngram", tokens).items():
        jobs[("ngram", key)] = job
    runs = interleaved(pair, jobs, RIDGE_ROUNDS)
    shape = {"tokens": list(curve.tokens), "ms": list(curve.ms), "knee_tokens": knee}
    return {
        "drafter": drafter,
        "runs": [{"batch": b, **lane_pair(runs[(b, "ar")], runs[(b, "spec")])} for b in (1, batch)],
        "ngram": lane_pair(runs[("ngram", "ar")], runs[("ngram", "spec")]),
        "ridge_tokens": ridge_tokens(pair.target_costs, probe.peak_flops, probe.peak_bandwidth),
        "curve": shape | {"key": curve.key[:300], "measured_at": curve.measured_at},
    }
