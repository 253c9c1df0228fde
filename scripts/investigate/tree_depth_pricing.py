"""What goodput expects of a tree at each depth against what trees of that depth delivered (issue 42).

In one process, batch 1, the EAGLE head: goodput with trees allowed (depth <= 6, 32 nodes, top-4) on held-out prompts,
recording at every choice the best cut of each depth (`GoodputDepth.best_cut` over `tree_curve`): nodes, expected
tokens per step, expected ms per step, tokens per ms; then the steps goodput ran and a fixed 8-node depth-4 tree's
steps on the same prompts, by the depth of the tree each step verified: tokens per step, ms per step, tokens per ms.
Not a timing benchmark (one process): it sets the prices beside what the steps paid and returned.

    .venv/bin/python scripts/investigate/tree_depth_pricing.py --prompts 20:26
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
from pathlib import Path

from engine import DecodeConfig, generate, load_pair
from engine.decoding import goodput

ROOT = Path(__file__).resolve().parents[2]


def priced(log: list):
    """Wrap best_tree so that each choice records every depth's best cut: d -> (n, tokens, ms, tokens per ms)."""
    original = goodput.GoodputDepth.best_tree

    def best_tree(self, batch, depth):
        verify = self.verify_row(batch)
        per = {}
        for d in range(1, depth + 1):
            gain = [batch * g for g in self.tree_curve(d)]
            n, rate = self.best_cut(batch, gain, self.tree_draft(batch, d))
            ms = verify[n - 1] + self.tree_draft(batch, d) + self.step_ms.get(2, 0.0)
            per[d] = (n, batch + gain[n - 1], ms, rate)
        log.append(per)
        return original(self, batch, depth)

    goodput.GoodputDepth.best_tree = best_tree


def steps_by_depth(trace: dict, label, out: dict) -> None:
    for s in trace["steps"]:
        if s["kind"] == "decode":
            out[(label, s["depth"])].append((len(s["seqs"][0]["emitted"]), (s["t_end_s"] - s["t_start_s"]) * 1000))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", default="20:26", help="a slice of assets/heldout_prompts.json")
    ap.add_argument("--tokens", type=int, default=48)
    args = ap.parse_args()
    lo, hi = (int(x) for x in args.prompts.split(":"))
    prompts = json.loads((ROOT / "assets" / "heldout_prompts.json").read_text())["prompts"][lo:hi]
    pair, log, measured = load_pair(), [], collections.defaultdict(list)
    priced(log)
    shapes = {
        "goodput": DecodeConfig(drafter="eagle", depth=6, tree_nodes=32, tree_topk=4, policy="goodput", max_new_tokens=args.tokens),
        "tree of 8": DecodeConfig(drafter="eagle", depth=4, tree_nodes=8, tree_topk=4, max_new_tokens=args.tokens),
    }
    for label, cfg in shapes.items():
        for p in prompts:
            steps_by_depth(generate(pair, [p], cfg).to_dict(), label, measured)
    print("goodput's prices, median over its choices after the run's first three: depth, nodes, tokens, ms, tokens/ms")
    for d in range(1, 7):
        rows = [choice[d] for choice in log[3:] if d in choice]
        if rows:
            cells = [statistics.median(r[i] for r in rows) for i in range(4)]
            print(f"  {d}  {cells[0]:4.0f}  {cells[1]:5.2f}  {cells[2]:6.2f}  {cells[3]:.3f}")
    print("measured steps: shape, depth verified, steps, tokens/step, ms/step, tokens/ms")
    for (label, d), rows in sorted(measured.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        tokens, ms = sum(t for t, _ in rows), sum(m for _, m in rows)
        print(f"  {label:9s} {d}  {len(rows):3d}  {tokens / len(rows):5.2f}  {ms / len(rows):6.2f}  {tokens / ms:.3f}")


if __name__ == "__main__":
    main()
