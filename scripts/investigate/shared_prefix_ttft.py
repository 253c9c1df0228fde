"""Time to the first token with and without a shared prefix: B rows, each the shipped document (about N tokens) and its
own question (engine/bench/context.py), prefilled once and copied into every row (DecodeConfig.share_prefix) or
prefilled in every row. Interleaved rounds; prints each lane's median and range and the ratio judged by the one rule.

    python scripts/investigate/shared_prefix_ttft.py --batch 8 --context 4096 --rounds 3 [--drafter eagle --depth 3]

ttft: the prefill step's end (the target's first token of every row; the drafter's prefill included);
first step: the end of the first decode step (a drafter that reads its prompt entries at its first draft pays there).
"""

from __future__ import annotations

import argparse
import statistics

from engine import DecodeConfig, generate, load_pair
from engine.bench.context import questions, with_context
from engine.verdict import judge


def lane(pair, prompts: list[str], cfg: DecodeConfig) -> tuple[float, float, int]:
    trace = generate(pair, prompts, cfg)
    decode = [s for s in trace.steps if s.kind == "decode"]
    return trace.summary["ttft_s"], decode[0].t_end_s if decode else float("nan"), trace.meta["shared_prefix"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--drafter", default="eagle")
    parser.add_argument("--depth", type=int, default=3, help="0: plain decoding (no drafter)")
    parser.add_argument("--dtype", default="auto")
    args = parser.parse_args()
    pair = load_pair(dtype=args.dtype)
    mode = dict(mode="speculative", depth=args.depth, drafter=args.drafter) if args.depth else dict(mode="autoregressive")
    prompts = with_context(pair, questions(args.batch), args.context, 4 + args.depth + 1)
    tokens = [len(pair.encode_prompt(p)) for p in prompts]
    print(f"batch {args.batch}, prompts of {min(tokens)}-{max(tokens)} tokens, {pair.dtype_name}, {mode}")
    cfgs = {share: DecodeConfig(max_new_tokens=4, share_prefix=share, **mode) for share in (True, False)}
    generate(pair, prompts[:2], cfgs[True])  # warm-up: weights prepared, kernels loaded
    times = {share: [] for share in cfgs}
    for r in range(args.rounds):
        for share, cfg in cfgs.items():
            ttft, first, shared = lane(pair, prompts, cfg)
            times[share].append((ttft, first))
            print(
                f"round {r + 1} {'shared' if share else 'unshared':>8} (prefix {shared:>5}): ttft {ttft:6.2f} s, first step {first:6.2f} s"
            )
    for share, rows in times.items():
        for i, name in enumerate(("ttft", "first step")):
            values = [row[i] for row in rows]
            lane_name = "shared" if share else "unshared"
            print(f"{lane_name:>8} {name:<10} median {statistics.median(values):6.2f} s [{min(values):.2f}-{max(values):.2f}]")
    speed = judge([1 / t for t, _ in times[True]], [1 / t for t, _ in times[False]])  # rates: higher is better
    print(f"shared prefill: {speed.words('shared', 'unshared')} (time to first token)")


if __name__ == "__main__":
    main()
