"""Backends' passes against each other, interleaved: `python -m engine passes --compare-backends` (engine/model/backend.py).

One forward pass per size and backend ("mode" below), timed by `engine.decoding.passcurve.pass_costs`; every round
measures every mode once (e.g. torch, then fused, then native, then the next round), so a shared machine's drift hits
them alike. Each mode's time per size is the median over rounds of that round's median of `repeats`
passes, with the min and max over rounds beside it (the spread a reader needs before calling a winner).
"""

from __future__ import annotations

import statistics

from engine.decoding.passcurve import pass_costs
from engine.model.backend import BACKENDS


def check_modes(modes: list[str]) -> list[str]:
    """The modes to compare, in order, each once; a clear error for an unknown one."""
    bad = [m for m in modes if m not in BACKENDS]
    if bad:
        raise ValueError(f"unknown backend {bad[0]!r}: choose from {', '.join(BACKENDS)}")
    if len(set(modes)) != len(modes) or len(modes) < 2:
        raise ValueError(f"--compare-backends needs two or more different backends (e.g. torch,fused); got {','.join(modes)}")
    return modes


def compare_fast(pair, modes: list[str], batches: list[int], tokens: list[int], context: int, repeats: int, rounds: int) -> list[dict]:
    """Rows (batch, new_tokens, mode, ms median over rounds, ms_min, ms_max, ms_rounds), interleaved by round."""
    times: dict[tuple, list[float]] = {}
    first: dict[tuple, dict] = {}
    for _ in range(rounds):
        for mode in modes:
            for row in pass_costs(pair, batches, tokens, context, repeats, backend=mode):
                key = (row["batch"], row["new_tokens"], mode)
                times.setdefault(key, []).append(row["ms"])
                first.setdefault(key, row)
    out = []
    for key, ms in times.items():
        row = first[key]
        out.append(
            {
                "batch": key[0],
                "new_tokens": key[1],
                "tokens_per_pass": row["tokens_per_pass"],
                "mode": key[2],
                "ms": statistics.median(ms),
                "ms_min": min(ms),
                "ms_max": max(ms),
                "ms_rounds": ms,
                "bytes": row["bytes"],
                "flops": row["flops"],
            }
        )
    return out


def format_fast_comparison(rows: list[dict], modes: list[str], peak_bandwidth: float | None = None) -> str:
    """One line per pass size: each mode's median ms [min-max], the first mode's time over each other's,
    and (given the probed bandwidth) the share of it the fastest mode reached."""
    by = {(r["batch"], r["new_tokens"], r["mode"]): r for r in rows}
    sizes = sorted({(r["batch"], r["new_tokens"]) for r in rows})
    head = "batch  new/row " + " ".join(f"{m + ' ms [min-max]':>26}" for m in modes)
    head += " " + " ".join(f"{modes[0] + '/' + m:>12}" for m in modes[1:]) + ("  %BW best" if peak_bandwidth else "")
    lines = [head]
    for batch, n in sizes:
        cells = [by[(batch, n, m)] for m in modes]
        line = f"{batch:>5} {n:>8} " + " ".join(f"{c['ms']:>9.2f} [{c['ms_min']:>6.2f}-{c['ms_max']:>6.2f}]" for c in cells)
        line += " " + " ".join(f"{cells[0]['ms'] / c['ms']:>11.2f}x" for c in cells[1:])
        if peak_bandwidth:
            best = min(c["ms"] for c in cells)
            line += f" {100 * cells[0]['bytes'] / (best / 1000) / peak_bandwidth:>9.0f}"
        lines.append(line)
    return "\n".join(lines)
