"""One benchmark cell: repeated runs of one contender (a Trace, or batch-1 Traces decoded one after another) and
the statistics of its median run, decoding timed apart from each prompt's pass. Used by engine/bench/harness.py."""

from __future__ import annotations

import statistics
from collections import Counter

from engine.config import DecodeConfig
from engine.decoding.decode import generate
from engine.model.pair import ModelPair
from engine.trace.rates import joined_decoding, ranking_rate
from engine.trace.records import summarize


def _median(values):
    return statistics.median(values) if values else None


class _Run:
    """One measured run: a Trace, or several batch-1 Traces decoded one after another and summed."""

    def __init__(self, traces):
        self.steps = [st for t in traces for st in t.steps]
        self.output_ids = [o for t in traces for o in t.output_ids]
        first = traces[0].summary
        new_tokens = sum(t.summary["new_tokens"] for t in traces)
        wall = sum(t.summary["wall_s"] for t in traces)
        self.summary = summarize(self.steps, new_tokens, wall, first["device"], first["dtype"], traces[0].config["mode"] == "speculative")
        joined = joined_decoding(traces)  # each trace's own prefill apart, not only the first one's
        self.summary.update(ttft_s=joined["ttft_s"], decode_tokens_per_s=joined["decode_tokens_per_s"])
        self.prompt_rates = [t.summary["tokens_per_s"] for t in traces]  # per prompt when decoded one at a time
        # What else the machine ran meanwhile (engine/loadmeter.py): mean cores other processes kept busy over
        # the lane's timed windows, and the highest 1-minute load average at a trace's end (None: not recorded).
        other = [t.summary.get("other_cpu_s") for t in traces]
        self.other_cores = sum(other) / wall if wall and all(o is not None for o in other) else None
        loads = [t.summary.get("load_avg") for t in traces if t.summary.get("load_avg") is not None]
        self.load_avg = max(loads) if loads else None


def _one_run(pair: ModelPair, prompts: list[str], cfg: DecodeConfig, sequential: bool) -> _Run:
    if sequential:
        return _Run([generate(pair, [p], cfg) for p in prompts])
    return _Run([generate(pair, prompts, cfg)])


def run_cell(pair: ModelPair, prompts: list[str], cfg: DecodeConfig, repeats: int, sequential: bool = False) -> dict:
    """Median tokens/s (and the stats of the median run) of `repeats` runs after one warm-up.

    sequential: decode the prompts one at a time (batch 1) and sum tokens and time, instead of as one batch."""
    return run_cells(pair, prompts, [cfg], repeats, sequential)[0]


def run_cells(pair: ModelPair, prompts: list[str], cfgs: list[DecodeConfig], repeats: int, sequential: bool = False) -> list[dict]:
    """`run_cell` for several contenders, interleaved: each repeat runs every contender once, in turn, so a
    shared machine's drift hits them alike (after one warm-up each). One dict per cfg, in order."""
    for cfg in cfgs:
        generate(pair, prompts[:1], DecodeConfig.from_dict(cfg.to_dict() | {"max_new_tokens": 4}))  # warm-up
    runs: list[list[_Run]] = [[] for _ in cfgs]
    for _ in range(repeats):
        for i, cfg in enumerate(cfgs):
            runs[i].append(_one_run(pair, prompts, cfg, sequential))
    return [_cell_stats(r) for r in runs]


def _cell_stats(runs: list[_Run]) -> dict:
    # each prompt's median rate over the repeats (one entry for a batched run)
    prompt_rates = [_median(list(rates)) for rates in zip(*(r.prompt_rates for r in runs))]
    rounds = [ranking_rate(t.summary) for t in runs]  # every repeat's rate, in the order run (paired round by round)
    runs = sorted(runs, key=lambda t: ranking_rate(t.summary))
    mid = runs[len(runs) // 2]
    s = mid.summary
    decode_steps = [st for st in mid.steps if st.kind == "decode"]
    step_ms = sum(st.step_ms for st in decode_steps)
    return {
        "tokens_per_s": _median([t.summary["tokens_per_s"] for t in runs]),
        "decode_tokens_per_s": _median([ranking_rate(t.summary) for t in runs]),
        "decode_tokens_per_s_runs": rounds,
        "ttft_s": s["ttft_s"],
        "new_tokens": s["new_tokens"],
        "acceptance_rate": s["acceptance_rate"],
        "alpha": s["alpha"],
        "tokens_per_step": s["tokens_per_step"],
        "drafted_per_step": s["drafted_tokens"] / _seq_steps(mid.steps) if _seq_steps(mid.steps) else None,
        "per_position_acceptance": s["per_position_acceptance"],
        "target_forwards": s["target_forwards"],
        "flops": s["flops"],
        "overhead_pct": 100.0 * sum(st.overhead_ms for st in decode_steps) / step_ms if step_ms else None,
        "draft_ms_per_forward": _draft_forward_ms(decode_steps),
        "verify_ms": _median([st.verify_ms for st in decode_steps]),
        "mean_depth": statistics.mean(st.depth for st in decode_steps) if decode_steps else 0.0,
        "depth_steps": dict(sorted(Counter(st.depth for st in decode_steps).items())),  # k -> the median run's steps at it
        "policy_pct": 100.0 * sum(st.policy_ms for st in decode_steps) / step_ms if step_ms else None,
        "outputs": mid.output_ids,
        "prompt_rates": prompt_rates,
        "other_cores": mid.other_cores,
        "load_avg": mid.load_avg,
    }


def _seq_steps(steps) -> int:
    """Sequence-steps that drafted something."""
    return sum(1 for st in steps if st.kind == "decode" for q in st.seqs if q.drafted)


def _draft_forward_ms(steps) -> float | None:
    drafted = [st for st in steps if st.depth > 0 and st.draft_ms > 0]
    if not drafted:
        return None
    return _median([st.draft_ms / st.depth for st in drafted])
