"""Where a speculative step's milliseconds go, at batch 1: the drafting's parts, the verify pass and the bookkeeping.

Wraps the engine's own functions with timers (about a microsecond each) and decodes held-out prompts with one
shape (default: the EAGLE-2 tree of 8 nodes, depth 4, top-4), after two warm-up runs. Prints per decode step the
trace's draft / verify / overhead split and, for each wrapped function, its ms per step, calls per step and ms per
call. Nested functions are counted in their callers too (`propose` holds everything drafted). The drafter's parts
are timed only inside `propose`, so the target's passes do not mix in. docs/measurements.md quotes it:

    flock /work/bench.lock .venv/bin/python scripts/investigate/step_breakdown.py            # tree of 8 nodes
    flock /work/bench.lock .venv/bin/python scripts/investigate/step_breakdown.py --chain 3  # chain of 3
    flock /work/bench.lock .venv/bin/python scripts/investigate/step_breakdown.py --drafter ngram --chain 4 \
        --prompt-set extractive --max-new-tokens 96                                             # copy prompts
"""

from __future__ import annotations

import argparse
import collections
import functools
import time

from engine import DecodeConfig, generate, load_pair
from engine.bench.prompts import prompt_set_list
from engine.decoding import decode
from engine.drafters import eagle, ngram, tree
from engine.model import cpukernels, eagle_head, kvcache, static_cache, static_tree

TOTAL = collections.defaultdict(float)
CALLS = collections.Counter()
DRAFTING = [False]  # inside EagleDrafter.propose


def timed(owner, name: str, label: str, drafting_only: bool = False, skip=None) -> None:
    """Time owner.name under `label` (if it has one: an older engine may not); drafting_only: only inside
    `propose`; skip(args): calls not to time."""
    inner = getattr(owner, name, None)
    if inner is None:
        return

    @functools.wraps(inner)
    def wrapper(*args, **kwargs):
        if (drafting_only and not DRAFTING[0]) or (skip is not None and skip(args)):
            return inner(*args, **kwargs)
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            TOTAL[label] += time.perf_counter() - start
            CALLS[label] += 1

    setattr(owner, name, wrapper)


def wrap_propose() -> None:
    inner = eagle.EagleDrafter.propose

    def propose(self, *args, **kwargs):
        DRAFTING[0] = True
        try:
            return inner(self, *args, **kwargs)
        finally:
            DRAFTING[0] = False

    eagle.EagleDrafter.propose = propose
    timed(eagle.EagleDrafter, "propose", "draft: all (propose)")


def instrument() -> None:
    wrap_propose()
    timed(static_cache.StaticRaggedCache, "forward", "draft: root pass (cache.forward)", drafting_only=True)
    timed(static_tree, "forward_tree", "draft: tree levels (forward_tree)", drafting_only=True)
    timed(cpukernels, "layer", "draft: the head's layer (native call)", drafting_only=True)
    timed(eagle_head.EagleRunner, "inputs", "draft: fc([embed; feature]) (runner.inputs)")
    timed(eagle_head.EagleRunner, "project", "draft: logits over the draft vocabulary (project)")
    timed(tree.TreeBuilder, "_children", "draft: top-k children (TreeBuilder._children)")
    timed(tree.TreeBuilder, "tree", "draft: the kept nodes (TreeBuilder.tree)")
    step = next(v for v in vars(decode).values() if isinstance(v, type) and hasattr(v, "roll_back"))
    prefill = lambda args: isinstance(args[1], list)  # noqa: E731  (the prompts' pass: not a decode step's)
    timed(step, "target_pass", "verify: the target's pass (target_pass)", skip=prefill)
    timed(decode, "verify_tree", "overhead: tree acceptance (verify_tree)")
    timed(decode, "verify", "overhead: chain acceptance (verify)")
    for name in ("roll_back", "append", "cut_tree", "choose_depth", "wasted_flops", "make_step"):
        timed(step, name, f"overhead: {name}")
    timed(eagle.EagleDrafter, "commit", "overhead: drafter.commit")
    timed(ngram.NgramDrafter, "propose", "draft: n-gram lookup (propose)")
    timed(kvcache.RaggedCache, "keep", "overhead: roll-back in a cache (keep)")
    timed(kvcache.RaggedCache, "drop_last", "overhead: roll-back in a cache (drop_last)")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--chain", type=int, default=0, help="a chain of this depth instead of the tree")
    p.add_argument("--drafter", default="eagle", choices=("eagle", "ngram"), help="ngram: a chain only (give --chain)")
    p.add_argument("--prompt-set", default="heldout", help="heldout, chat or extractive (copy-this-text prompts)")
    p.add_argument("--prompts", type=int, default=6)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=48)
    args = p.parse_args()
    pair = load_pair()
    prompts = prompt_set_list(args.prompt_set)[: args.prompts]
    shape = dict(depth=args.chain) if args.chain else dict(depth=4, tree_nodes=8, tree_topk=4)
    cfg = DecodeConfig(drafter=args.drafter, max_new_tokens=args.max_new_tokens, **shape)
    for p_ in prompts[:2]:
        generate(pair, [p_], cfg)
    instrument()
    steps = tokens = 0
    split = [0.0, 0.0, 0.0]
    for _ in range(args.rounds):
        for p_ in prompts:
            trace = generate(pair, [p_], cfg)
            for s in trace.steps:
                if s.kind == "decode":
                    steps += 1
                    tokens += sum(len(row.emitted) for row in s.seqs)
                    split = [split[0] + s.draft_ms, split[1] + s.verify_ms, split[2] + s.overhead_ms]
    print(f"{shape}: {steps} decode steps, {tokens / steps:.2f} tokens per step")
    print(f"trace per step: draft {split[0] / steps:.2f} ms, verify {split[1] / steps:.2f} ms, overhead {split[2] / steps:.2f} ms")
    for label in sorted(TOTAL, key=lambda k: (k.split(":")[0], -TOTAL[k])):
        ms = TOTAL[label] * 1000
        print(f"{label:55s} {ms / steps:6.3f} ms/step {CALLS[label] / steps:5.2f} calls/step {ms / CALLS[label]:6.3f} ms/call")


if __name__ == "__main__":
    main()
