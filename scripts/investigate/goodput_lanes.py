"""goodput against the fixed chains it chooses between, at batch 1, with many tokens per lane (issue 31).

width_goodput.py compares every shape over few tokens per round; this one takes the fixed chains of depth 2-4,
the 8-node tree (top-4, depth 4: the best fixed tree on this CPU since the native pass takes 9 tokens in one
register tile, 2026-12-02) and both goodput lanes over 8 held-out prompts x 64 tokens per round, the lanes
interleaved, and prints per round and over all rounds each lane's tokens/s, its tokens per step, the mean
draft, verify, overhead and policy ms of its steps, and the shapes it ran. The sum over all rounds is the
comparison: ~2,500 tokens per lane average out much of a 2-core machine's noise.

    flock /work/bench.lock .venv/bin/python scripts/investigate/goodput_lanes.py 5      # rounds
"""

from __future__ import annotations

import sys
import time
from collections import Counter

from engine import DecodeConfig, generate, load_pair
from engine.bench.prompts import prompt_set_list


def rate(runs) -> float:
    return sum(len(row.emitted) for trace, _ in runs for step in trace.steps for row in step.seqs) / sum(wall for _, wall in runs)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    pair = load_pair()
    prompts = prompt_set_list("heldout")[:8]
    e = dict(drafter="eagle", max_new_tokens=64)
    cfgs = {
        "chain2": DecodeConfig(depth=2, **e),
        "chain3": DecodeConfig(depth=3, **e),
        "chain4": DecodeConfig(depth=4, **e),
        "tree8": DecodeConfig(depth=4, tree_nodes=8, tree_topk=4, **e),
        "gp_chain": DecodeConfig(depth=4, policy="goodput", **e),
        "gp_tree": DecodeConfig(depth=4, policy="goodput", tree_nodes=32, tree_topk=4, **e),
    }
    for cfg in cfgs.values():  # warm-up: pass curve, goodput's first runs
        for p in prompts[:2]:
            generate(pair, [p], cfg)
    res = {k: [] for k in cfgs}
    for r in range(rounds):
        for name, cfg in cfgs.items():
            for p in prompts:
                t = time.perf_counter()
                trace = generate(pair, [p], cfg)
                res[name].append((trace, time.perf_counter() - t))
        print(f"round {r + 1}", {k: round(rate(v[-len(prompts) :]), 1) for k, v in res.items()}, flush=True)
    for name, runs in res.items():
        steps = [s for trace, _ in runs for s in trace.steps if s.kind == "decode"]
        toks = sum(len(row.emitted) for s in steps for row in s.seqs)

        def mean(field, steps=steps):
            return sum(getattr(s, field) for s in steps) / len(steps)

        shapes = Counter((s.depth, s.tree_nodes) for s in steps)
        print(
            f"{name:8s} tok/s {rate(runs):6.1f} tok/step {toks / len(steps):.2f} steps {len(steps)} mean draft {mean('draft_ms'):.2f} "
            f"verify {mean('verify_ms'):.2f} over {mean('overhead_ms'):.2f} pol {mean('policy_ms'):.3f} "
            f"shapes (depth, tree nodes) {shapes.most_common(4)}"
        )


if __name__ == "__main__":
    main()
