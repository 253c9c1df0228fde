"""Printing interleaved benchmark rounds: each contender's median [min, max] and ratios between contenders,
of the medians and paired round by round (the same round's two rates), as the benchmark scripts print them
(scripts/record/llama_cpp_bench.py, scripts/investigate/fast_bench.py)."""

from __future__ import annotations

import statistics


def rate_lines(rates: dict[str, list[float]], unit: str = "tok/s") -> list[str]:
    """One line per contender: the median over rounds, then the min and max."""
    width = max([len(k) for k in rates] + [9])
    lines = [f"{'contender':<{width}} {'median ' + unit:>12} {'min':>8} {'max':>8}"]
    for key, values in rates.items():
        if values:
            lines.append(f"{key:<{width}} {statistics.median(values):>12.2f} {min(values):>8.2f} {max(values):>8.2f}")
    return lines


def ratio_lines(rates: dict[str, list[float]], pairs: list[tuple[str, str]]) -> list[str]:
    """'a / b' per pair: the ratio of the medians, and the median, min and max of the per-round ratios.
    Pairs naming a contender without rounds are left out."""
    pairs = [(a, b) for a, b in pairs if rates.get(a) and rates.get(b)]
    width = max([len(f"{a} / {b}") for a, b in pairs] + [5])
    lines = [f"{'ratio':<{width}} {'of medians':>10} {'per round: median':>18} {'min':>6} {'max':>6}"]
    for a, b in pairs:
        paired = [x / y for x, y in zip(rates[a], rates[b])]
        of_medians = statistics.median(rates[a]) / statistics.median(rates[b])
        lines.append(
            f"{a + ' / ' + b:<{width}} {of_medians:>9.2f}x {statistics.median(paired):>17.2f}x {min(paired):>5.2f}x {max(paired):>5.2f}x"
        )
    return lines
