"""Both model drafters (the distilled draft model and the EAGLE head) on the same held-out prompts, in one
process, one after the other: batch 1, several depths, each cell decoding N prompts in sequence.

    .venv/bin/python scripts/investigate/bench_drafters.py --depths 1,2,3,4,5,6 --sequential 8 --repeats 3 --json out.json
    .venv/bin/python scripts/investigate/bench_drafters.py --depths 4,6 --confidence 0,0.2,0.3 --model-depths 2,3 --sequential 8

Each drafter's grid has its own AR cells (medians of `--repeats`), so each speedup divides by an AR
measured minutes before it: on a machine that drifts, compare speedups, not raw tokens/s across grids.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine import load_pair
from engine.bench.harness import bench, format_table


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--depths", default="1,2,3,4,5,6")
    p.add_argument("--model-depths", default=None, help="depths for the draft model (default: --depths)")
    p.add_argument("--prompts", default="heldout", choices=["chat", "extractive", "heldout"])
    p.add_argument("--sequential", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--eagle", default="default", help="EAGLE head folder (default: the shipped one)")
    p.add_argument("--drafters", default="eagle,model")
    p.add_argument("--confidence", default="0", help="comma-separated confidence thresholds, each at every depth")
    p.add_argument("--model-confidence", default=None, help="thresholds for the draft model (default: --confidence)")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    pair = load_pair(eagle=args.eagle)
    results = {}
    for drafter in args.drafters.split(","):
        depths = args.model_depths if drafter == "model" and args.model_depths else args.depths
        conf = args.model_confidence if drafter == "model" and args.model_confidence else args.confidence
        log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
        res = bench(
            pair,
            [1],
            [int(d) for d in depths.split(",")],
            drafter=drafter,
            prompt_set=args.prompts,
            max_new_tokens=args.max_new_tokens,
            repeats=args.repeats,
            sequential=args.sequential,
            log=log,
            confidences=[float(c) for c in conf.split(",")],
        )
        results[drafter] = res
        print(format_table(res), flush=True)
        print(flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
