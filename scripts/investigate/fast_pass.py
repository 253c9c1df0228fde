"""Eager vs fast (fused, native) decode passes of the embedded target, interleaved, on this machine.

Times ONE target pass of n tokens over a 128-token context for each mode in turn, `--rounds` times
round-robin, as wall time and as this thread's CPU time (`time.thread_time`; with SPECLAB_THREADS=1
all of the pass's work runs on this thread, so CPU time is what the pass costs even when other
processes share the cores and stretch its wall time). Prints per mode and token count the median and
spread over the rounds, with the load average. Each mode's first warm-up pass is reported separately, off
the clock. Modes: off (eager lean pass, dynamic cache), eager (fused projections, static buffers), native
(fused, SpecLab's native CPU kernels). The compiled pass it once also timed was removed (issue 31: 0.32x
the native pass on the CPU, docs/measurements.md).

  SPECLAB_THREADS=1 python scripts/investigate/fast_pass.py --tokens 1,5 --rounds 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch


def _session(pair, mode: str, context: int, max_tokens: int):
    from engine.config import DecodeConfig
    from engine.model.static_cache import make_cache

    cache = make_cache(pair.target, pair.device, pair.target_costs, DecodeConfig(max_new_tokens=max_tokens), fast=mode)
    prompt = torch.randint(100, 40000, (1, context), generator=torch.Generator().manual_seed(0)).tolist()
    cache.prefill(prompt, pad_id=0)
    return cache


def _time(cache, n: int, repeats: int) -> tuple[float, float]:
    """Median wall and CPU ms of `repeats` passes of n tokens, each rolled back (same context)."""
    ids = torch.randint(100, 40000, (1, n), generator=torch.Generator().manual_seed(n))
    wall, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.thread_time()
        cache.forward(ids, logits_to_keep=n)
        cpu.append((time.thread_time() - c) * 1000)
        wall.append((time.perf_counter() - t) * 1000)
        cache.keep(cache.lengths - n)
        cache.take_counts()
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", default="1,5")
    p.add_argument("--modes", default="off,eager,native")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    from engine import load_pair
    from engine.hardware import probe

    tokens = [int(t) for t in args.tokens.split(",")]
    modes = args.modes.split(",")
    pair = load_pair(draft="none", eagle="none", dtype=args.dtype)
    print(f"threads {torch.get_num_threads()}, load before: {os.getloadavg()}", flush=True)
    peaks = probe(pair.device, pair.dtype, quick=True)
    print(f"probe: {peaks.peak_bandwidth / 1e9:.1f} GB/s, {peaks.peak_flops / 1e9:.1f} GFLOP/s, {pair.dtype_name}", flush=True)
    caches = {}
    with torch.inference_mode():
        for mode in modes:  # warm-up each mode once, timed
            t = time.perf_counter()
            caches[mode] = _session(pair, mode, args.context, max(tokens))
            for n in tokens:
                _time(caches[mode], n, 1)
            print(f"warm-up {mode}: {time.perf_counter() - t:.1f} s", flush=True)
        wall = {(m, n): [] for m in modes for n in tokens}
        cpu = {(m, n): [] for m in modes for n in tokens}
        for r in range(args.rounds):
            for mode in modes:
                for n in tokens:
                    w, c = _time(caches[mode], n, args.repeats)
                    wall[(mode, n)].append(w)
                    cpu[(mode, n)].append(c)
            print(f"round {r + 1}: load {os.getloadavg()}", flush=True)
    nbytes = {n: pair.target_costs.forward_bytes(1, n, args.context) for n in tokens}
    out = {"probe": peaks.to_dict(), "threads": torch.get_num_threads(), "load_after": os.getloadavg(), "rows": []}
    head = f"{'mode':<15} {'n':>3} {'wall ms':>8} {'[min':>7} {'max]':>7} {'cpu ms':>7} {'[min':>7} {'max]':>7}"
    print(head + f" {'%bw cpu':>7} {'off/x':>6} {'n/1':>5}")
    for mode in modes:
        for n in tokens:
            w, c = statistics.median(wall[(mode, n)]), statistics.median(cpu[(mode, n)])
            bw = nbytes[n] / (c / 1000) / peaks.peak_bandwidth * 100
            vs_off = statistics.median(cpu[("off", n)]) / c if "off" in modes else float("nan")
            vs_one = c / statistics.median(cpu[(mode, tokens[0])])
            cw, cc = wall[(mode, n)], cpu[(mode, n)]
            print(
                f"{mode:<15} {n:>3} {w:>8.2f} {min(cw):>7.2f} {max(cw):>7.2f} {c:>7.2f} {min(cc):>7.2f} {max(cc):>7.2f}"
                f" {bw:>7.1f} {vs_off:>5.2f}x {vs_one:>4.2f}x"
            )
            out["rows"].append({"mode": mode, "tokens": n, "wall_ms": cw, "cpu_ms": cc, "bytes": nbytes[n]})
    print(f"load after: {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
