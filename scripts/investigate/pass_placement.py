"""Where the native pass's packed matrices live, and what it costs a one-token pass (issue 43, the slowdown since the
prepared weights; docs/journal.md, "where the packed weights live").

    layout     the tree on PYTHONPATH: where the default target's native packed matrices lie, per layer: in memory the
               process had freed before they were made (the heap as it was when the model had loaded), in the heap
               grown since, or in a mapping of their own; and the span they cover
    relayout   the tree on PYTHONPATH, one process: the one-token pass (batch 1, a 150-token context) over the packed
               matrices as the engine made them, against the same bytes copied into a fresh 2 MiB-aligned block in
               small pages ("fresh") and in transparent huge pages ("huge"); rounds alternate the order; per variant
               the fastest pass, the median over rounds of its ratio to "as made", and each layer's fastest native call
    rounds     one long-lived worker process per tree and copy, each loaded and prefilled as in `relayout`; under
               /work/bench.lock one worker at a time runs a burst of one-token passes, the order rotating every round,
               so the machine's drift (its speed changes by tens of per cent within seconds) reaches every tree alike;
               per process the fastest pass, and per pair of trees the median of the rounds' ratios

    PYTHONPATH=TREE python scripts/investigate/pass_placement.py layout
    PYTHONPATH=TREE flock /work/bench.lock python scripts/investigate/pass_placement.py relayout --rounds 10
    python scripts/investigate/pass_placement.py rounds --trees OLD,MAIN,. --copies 3 --rounds 30
"""

from __future__ import annotations

import argparse
import copy
import fcntl
import json
import mmap
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HUGE = 2 << 20
CONTEXT = 150


def _loaded(before_cache=lambda: None):
    """The default pair, a target cache on the device's default backend prefilled with CONTEXT tokens, one token id."""
    import torch

    from engine import load_pair
    from engine.config import DecodeConfig
    from engine.model.static_cache import make_cache

    pair = load_pair()
    before_cache()
    cache = make_cache(pair.target, pair.device, pair.target_costs, DecodeConfig(max_new_tokens=4))
    gen = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        cache.prefill(torch.randint(100, 40000, (1, CONTEXT), generator=gen).tolist(), pad_id=0)
    return pair, cache, torch.randint(100, 40000, (1, 1), generator=gen)


def _native(pair, cache):
    """(get, put) of the target's native layers and head: the registry's entry, or (before issue 43) the LeanLlama's."""
    try:
        from engine.model.prepared import lookup
    except ImportError:
        lean = cache.body_lean
        return (lambda: (lean._native, lean._native_head)), (
            lambda v: (setattr(lean, "_native", v[0]), setattr(lean, "_native_head", v[1]))
        )
    entry = lookup(pair.target)

    def put(v):
        entry.forms["native"], entry.heads["native"] = v

    return (lambda: (entry.forms["native"], entry.heads["native"][:2])), put


def _matrices(layers, head) -> list:
    from engine.model import cpukernels

    return [w for layer in layers for w in layer if isinstance(w, cpukernels.Packed)] + [head[1]]


def _heap() -> tuple[int, int]:
    for line in Path("/proc/self/maps").read_text().splitlines():
        if line.endswith("[heap]"):
            lo, hi = (int(a, 16) for a in line.split()[0].split("-"))
            return lo, hi
    return 0, 0


def layout() -> None:
    """Per layer, where each of its four packed matrices lies: "h" in the heap as it was when the model had loaded
    (memory the process had freed before), "n" in the heap grown since, "m" in a mapping of its own."""
    heap = []
    pair, cache, ids = _loaded(lambda: heap.append(_heap()))
    import torch

    with torch.inference_mode():  # before issue 43 the native copies were made at the first pass
        cache.forward(ids)
    (lo, top), (layers, head) = heap[0], _native(pair, cache)[0]()
    mats = _matrices(layers, head)[:-1]
    where = ["h" if lo <= m.data.data_ptr() < top else "n" if _heap()[0] <= m.data.data_ptr() < _heap()[1] else "m" for m in mats]
    print(
        f"heap when loaded: {(top - lo) / 2**20:.0f} MiB; per layer: {' '.join(''.join(where[i : i + 4]) for i in range(0, len(where), 4))}"
    )
    spans = [(m.data.data_ptr(), m.data.numel() * m.data.element_size()) for m in mats]
    span = max(p + n for p, n in spans) - min(p for p, _ in spans)
    print(f"layers: {span / 2**20:.1f} MiB spanned for {sum(n for _, n in spans) / 2**20:.1f} MiB of matrices", flush=True)


def _block(nbytes: int, huge: bool):
    """A fresh private mapping of nbytes at a 2 MiB boundary, huge pages asked for or not (before its first touch)."""
    import torch

    mapping = mmap.mmap(-1, nbytes + 2 * HUGE, flags=mmap.MAP_PRIVATE)
    block = torch.frombuffer(mapping, dtype=torch.uint8)
    start = -block.data_ptr() % HUGE
    mapping.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE, start, nbytes + HUGE)
    return block[start : start + nbytes]


