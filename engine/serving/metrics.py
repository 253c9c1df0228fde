"""Prometheus text from a serving engine's /metrics: parsed strictly enough to trust, and read for speculation.

Which engine answered is told by its metric names (llama.cpp `llamacpp:`, vLLM `vllm:`, SGLang `sglang:`). llama.cpp and
vLLM count drafts, draft tokens, accepted tokens and accepted tokens per draft position as counters, so a run's own
acceptance is the difference of two scrapes; SGLang exposes gauges (accept length, accept rate) read as they stand.
"""

from __future__ import annotations

import math
import re

ENGINES = {"llamacpp": "llama.cpp (llama-server)", "vllm": "vLLM", "sglang": "SGLang"}
# counter stems per engine; a scrape may add "_total" (Prometheus' client appends it to counters)
COUNTERS = {
    "llamacpp": {
        "drafts": "llamacpp:spec_decode_num_drafts",
        "draft_tokens": "llamacpp:spec_decode_num_draft_tokens",
        "accepted": "llamacpp:spec_decode_num_accepted_tokens",
        "per_pos": "llamacpp:spec_decode_num_accepted_tokens_per_pos",
        "generated": "llamacpp:tokens_predicted",
    },
    "vllm": {
        "drafts": "vllm:spec_decode_num_drafts",
        "draft_tokens": "vllm:spec_decode_num_draft_tokens",
        "accepted": "vllm:spec_decode_num_accepted_tokens",
        "per_pos": "vllm:spec_decode_num_accepted_tokens_per_pos",
        "generated": "vllm:generation_tokens",
    },
}
SGLANG_GAUGES = {"accept_length": "sglang:spec_accept_length", "accept_rate": "sglang:spec_accept_rate"}
MAX_SERIES = 20_000  # a scrape with more samples than this is not a serving engine's metrics page
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)(\s+\S+)?$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


class MetricsError(ValueError):
    """A /metrics page that is not Prometheus text, or not a serving engine's."""


def parse(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(name, sorted labels): value} of every sample; comments and blank lines skipped; a malformed line raises."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise MetricsError(f"/metrics line {n} is not a Prometheus sample: {line[:80]!r}")
        labels = _labels(m.group(2) or "", n)
        try:
            value = float(m.group(3))
        except ValueError:
            raise MetricsError(f"/metrics line {n}: {m.group(3)[:40]!r} is not a number") from None
        out[(m.group(1), labels)] = value
        if len(out) > MAX_SERIES:
            raise MetricsError(f"/metrics has more than {MAX_SERIES} samples: not a serving engine's metrics page")
    return out


def _labels(block: str, n: int) -> tuple[tuple[str, str], ...]:
    inner = block[1:-1].strip() if block else ""
    pairs, pos = [], 0
    while pos < len(inner):
        m = _LABEL.match(inner, pos)
        if not m:
            raise MetricsError(f"/metrics line {n}: labels {block[:60]!r} are malformed")
        pairs.append((m.group(1), m.group(2)))
        pos = m.end()
    return tuple(sorted(pairs))


def engine_of(samples: dict) -> str | None:
    """'llamacpp', 'vllm' or 'sglang' by the metric names' prefix (the one with most samples), None for none."""
    counts = {key: sum(1 for name, _ in samples if name.startswith(key + ":")) for key in ENGINES}
    best = max(counts, key=counts.get)
    return best if counts[best] else None


def _value(samples: dict, stem: str, labels: tuple = ()) -> float | None:
    for name in (stem + "_total", stem):
        if (name, labels) in samples:
            return samples[(name, labels)]
    return None


def spec_counters(samples: dict, engine: str) -> dict:
    """The engine's speculation counters now: drafts, draft_tokens, accepted, generated (None where absent) and
    per_pos ({position: accepted}); SGLang: its two gauges instead."""
    if engine == "sglang":
        return {key: _value(samples, name) for key, name in SGLANG_GAUGES.items()}
    if engine not in COUNTERS:
        raise MetricsError(f"unknown engine {engine!r}")
    names = COUNTERS[engine]
    out = {key: _value(samples, stem) for key, stem in names.items() if key != "per_pos"}
    per_pos = {}
    for (name, labels), value in samples.items():
        if name in (names["per_pos"], names["per_pos"] + "_total"):
            pos = dict(labels).get("position")
            if pos is not None and pos.isascii() and pos.isdigit() and len(pos) <= 4:  # not "²", which int() refuses
                per_pos[int(pos)] = value
    out["per_pos"] = per_pos
    return out


def run_counters(before: dict, after: dict) -> dict:
    """What one run added to the counters (after − before), with its acceptance: α (accepted ÷ drafted), tokens per
    draft, and acceptance per position (accepted at position i ÷ drafts). A counter that went down (a restarted
    server) raises."""
    out = {}
    for key in ("drafts", "draft_tokens", "accepted", "generated"):
        a, b = before.get(key), after.get(key)
        out[key] = None if a is None or b is None else _grew(key, a, b)
    positions = sorted(set(before.get("per_pos", {})) | set(after.get("per_pos", {})))
    per_pos = [_grew(f"position {p}", before.get("per_pos", {}).get(p, 0.0), after["per_pos"].get(p, 0.0)) for p in positions]
    drafts, drafted, accepted = out["drafts"], out["draft_tokens"], out["accepted"]
    out["per_pos_accepted"] = per_pos
    out["per_pos_rate"] = [round(x / drafts, 4) for x in per_pos] if drafts else []
    out["alpha"] = round(accepted / drafted, 4) if drafted else None  # the acceptance rate (the key is the recordings'), not α
    out["accepted_per_draft"] = round(accepted / drafts, 4) if drafts else None
    return out


def _grew(what: str, a: float, b: float) -> float:
    if b < a or not (math.isfinite(a) and math.isfinite(b)):
        raise MetricsError(f"the server's {what} counter went from {a:g} to {b:g}: was it restarted during the run?")
    return b - a
