"""Prepared weights (issue 43): what a product costs in each prepared form, the loaded pair's resident memory, and
plain and EAGLE decoding before and after, interleaved.

    products   one decoder layer's four products of SmolLM2-135M's shapes, and its head, in bfloat16, per pass size:
               the native kernels' packed matrices (any size), oneDNN's prepacked ones, F.linear over the
               concatenation, and three products over the separate q/k/v matrices (the choice of the native
               backend's form beyond cpukernels.LAYER_TOKENS tokens); --dtype float32: without oneDNN and the head
    rss        the default pair of the tree on PYTHONPATH (dtype auto) loaded, then one plain and one EAGLE run at batch 1 and at
               batch 16: the process's resident memory (VmRSS, VmHWM) after each, and the prepared copies
    compare    `python -m engine run` in each of two trees (e.g. main's commit and this branch), every run its own
               process under /work/bench.lock, rounds alternating which tree goes first; per lane (plain, EAGLE
               chain; batch 1, 16) the medians of decode-alone tokens/s, their ratio after/before and the spread

    flock /work/bench.lock python scripts/investigate/prepared_weights.py products
    PYTHONPATH=/work/wt-43-base flock /work/bench.lock python scripts/investigate/prepared_weights.py rss
    python scripts/investigate/prepared_weights.py compare --trees /work/wt-43-base,. --rounds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LANES = {"plain": ["--mode", "autoregressive"], "eagle": ["--drafter", "eagle", "--depth", "3"]}


def _timed(fn, x, reps: int) -> float:
    fn(x)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def products(dtype: str) -> None:
    import torch
    import torch.nn.functional as F

    from engine.model import cpukernels

    torch.manual_seed(0)
    h, inter, vocab, bf = 576, 1536, 49152, getattr(torch, dtype)
    wq, wk, wv, wo = (torch.randn(n, h, dtype=bf) for n in (576, 192, 192, 576))
    wg, wu, wd, head = (
        torch.randn(inter, h, dtype=bf),
        torch.randn(inter, h, dtype=bf),
        torch.randn(h, inter, dtype=bf),
        torch.randn(vocab, h, dtype=bf),
    )
    wqkv, wgu = torch.cat([wq, wk, wv]), torch.cat([wg, wu])
    pack = lambda w: torch.ops.mkldnn._reorder_linear_weight(w, batch_size=1)  # noqa: E731
    dnn = lambda x, w: torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], "")  # noqa: E731
    onednn = [pack(w) for w in (wqkv, wo, wgu, wd)] if bf == torch.bfloat16 else None  # oneDNN's prepacking: bfloat16
    native = [cpukernels.Packed(w, None, 1 << 30) for w in (wqkv, wo, wgu, wd)]
    forms = {
        "native": lambda x, m: [native[0](x), native[1](x), native[2](x), native[3](m)],
        "concat": lambda x, m: [F.linear(x, wqkv), F.linear(x, wo), F.linear(x, wgu), F.linear(m, wd)],
        "split": lambda x, m: [torch.cat([F.linear(x, w) for w in (wq, wk, wv)], -1), F.linear(x, wo)]
        + [torch.cat([F.linear(x, wg), F.linear(x, wu)], -1), F.linear(m, wd)],
    }
    if onednn is not None:
        forms["onednn"] = lambda x, m: [dnn(x, onednn[0]), dnn(x, onednn[1]), dnn(x, onednn[2]), dnn(m, onednn[3])]
    for tokens in (49, 64, 80, 128, 256, 512, 1024):
        x, mid = torch.randn(tokens, h, dtype=bf), torch.randn(tokens, inter, dtype=bf)
        got = {k: [] for k in forms}
        for _ in range(5):  # rounds interleave the forms
            for k, f in forms.items():
                got[k].append(_timed(lambda _, f=f, x=x, mid=mid: f(x, mid), None, 5))
        print(f"layer, {tokens:4d} tokens: " + "  ".join(f"{k} {statistics.median(v):6.3f} ms" for k, v in got.items()), flush=True)
    if onednn is None:
        return
    heads = {
        "native": cpukernels.Packed(head, head, 1 << 30),
        "onednn": lambda x, w=pack(head): dnn(x, w),
        "plain": lambda x: F.linear(x, head),
    }
    for tokens in (16, 49, 80, 128):
        x = torch.randn(tokens, h, dtype=bf)
        got = {k: [] for k in heads}
        for _ in range(3):
            for k, f in heads.items():
                got[k].append(_timed(f, x, 3))
        print(f"head,  {tokens:4d} tokens: " + "  ".join(f"{k} {statistics.median(v):6.3f} ms" for k, v in got.items()), flush=True)


def _memory() -> dict:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS", "VmHWM")):
            name, value = line.split(":")
            fields[name] = round(int(value.split()[0]) / 1024, 1)  # MiB
    return fields


def rss(tokens: int) -> None:
    import gc

    import torch

    import engine
    from engine import DecodeConfig, generate, load_pair

    print(f"engine: {engine.__file__}", flush=True)  # PYTHONPATH=<tree> measures that tree
    prompts = json.loads((ROOT / "assets" / "heldout_prompts.json").read_text())["prompts"]
    pair = load_pair()
    print(json.dumps({"after": "load", "dtype": str(pair.dtype)} | _memory()), flush=True)
    for batch in (1, 16):
        for lane, cfg in (("plain", {"mode": "autoregressive"}), ("eagle", {"drafter": "eagle", "depth": 3})):
            generate(pair, prompts[:batch], DecodeConfig(max_new_tokens=tokens, **cfg))
            gc.collect()
            print(json.dumps({"after": f"{lane} batch {batch}"} | _memory()), flush=True)
    try:
        from engine.model.prepared import lookup
    except ImportError:  # before issue 43: nothing to list
        return
    for name, model in (("target", pair.target), ("draft", pair.weights("draft")), ("eagle", pair.weights("eagle").lean)):
        weights = lookup(model)
        sizes = {k: round(v / 2**20, 1) for k, v in (weights.copies() if weights else {}).items()}
        print(json.dumps({"prepared": name, "MiB": sizes}), flush=True)
    del torch


def _run(tree: Path, lane: str, prompts: list[str], tokens: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "trace.json"
        cmd = ["flock", "/work/bench.lock", sys.executable, "-m", "engine", "run", *LANES[lane], "--max-new-tokens", str(tokens)]
        cmd += [a for p in prompts for a in ("--prompt", p)] + ["--json", str(out)]
        subprocess.run(cmd, cwd=tree, check=True, capture_output=True)
        trace = json.loads(out.read_text())
    steps = trace["steps"]
    prefill_end = [s for s in steps if s["kind"] == "prefill"][-1]["t_end_s"]
    emitted = sum(len(q["emitted"]) for s in steps if s["kind"] == "decode" for q in s["seqs"])
    other = trace["summary"].get("other_cpu_s", 0.0) / max(steps[-1]["t_end_s"], 1e-9)
    return {
        "decode": emitted / (steps[-1]["t_end_s"] - prefill_end),
        "whole": trace["summary"]["tokens_per_s"],
        "other_cores": round(other, 3),
    }


def compare(trees: list[Path], rounds: range, batches: list[int], tokens: int) -> None:
    prompts = json.loads((ROOT / "assets" / "heldout_prompts.json").read_text())["prompts"]
    names = ["before", "after"]
    rows = []
    for r in rounds:
        for batch in batches:
            chosen = [prompts[(r * batch + i) % len(prompts)] for i in range(batch)]
            for lane in LANES:
                order = [0, 1] if r % 2 == 0 else [1, 0]  # which tree goes first alternates
                for t in order:
                    row = {"round": r, "batch": batch, "lane": lane, "tree": names[t]} | _run(trees[t], lane, chosen, tokens)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    print("medians of decode-alone tokens/s (whole-run in brackets); spread = min-max over rounds")
    for batch in batches:
        for lane in LANES:
            med, spread = {}, {}
            for name in names:
                got = [x for x in rows if x["batch"] == batch and x["lane"] == lane and x["tree"] == name]
                med[name] = (statistics.median(x["decode"] for x in got), statistics.median(x["whole"] for x in got))
                spread[name] = f"{min(x['decode'] for x in got):.1f}-{max(x['decode'] for x in got):.1f}"
            ratio = med["after"][0] / med["before"][0]
            cells = "  ".join(f"{n} {med[n][0]:.1f} ({med[n][1]:.1f}) [{spread[n]}]" for n in names)
            print(f"batch {batch:2d} {lane:5s}: {cells}  after/before {ratio:.3f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["products", "rss", "compare"])
    ap.add_argument("--trees", default="", help="compare: before,after (worktree folders)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--first-round", type=int, default=0, help="compare: go on from an earlier invocation (other prompts)")
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16", help="products: the matrices' dtype")
    args = ap.parse_args()
    if args.what == "products":
        products(args.dtype)
    elif args.what == "rss":
        rss(args.tokens)
    else:
        trees = [Path(t).resolve() for t in args.trees.split(",")]
        compare(trees, range(args.first_round, args.first_round + args.rounds), [int(b) for b in args.batches.split(",")], args.tokens)


if __name__ == "__main__":
    main()
