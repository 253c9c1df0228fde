"""Width by measured cost (issue 31, item 3): the goodput policy choosing per step between plain, a chain and
an EAGLE-2 tree cut to n nodes, against plain decoding, fixed chains and fixed trees, with the EAGLE head on
held-out prompts, at batch 1 and batch 16, in ONE interleaved run.

    flock /work/bench.lock env SPECLAB_THREADS=1 .venv/bin/python scripts/investigate/width_goodput.py --rounds 5
    flock /work/bench.lock env SPECLAB_THREADS=1 .venv/bin/python scripts/investigate/width_goodput.py \\
        --rounds 2 --max-new-tokens 16 --sequential 2                  # a smoke run

Every contender is warmed up once (goodput's first run also measures the pass-cost curve, or reads it from
the cache); then each round runs every contender once per batch size, in turn, the order rotated each round,
so a shared machine's drift hits them alike. Batch 1 decodes `--sequential` held-out prompts one after
another (their tokens over their decode time); batch 16 decodes 16 held-out prompts as one batch. Per
contender: the median tokens/s over rounds, min-max, the speedup over plain, and whether its output equals
plain decoding's (greedy; in bfloat16 lanes may part after a near-tie). Each round prints the 1-minute load
average. The goal stated by the issue: goodput >= 0.97 x the best of the others at batch 1 and 16, and
>= 2.0 x plain at batch 1 with EAGLE. Goodput warm-starts from the previous run of the same settings in this
process (engine/decoding/warmstart.py), as it does in the app: only its first warm-up run starts from the priors.

Pricing check (batch 1): the fixed 32-node tree's steps replayed through goodput's calibration
(engine.decoding.tree_value.pricing_check): for cut sizes 1..32 the expected accepted nodes against the measured
ones; and goodput's own tree steps, each at the size it verified.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from engine import DecodeConfig, generate, load_pair
from engine.bench.prompts import batch_prompts, prompt_set_list
from engine.decoding.tree_value import pricing_check

GOODPUT = "goodput tree 32/4"
PRICED = ("tree 32/4", GOODPUT)  # batch-1 contenders whose trees the pricing check replays


def contenders(max_new_tokens: int) -> dict[str, DecodeConfig]:
    """Plain, fixed chains of depth 2-4, fixed trees of 8/16/32 nodes (top-4, depth 4), goodput over chains
    only, and goodput over plain / chains / trees up to 32 nodes."""
    eagle = dict(mode="speculative", drafter="eagle", max_new_tokens=max_new_tokens)
    out = {"plain": DecodeConfig(mode="autoregressive", max_new_tokens=max_new_tokens)}
    for k in (2, 3, 4):
        out[f"chain k={k}"] = DecodeConfig(depth=k, **eagle)
    for n in (8, 16, 32):
        out[f"tree {n}/4"] = DecodeConfig(depth=4, tree_nodes=n, tree_topk=4, **eagle)
    out["goodput chain"] = DecodeConfig(depth=4, policy="goodput", **eagle)
    out[GOODPUT] = DecodeConfig(depth=4, policy="goodput", tree_nodes=32, tree_topk=4, **eagle)
    return out


def run_once(pair, prompts: list[str], cfg: DecodeConfig, sequential: bool):
    """(tokens/s over the decode time, output ids, the traces)."""
    traces = [generate(pair, [p], cfg) for p in prompts] if sequential else [generate(pair, prompts, cfg)]
    tokens = sum(t.summary["new_tokens"] for t in traces)
    wall = sum(t.summary["wall_s"] for t in traces)
    return tokens / wall, [o for t in traces for o in t.output_ids], traces


def shape_mix(traces) -> str:
    """How often a run's decode steps were plain, chains and trees (and the trees' mean size)."""
    steps = [s for t in traces for s in t.steps if s.kind == "decode"]
    trees = [s.tree_nodes for s in steps if s.tree_nodes is not None]
    chains = sum(1 for s in steps if s.tree_nodes is None and s.depth > 0)
    plain = len(steps) - chains - len(trees)
    mean_n = f", mean {statistics.mean(trees):.1f} nodes" if trees else ""
    return f"{plain} plain, {chains} chain, {len(trees)} tree steps{mean_n}"


def measure(pair, batches: list[int], cfgs: dict[str, DecodeConfig], rounds: int, sequential: int) -> dict:
    prompts = {b: prompt_set_list("heldout")[:sequential] if b == 1 else batch_prompts("heldout", b) for b in batches}
    for b in batches:
        for cfg in cfgs.values():  # warm-up (and goodput's pass-cost curve)
            generate(pair, prompts[b][:1], DecodeConfig.from_dict(cfg.to_dict() | {"max_new_tokens": 4}))
    rates = {b: {name: [] for name in cfgs} for b in batches}
    outputs, mixes, loads = {b: {} for b in batches}, {b: {} for b in batches}, []
    steps = {name: [] for name in PRICED}
    names = list(cfgs)
    for r in range(rounds):
        loads.append(os.getloadavg()[0])
        for b in batches:
            for name in names[r % len(names) :] + names[: r % len(names)]:
                rate, out, traces = run_once(pair, prompts[b], cfgs[name], sequential=b == 1)
                rates[b][name].append(rate)
                outputs[b][name] = out
                mixes[b][name] = shape_mix(traces)
                if b == 1 and name in PRICED:
                    steps[name] += [s for t in traces for s in t.steps]
        line = "  ".join(f"b{b} {name} {rates[b][name][-1]:.1f}" for b in batches for name in names)
        print(f"round {r + 1}/{rounds}  load(1m) {loads[-1]:.2f} at start  {line}", file=sys.stderr, flush=True)
    loads.append(os.getloadavg()[0])
    pricing = {name: pricing_check(s, sizes=(1, 2, 4, 8, 12, 16, 24, 32) if name == PRICED[0] else None) for name, s in steps.items()}
    return {"rates": rates, "outputs": outputs, "mixes": mixes, "load_avg": loads, "pricing": pricing}


def report(result: dict, batches: list[int]) -> list[str]:
    lines = []
    for b in batches:
        rates = result["rates"][b]
        med = {name: statistics.median(v) for name, v in rates.items()}
        plain_out = result["outputs"][b]["plain"]
        lines.append(f"batch {b}: median tok/s over {len(rates['plain'])} rounds (min-max), x plain, same output as plain")
        for name, values in rates.items():
            same = "yes" if result["outputs"][b][name] == plain_out else "NO"
            mix = f"   [{result['mixes'][b][name]}]" if name.startswith("goodput") else ""
            lines.append(
                f"  {name:<18} {med[name]:8.2f}  ({min(values):.2f}-{max(values):.2f})  x{med[name] / med['plain']:.2f}  {same}{mix}"
            )
        others = {n: m for n, m in med.items() if not n.startswith("goodput")}
        best = max(others, key=others.get)
        lines.append(
            f"  goodput / max(others) = {med[GOODPUT] / others[best]:.3f} (best other: {best})   "
            f"goodput / plain = {med[GOODPUT] / med['plain']:.2f}"
        )
    for name, table in result.get("pricing", {}).items():
        what = "cut to n" if name == PRICED[0] else "as verified"
        lines.append(f"pricing, batch 1, {name} ({what}): n: expected / measured accepted nodes per tree step (rows)")
        lines.append("  " + "  ".join(f"{n}: {p:.2f}/{m:.2f} ({rows})" for n, (p, m, rows) in table.items()))
    lines.append("load average (1m) at each round's start, then at the end: " + ", ".join(f"{x:.2f}" for x in result["load_avg"]))
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", default="1,16")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--sequential", type=int, default=8, help="held-out prompts decoded one after another at batch 1")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    p.add_argument("--device", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    pair = load_pair(dtype=args.dtype, device=args.device)
    if "eagle" not in pair.loaded:
        print("error: no EAGLE head for this target (assets/eagle/)", file=sys.stderr)
        return 2
    print(f"{pair.target_name}, {pair.dtype_name} on {pair.device}; {pair.loaded['eagle'].name}", flush=True)
    result = measure(pair, batches, contenders(args.max_new_tokens), args.rounds, args.sequential)
    print("\n".join(report(result, batches)), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({k: v for k, v in result.items() if k != "outputs"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
