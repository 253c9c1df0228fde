"""How fast a run decoded: the one decode-rate rule, for a trace, for runs decoded one after another, and for the
numbers a bench cell or an app lane is ranked by.

Decoding is timed apart from the prompt's pass: the tokens written by decode steps over the time after the prefill
(every row's first token comes from the prefill). Every run's stats carry `decode_tokens_per_s` (a trace's summary,
a bench cell, an app lane; the loaders refuse one without it). One rule covers the run with no decode step (it wrote
one token per row, all from the prefill, so its `decode_tokens_per_s` is null): where a rate must still rank it, its
whole-run tokens/s stands in (`ranking_rate`), in this one place.
"""

from __future__ import annotations


def decode_rate(tokens: int, decode_s: float) -> float | None:
    """Tokens written by decode steps per second of the time after the prefill; None where there were none or no time
    passed."""
    return tokens / decode_s if tokens and decode_s > 0 else None


def decode_tokens(steps) -> int:
    """Tokens the decode steps of a run wrote (every row's emitted tokens; the prefill's first tokens apart)."""
    return sum(len(row.emitted) for step in steps if step.kind == "decode" for row in step.seqs)


def joined_decoding(traces) -> dict:
    """Decoding over traces decoded one after another (batch-1 prompts in turn): their prefills summed as the time to
    first token, the tokens written after each trace's first over the time after it. {"ttft_s", "decode_s",
    "decode_tokens", "decode_tokens_per_s"}."""
    ttft = sum(t.summary["ttft_s"] or 0.0 for t in traces)  # null only for a trace with no prefill step
    decode_s = sum(t.summary["wall_s"] for t in traces) - ttft
    tokens = sum(decode_tokens(t.steps) for t in traces)
    return {"ttft_s": ttft, "decode_s": decode_s, "decode_tokens": tokens, "decode_tokens_per_s": decode_rate(tokens, decode_s)}


def ranking_rate(stats: dict) -> float:
    """The rate a run, a bench cell or a lane is ranked and compared by: decoding alone (`decode_tokens_per_s`, a key
    every run's stats carry: KeyError where it is missing), and for a run with no decode step (the key is null) its
    whole-run `tokens_per_s`, the module's one rule."""
    rate = stats["decode_tokens_per_s"]
    return rate if rate is not None else stats["tokens_per_s"]
