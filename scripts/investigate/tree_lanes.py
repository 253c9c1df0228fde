"""Plain, EAGLE chains and EAGLE-2 trees of 8 / 16 / 24 nodes and goodput over trees, at batch 1, one process.

Each lane decodes 6 held-out prompts x 48 tokens per round (after a warm-up of two), the lanes in turn; it
prints per lane the tokens/s over all rounds, the ratio to plain decoding in the same process, tokens per
decode step and the mean draft, verify and overhead ms of a step. Run it in alternating processes of two
checkouts to compare code versions (docs/measurements/cpu-epyc-pass-past-8-tokens-2026-12-02.txt):

    flock /work/bench.lock .venv/bin/python scripts/investigate/tree_lanes.py 1      # rounds
"""

from __future__ import annotations

import sys
import time

from engine import DecodeConfig, generate, load_pair
from engine.bench.prompts import prompt_set_list


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    pair = load_pair()
    prompts = prompt_set_list("heldout")[:6]
    e = dict(max_new_tokens=48)
    cfgs = {
        "plain": DecodeConfig(mode="autoregressive", **e),
        "chain3": DecodeConfig(depth=3, drafter="eagle", **e),
        "chain4": DecodeConfig(depth=4, drafter="eagle", **e),
        "tree8": DecodeConfig(depth=4, drafter="eagle", tree_nodes=8, tree_topk=4, **e),
        "tree16": DecodeConfig(depth=5, drafter="eagle", tree_nodes=16, tree_topk=4, **e),
        "tree24": DecodeConfig(depth=5, drafter="eagle", tree_nodes=24, tree_topk=6, **e),
        "gp_tree": DecodeConfig(depth=5, policy="goodput", drafter="eagle", tree_nodes=32, tree_topk=4, **e),
    }
    for cfg in cfgs.values():  # warm-up: pass curve, goodput's first runs
        for p in prompts[:2]:
            generate(pair, [p], cfg)
    res = {k: [0, 0.0, 0, 0.0, 0.0, 0.0] for k in cfgs}  # tokens, wall s, steps, draft, verify, overhead ms
    for _ in range(rounds):
        for name, cfg in cfgs.items():
            for p in prompts:
                t = time.perf_counter()
                trace = generate(pair, [p], cfg)
                wall = time.perf_counter() - t
                steps = [s for s in trace.steps if s.kind == "decode"]
                acc = res[name]
                acc[0] += sum(len(row.emitted) for s in steps for row in s.seqs)
                acc[1] += wall
                acc[2] += len(steps)
                acc[3] += sum(s.draft_ms for s in steps)
                acc[4] += sum(s.verify_ms for s in steps)
                acc[5] += sum(s.overhead_ms for s in steps)
    plain = res["plain"][0] / res["plain"][1]
    for name, (n, wall, steps, draft, verify, over) in res.items():
        print(
            f"{name:8s} tok/s {n / wall:6.1f} x plain {n / wall / plain:.2f} tok/step {n / steps:.2f} "
            f"draft {draft / steps:.2f} verify {verify / steps:.2f} over {over / steps:.2f}"
        )


if __name__ == "__main__":
    main()
