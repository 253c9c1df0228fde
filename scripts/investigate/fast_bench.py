"""Batch-1 tokens/s, interleaved in one run: transformers' generate() against SpecLab's plain decoding and
its EAGLE speculation, each on the "torch" backend and on a fast one ("native" or "fused"; engine/model/backend.py).

Each round runs every contender once over the same held-out prompts (one after another, batch 1), so a
shared machine's drift hits them alike; each has a warm-up (and any compilation) first. Prints medians,
min and max over rounds, ratios of medians, whether the fast path's tokens equal the eager path's, and
the load average after every round.

  SPECLAB_THREADS=1 python scripts/investigate/fast_bench.py --rounds 5 --prompts 3 --max-new-tokens 48
  python scripts/investigate/fast_bench.py --rounds 3 --tree-nodes 8     # with an EAGLE-2 tree of 8 nodes too
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics

import torch


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--prompts", type=int, default=3)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--fast", default="native", help="the backend compared with torch (engine/model/backend.py): native or fused")
    p.add_argument("--tree-nodes", type=int, default=0, help="also an EAGLE-2 tree of this many nodes (depth 4, top-4), fast only")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    from engine import DecodeConfig, load_pair
    from engine.bench.harness import backend_lane, hf_generate
    from engine.bench.prompts import prompt_set_list
    from engine.bench.rates import rate_lines, ratio_lines

    pair = load_pair()
    prompts = prompt_set_list("heldout")[: args.prompts]
    m = args.max_new_tokens
    ar = DecodeConfig(mode="autoregressive", max_new_tokens=m)
    spec = DecodeConfig(depth=args.depth, drafter="eagle", max_new_tokens=m)

    ours = functools.partial(backend_lane, pair)

    contenders = {
        "hf_generate": lambda ps, n: hf_generate(pair, ps, n, 1),
        "ar_eager": ours(ar, "torch"),
        "ar_fast": ours(ar, args.fast),
        "eagle_eager": ours(spec, "torch"),
        "eagle_fast": ours(spec, args.fast),
    }
    if args.tree_nodes:
        tree = DecodeConfig(depth=4, drafter="eagle", tree_nodes=args.tree_nodes, tree_topk=4, max_new_tokens=m)
        contenders["eagle_tree_fast"] = ours(tree, args.fast)
    print(f"{pair.target_name}, {pair.dtype_name}, threads {torch.get_num_threads()}, load {os.getloadavg()}", flush=True)
    for run in contenders.values():
        run(prompts[:1], 8)
    rates = {k: [] for k in contenders}
    last = {}
    for r in range(args.rounds):
        for key, run in contenders.items():
            last[key] = run(prompts, m)
            rates[key].append(last[key]["tokens_per_s"])
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in rates.items()) + f"; load {os.getloadavg()}", flush=True)
    for line in rate_lines(rates):
        print(line)
    pairs = [
        ("ar_fast", "hf_generate"),
        ("ar_eager", "hf_generate"),
        ("ar_fast", "ar_eager"),
        ("eagle_fast", "ar_fast"),
        ("eagle_eager", "ar_eager"),
    ] + ([("eagle_tree_fast", "ar_fast")] if args.tree_nodes else [])
    for line in ratio_lines(rates, pairs):
        print(line)
    ratios = {f"{a} / {b}": statistics.median(rates[a]) / statistics.median(rates[b]) for a, b in pairs}
    same = {
        "ar_fast == ar_eager": last["ar_fast"]["outputs"] == last["ar_eager"]["outputs"],
        "ar_eager == hf_generate": last["ar_eager"]["outputs"] == last["hf_generate"]["outputs"],
        "eagle_fast == ar_fast": last["eagle_fast"]["outputs"] == last["ar_fast"]["outputs"],
    } | ({"eagle_tree_fast == ar_fast": last["eagle_tree_fast"]["outputs"] == last["ar_fast"]["outputs"]} if args.tree_nodes else {})
    print("same tokens:", same, f"(dtype {pair.dtype_name}); load after {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rates": rates, "ratios": ratios, "same": same, "load_after": os.getloadavg()}, f, indent=1)


if __name__ == "__main__":
    main()
