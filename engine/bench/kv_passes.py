"""Passes at several contexts, measured for the predictor's KV check (engine/roofline/kv_check.py).

Each round times every context once, in turn (`engine.decoding.passcurve.pass_costs`: batch × new tokens per row over
a `context`-token cache, the median of `repeats` passes after a warm-up pass), so a shared machine's drift hits every
context alike; a pass's time is the median over rounds, with the fastest and slowest round beside it. One short pass
curve runs first and is thrown away (the first shapes a process meets pay for its warm-up). The result is the
recording's dict (`speclab.kv_check/1`), checked by `engine.roofline.kv_check.parse_kv_check` before it is returned:
scripts/record/record_kv_check.py writes it, the Predictor page draws it and can measure it again live.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import statistics
from collections.abc import Callable

import torch

from engine.decoding.passcurve import pass_costs
from engine.roofline.kv_check import KV_SCHEMA, parse_kv_check

CONTEXTS = (256, 1024, 4096)
BATCHES = (1, 8)
TOKENS = (1, 4)


def _sig(value: float) -> float:
    return float(f"{value:.6g}")


def measure_kv_passes(
    pair,
    probe,
    contexts=CONTEXTS,
    batches=BATCHES,
    tokens=TOKENS,
    repeats: int = 5,
    rounds: int = 3,
    note: str = "",
    quick_probe: bool = False,
    log: Callable[[str], None] = lambda line: None,
) -> dict:
    """The KV check's recording: every (batch, new tokens, context) pass, median over `rounds` interleaved rounds.

    probe: this machine's peaks (`engine.hardware.probe`; `quick_probe` says which probe it was)."""
    contexts, batches, tokens = sorted(set(contexts)), sorted(set(batches)), sorted(set(tokens))
    if not contexts or not batches or not tokens or min(batches) < 1 or min(tokens) < 1 or min(contexts) < 0:
        raise ValueError("the KV check needs contexts >= 0, batch sizes >= 1 and tokens per row >= 1, one of each at least")
    if repeats < 1 or rounds < 1:
        raise ValueError("repeats and rounds must be >= 1")
    if max(contexts) + max(tokens) + 1 > pair.max_context:
        raise ValueError(f"context {max(contexts)} does not fit the model's window of {pair.max_context} positions")
    pass_costs(pair, [batches[0]], [tokens[0]], min(contexts), repeats=1)  # the process's warm-up, thrown away
    times: dict[tuple[int, int, int], list[float]] = {}
    backend = ""
    for r in range(rounds):
        for context in contexts:
            log(f"round {r + 1} of {rounds}: context {context}")
            for row in pass_costs(pair, batches, tokens, context, repeats=repeats):
                times.setdefault((row["batch"], row["new_tokens"], context), []).append(row["ms"])
                backend = row["backend"]
    record = {
        "schema": KV_SCHEMA,
        "machine": probe.device_name,
        "device": probe.device,
        "dtype": pair.dtype_name,
        "date": dt.datetime.now(dt.UTC).date().isoformat(),
        "note": note,
        "source": "scripts/record/record_kv_check.py (engine/bench/kv_passes.py)",
        "torch": torch.__version__,
        "backend": backend,
        "rounds": rounds,
        "repeats": repeats,
        "probe": {"peak_bandwidth": _sig(probe.peak_bandwidth), "peak_flops": _sig(probe.peak_flops), "quick": quick_probe},
        "model": {"name": pair.target_name, **dataclasses.asdict(pair.target_costs)},
        "passes": [
            {
                "batch": batch,
                "new_tokens": n,
                "context": context,
                "ms": _sig(statistics.median(ms)),
                "ms_low": _sig(min(ms)),
                "ms_high": _sig(max(ms)),
            }
            for (batch, n, context), ms in sorted(times.items())
        ],
    }
    parse_kv_check(record, "the measured KV check")  # what is returned is what the reader accepts
    return record
