"""Why a one-token pass can read more than "the peak" the quick probe measures: the probe's copy against a read-only
stream over the same buffer, beside the embedded target's one-token pass, in interleaved rounds.

    .venv/bin/python scripts/investigate/probe_read_vs_copy.py --rounds 4

Per round: a 64 MB and a 256 MB float32 buffer, each copied (counted as 2 bytes per byte, as engine.hardware.probe
counts it) and summed (1 byte per byte read), median of 5; then the target's one-token pass over a 150-token cache
(engine.decoding.passcurve.pass_costs, its counted bytes over its median time); then the quick probe itself, timed.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from engine import load_pair
from engine.decoding.passcurve import pass_costs
from engine.hardware import _median_time, configure_threads, device_name, probe


def stream_rates(mb: int, cpu: torch.device) -> tuple[float, float]:
    """(copy GB/s counted as 2 bytes per byte, read-only sum GB/s) over one float32 buffer of `mb` MB."""
    n = mb << 20
    src = torch.empty(n // 4, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    copy = 2 * n / _median_time(lambda: dst.copy_(src), cpu, 5) / 1e9
    read = n / _median_time(lambda: src.sum(), cpu, 5) / 1e9
    return copy, read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    configure_threads()
    cpu = torch.device("cpu")
    pair = load_pair()
    print(f"{device_name(cpu)}, torch {torch.__version__}, target weights {pair.target_costs.weight_bytes / 1e6:.0f} MB ({pair.dtype})")
    keys = ("copy 64 MB", "read 64 MB", "copy 256 MB", "read 256 MB", "one-token pass", "quick probe (peak)", "quick probe s")
    res: dict[str, list[float]] = {k: [] for k in keys}
    for _ in range(args.rounds):
        for mb in (64, 256):
            copy, read = stream_rates(mb, cpu)
            res[f"copy {mb} MB"].append(copy)
            res[f"read {mb} MB"].append(read)
        row = pass_costs(pair, [1], [1], context=150, repeats=5)[0]
        res["one-token pass"].append(row["achieved_bandwidth"] / 1e9)
        t = time.perf_counter()
        peaks = probe("cpu", "auto", quick=True)
        res["quick probe s"].append(time.perf_counter() - t)
        res["quick probe (peak)"].append(peaks.peak_bandwidth / 1e9)
    for key in keys:
        unit = "s" if key.endswith(" s") else "GB/s"
        print(
            f"{key:>20}: "
            + ", ".join(f"{v:.2f}" if unit == "s" else f"{v:.1f}" for v in res[key])
            + f"  median {statistics.median(res[key]):.2f} {unit}"
        )
    for mb in (64, 256):
        ratios = [r / c for r, c in zip(res[f"read {mb} MB"], res[f"copy {mb} MB"], strict=True)]
        print(f"read / copy, {mb} MB: " + ", ".join(f"{r:.2f}" for r in ratios))
    print(
        "one-token pass / quick probe: "
        + ", ".join(f"{p / q:.2f}" for p, q in zip(res["one-token pass"], res["quick probe (peak)"], strict=True))
    )


if __name__ == "__main__":
    main()
