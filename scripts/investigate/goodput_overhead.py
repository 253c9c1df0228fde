"""What goodput's own pricing costs a step, with the caches as a run leaves them (issue 42).

In one process, batch 1, the EAGLE head: a goodput run with trees allowed (depth <= 6, 32 nodes, top-4) on held-out
prompts captures the policy and the largest tree it cut; then `tree_size` (the cut and the curves it learns) and
`depth` (the choice of plain, chain or tree) are timed one call at a time, each after a sweep over a 256 MB tensor
that stands in for a pass streaming the weights through the caches, and again back to back (warm). Right after a
pass, Python and numpy code runs cold: that is the cost a run pays. Not a speed benchmark of the decode loop.

    .venv/bin/python scripts/investigate/goodput_overhead.py --prompts 20:22
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from engine import DecodeConfig, generate, load_pair
from engine.decoding import goodput
from engine.decoding.policies import PolicyContext

ROOT = Path(__file__).resolve().parents[2]


def capture(pair, prompts: list[str], tokens: int):
    """(policy, tree): the goodput policy of the last run and the largest tree it cut."""
    seen, original = {}, goodput.GoodputDepth.tree_size

    def tree_size(self, tree):
        if tree.nodes >= seen.get("nodes", 0):
            seen.update(policy=self, tree=tree, nodes=tree.nodes)
        return original(self, tree)

    goodput.GoodputDepth.tree_size = tree_size
    try:
        cfg = DecodeConfig(drafter="eagle", depth=6, tree_nodes=32, tree_topk=4, policy="goodput", max_new_tokens=tokens)
        for prompt in prompts:
            generate(pair, [prompt], cfg)
    finally:
        goodput.GoodputDepth.tree_size = original
    seen["policy"].memory_key = None  # timing calls write nothing to the warm store
    return seen["policy"], seen["tree"]


def timed(call, sweep: torch.Tensor | None, n: int) -> float:
    """Median µs of `call` over n calls, each after a sweep over `sweep` (None: back to back)."""
    call()
    times = []
    for _ in range(n):
        if sweep is not None:
            sweep.sum()
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", default="20:22", help="a slice of assets/heldout_prompts.json")
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--calls", type=int, default=40)
    args = ap.parse_args()
    lo, hi = (int(x) for x in args.prompts.split(":"))
    prompts = json.loads((ROOT / "assets" / "heldout_prompts.json").read_text())["prompts"][lo:hi]
    policy, tree = capture(load_pair(), prompts, args.tokens)
    kept = ([list(c) for c in policy.tree_gain], policy.tree_steps, policy.last_choice)

    def cut():  # the cut leaves the policy as it found it, so every call prices the same state
        policy.tree_size(tree)
        policy.tree_gain, policy.tree_steps, policy.last_choice = [list(c) for c in kept[0]], kept[1], kept[2]

    ctx = PolicyContext(step=5, batch=1, base_depth=6, mean_accepted=2.0, last_depth=4, last_all_accepted=False)
    sweep = torch.randn(64 * 1024 * 1024)  # 256 MB
    print(f"a {tree.nodes}-node tree of depth {tree.depth}; median µs per call over {args.calls}")
    for name, call in (("tree_size", cut), ("depth", lambda: policy.depth(ctx))):
        print(f"  {name:9s} after a 256 MB sweep {timed(call, sweep, args.calls):6.0f}   back to back {timed(call, None, args.calls):6.0f}")


if __name__ == "__main__":
    main()
