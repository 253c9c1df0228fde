"""Step bookkeeping against the pass, batch 1, two source trees interleaved (issue 42): plain decoding, the
n-gram lookup on copy-this-text prompts and the EAGLE chain of 3, each tree's engine in its own processes.

Each round starts one process per tree, alternating (so a shared machine's drift hits both alike); a process
loads the pair, warms every lane up and decodes once per lane: plain and n-gram (depth 4) over the extractive
prompts, plain and EAGLE (chain of 3) over held-out prompts. It reports tokens/s from the trace's clock and
the decode steps' mean draft / verify / overhead ms. Prints medians over rounds, speculative / plain, this tree
against the other, and whether every lane's tokens equal plain decoding's. Run the whole thing under the lock:

    git worktree add /tmp/base f1737f4
    flock /work/bench.lock .venv/bin/python scripts/investigate/step_bench.py --trees /tmp/base,. --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

LANES = {  # name: (prompt set, prompts, new tokens, DecodeConfig options)
    "plain_copy": ("extractive", 2, 96, dict(mode="autoregressive")),
    "ngram_copy": ("extractive", 2, 96, dict(drafter="ngram", depth=4)),
    "plain_heldout": ("heldout", 3, 48, dict(mode="autoregressive")),
    "eagle3_heldout": ("heldout", 3, 48, dict(drafter="eagle", depth=3)),
}
RATIOS = (("ngram_copy", "plain_copy"), ("eagle3_heldout", "plain_heldout"))


def one_process() -> dict:
    """Every lane once, after a warm-up each, in this process's engine."""
    from engine import DecodeConfig, generate, load_pair
    from engine.bench.prompts import prompt_set_list

    pair = load_pair()
    out = {}
    for name, (prompt_set, n, tokens, options) in LANES.items():
        cfg = DecodeConfig(max_new_tokens=tokens, **options)
        prompts = prompt_set_list(prompt_set)[:n]
        generate(pair, prompts[:1], cfg)
        traces = [generate(pair, [p], cfg) for p in prompts]
        steps = [s for t in traces for s in t.steps if s.kind == "decode"]
        out[name] = {
            "tokens_per_s": sum(t.summary["new_tokens"] for t in traces) / sum(t.summary["wall_s"] for t in traces),
            **{f: sum(getattr(s, f) for s in steps) / len(steps) for f in ("draft_ms", "verify_ms", "overhead_ms")},
            "tokens_per_step": sum(len(r.emitted) for s in steps for r in s.seqs) / len(steps),
            "outputs": [t.output_ids for t in traces],
            "engine": __import__("engine").__file__,
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--trees", default="/tmp/base,.", help="comma-separated source trees (the first is the baseline)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--one", action="store_true", help="one process's lanes as JSON (what each round starts)")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    if args.one:
        print(json.dumps(one_process()))
        return
    trees = [os.path.abspath(t) for t in args.trees.split(",")]
    runs = {t: [] for t in trees}
    for r in range(args.rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            env = dict(os.environ, PYTHONPATH=tree)
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--one"], env=env, cwd=tree, capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(done.stderr[-2000:])
            runs[tree].append(json.loads(done.stdout.strip().splitlines()[-1]))
            line = ", ".join(f"{k} {v['tokens_per_s']:.1f}" for k, v in runs[tree][-1].items())
            print(f"round {r + 1} {tree}: {line}; load {os.getloadavg()[0]:.2f}", flush=True)
    med = {t: {k: {f: statistics.median(run[k][f] for run in runs[t]) for f in FIELDS} for k in LANES} for t in trees}
    for t in trees:
        print(f"\n{t} (engine {runs[t][0]['plain_copy']['engine']}), medians of {args.rounds}:")
        for k in LANES:
            m = med[t][k]
            print(
                f"  {k:15s} {m['tokens_per_s']:6.1f} tok/s  draft {m['draft_ms']:.2f}  verify {m['verify_ms']:.2f}  "
                f"overhead {m['overhead_ms']:.2f} ms/step  {m['tokens_per_step']:.2f} tok/step"
            )
        for a, b in RATIOS:
            print(f"  {a} / {b}: {med[t][a]['tokens_per_s'] / med[t][b]['tokens_per_s']:.2f}x")
        same = all(run[a]["outputs"] == run[b]["outputs"] for run in runs[t] for a, b in RATIOS)
        print(f"  speculative tokens == plain tokens in every round: {same}")
    base, new = trees[0], trees[-1]
    print(f"\n{new} / {base}:")
    for k in LANES:
        b, n = med[base][k], med[new][k]
        print(
            f"  {k:15s} tok/s {n['tokens_per_s'] / b['tokens_per_s']:.3f}x  "
            f"overhead {b['overhead_ms']:.2f} -> {n['overhead_ms']:.2f} ms/step"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"medians": med, "runs": runs}, f, indent=1)


FIELDS = ("tokens_per_s", "draft_ms", "verify_ms", "overhead_ms", "tokens_per_step")

if __name__ == "__main__":
    main()