def _copied(layers, head, huge: bool):
    """The same packed matrices, their bytes copied into one fresh block, page after page in pass order."""
    mats = _matrices(layers, head)
    sizes = [-(-m.data.numel() * m.data.element_size() // 4096) * 4096 for m in mats]
    block, at, new = _block(sum(sizes), huge), 0, {}
    for m, size in zip(mats, sizes):
        c = copy.copy(m)
        c.checked = None
        c.data = block[at : at + m.data.numel() * m.data.element_size()].view(m.data.dtype)
        c.data.copy_(m.data)
        new[id(m)], at = c, at + size
    return [tuple(new.get(id(w), w) for w in layer) for layer in layers], (head[0], new[id(head[1])])


def relayout(rounds: int, burst: int) -> None:
    import torch

    import engine.model.cpukernels as ck

    pair, cache, ids = _loaded()
    get, put = _native(pair, cache)
    variants = {"as made": get()}
    variants |= {"fresh": _copied(*variants["as made"], huge=False), "huge": _copied(*variants["as made"], huge=True)}
    layer_call, calls = ck.layer, []

    def timed_layer(*args, **kw):
        start = time.perf_counter()
        layer_call(*args, **kw)
        calls.append(time.perf_counter() - start)

    ck.layer = timed_layer
    best, per_layer = {k: [] for k in variants}, {}
    with torch.inference_mode():
        for r in range(rounds):
            for name in list(variants) if r % 2 == 0 else list(variants)[::-1]:
                put(variants[name])
                times = []
                for _ in range(burst + 1):
                    calls.clear()
                    start = time.perf_counter()
                    cache.forward(ids)
                    times.append(time.perf_counter() - start)
                    cache.keep(cache.lengths - 1)
                    old = per_layer.get(name, [1.0] * len(calls))
                    per_layer[name] = [min(a, b) for a, b in zip(old, calls)]
                best[name].append(min(times[1:]) * 1e3)
    ck.layer = layer_call
    for name, got in best.items():
        ratio = statistics.median(b / a for a, b in zip(best["as made"], got))
        layers = [round(t * 1e6) for t in per_layer[name]]
        print(f"{name:8s} fastest {min(got):6.2f} ms  ÷ as made (median over rounds) {ratio:.3f}  layer calls, µs: {layers}")
    print("per round, ms:", json.dumps({k: [round(t, 2) for t in v] for k, v in best.items()}), flush=True)


def worker() -> None:
    import torch

    _, cache, ids = _loaded()
    print("ready", flush=True)
    with torch.inference_mode():
        for line in sys.stdin:
            times = []
            for _ in range(int(line) + 1):
                start = time.perf_counter()
                cache.forward(ids)
                times.append(time.perf_counter() - start)
                cache.keep(cache.lengths - 1)
            print(json.dumps(min(times[1:]) * 1e3), flush=True)


def _start(trees: list[Path], copies: int) -> list[tuple]:
    workers = []
    for c in range(copies):
        for tree in trees:
            cmd = [sys.executable, str(Path(__file__).resolve()), "worker"]
            env = dict(os.environ, PYTHONPATH=str(tree))
            p = subprocess.Popen(
                cmd, cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
            )
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a worker of {tree} did not start")
            workers.append((tree.name, c, p))
    return workers


def rounds(trees: list[Path], copies: int, n_rounds: int, burst: int) -> None:
    workers = _start(trees, copies)
    time.sleep(10)  # the loads' own work settles
    got = {(name, c): [] for name, c, _ in workers}
    with open("/work/bench.lock") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        began, load = time.strftime("%H:%M:%S"), os.getloadavg()[0]
        for r in range(n_rounds):
            order = workers[r % len(workers) :] + workers[: r % len(workers)]
            for name, c, p in order if r % 2 == 0 else order[::-1]:
                time.sleep(0.2)  # the last worker's threads stop spinning
                p.stdin.write(f"{burst}\n")
                p.stdin.flush()
                got[(name, c)].append(json.loads(p.stdout.readline()))
    for *_, p in workers:
        p.stdin.close()
        p.wait()
    print(f"{began}-{time.strftime('%H:%M:%S')}, load {load:.2f} at the start: {n_rounds} rounds x {burst} passes")
    names = [t.name for t in trees]
    for name in names:
        print(f"{name}: fastest pass per process {[round(min(got[(name, c)]), 2) for c in range(copies)]} ms")
    for i, base in enumerate(names):
        for name in names[i + 1 :]:
            ratios = [a / b for c in range(copies) for a, b in zip(got[(name, c)], got[(base, c)])]
            below = sum(x < 1 for x in ratios)
            print(f"{name} ÷ {base}: median of the rounds' ratios {statistics.median(ratios):.3f} ({below} of {len(ratios)} below 1)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["layout", "relayout", "rounds", "worker"])
    ap.add_argument("--trees", default="", help="rounds: the worktrees, comma-separated")
    ap.add_argument("--copies", type=int, default=3, help="rounds: worker processes per tree")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--burst", type=int, default=15, help="one-token passes per variant or worker and round")
    args = ap.parse_args()
    if args.what == "layout":
        layout()
    elif args.what == "relayout":
        relayout(args.rounds, args.burst)
    elif args.what == "rounds":
        rounds([Path(t).resolve() for t in args.trees.split(",")], args.copies, args.rounds, args.burst)
    else:
        worker()


if __name__ == "__main__":
    main()
