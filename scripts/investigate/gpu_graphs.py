"""Where a GPU decode step's time goes: the engine's eager forward vs the same forward replayed as a CUDA graph.

`scripts/record/gpu_bench.py` measured on an H200 (README, "GPU") that the engine's eager pass of a 1.7B model
takes ~13 ms at batch 1 whether it carries 1 token or 128: flat, as the thesis says, but at ~6% of the
card's bandwidth. This script separates the two causes of a flat curve:

1. eager: `Pass.over_cache` (the engine's own forward, engine/model/passes.py) called from Python, timed
   with CUDA events. Every op is one kernel launch issued by Python; at small batch the GPU waits for them.
2. graph: the same forward captured once per shape as a CUDA graph and replayed (what gpt-fast's
   `torch.compile(mode="reduce-overhead")` and vLLM's CUDA graphs do). No Python per op: what is left is
   the GPU's own time, which at small tokens-per-pass is streaming the weights (memory-bound) and past
   the ridge point grows with tokens (compute-bound).

Each pass is a prefill of `n` new tokens per row with no earlier context (static shapes, so one graph per
shape), logits for the last position only. Weights are random (timing does not depend on their values).
Then a profile of one eager batch-1 decode pass over a 256-token cache counts the kernel launches and the
host time per pass.

    python scripts/investigate/gpu_graphs.py [--shape smollm2-1.7b,qwen2.5-7b] [--batch 1,8,64] [--tokens 1,4,16,64,128]

On a CPU the graph column is skipped (CUDA graphs need CUDA); the eager column and the profile still run.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch
from gpu_bench import SHAPES, parse_shapes, probe_report, random_llama, run_shapes
from transformers import DynamicCache

from engine.hardware import StepTimer, pick_device, pick_dtype
from engine.model.backend import Backend
from engine.model.fastllama import LeanLlama
from engine.model.passes import Pass

ROOT = Path(__file__).resolve().parents[2]


def timed(fn, device, repeats: int) -> float:
    """Median milliseconds of fn() over `repeats` calls, timed by the engine's StepTimer (CUDA events on a
    GPU); one warm-up call first."""
    fn()
    times = []
    for _ in range(repeats):
        with StepTimer(device) as timer:
            fn()
        times.append(timer.ms)
    return statistics.median(times)


def graphed(fn):
    """Capture fn() as a CUDA graph (after warm-ups on a side stream, as PyTorch's docs prescribe)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def pass_rows(model, lean, device, batches, tokens, repeats) -> list[dict]:
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    params = sum(p.numel() for p in model.parameters())
    rows = []
    print("batch  new/row  tok/pass   eager ms   graph ms   graph GB/s  graph TFLOP/s", flush=True)
    for batch in batches:
        for n in tokens:
            ids = torch.randint(100, 40000, (batch, n), device=device)
            positions = torch.arange(n, device=device).expand(batch, n)

            def step(ids=ids, positions=positions):
                return lean.over_cache(ids, positions, None, DynamicCache(config=model.config), keep=1)

            with torch.inference_mode():
                eager = timed(step, device, repeats)
                graph = timed(graphed(step), device, 2 * repeats) if device.type == "cuda" else None
            flops = 2 * params * batch * n  # weight FLOPs (the head counted once per token: an upper bound)
            row = {
                "batch": batch,
                "new_tokens": n,
                "tokens_per_pass": batch * n,
                "eager_ms": eager,
                "graph_ms": graph,
                "weight_bytes": weight_bytes,
                "weight_flops": flops,
            }
            rows.append(row)
            g = f"{graph:>10.2f} {weight_bytes / graph / 1e6:>12.0f} {flops / graph / 1e9:>14.1f}" if graph else "         -"
            print(f"{batch:>5} {n:>8} {batch * n:>9} {eager:>10.2f} {g}", flush=True)
    return rows


def profile_decode(model, lean, device) -> dict:
    """Kernel launches and host time of one eager batch-1 decode pass over a 256-token cache."""
    from torch.profiler import ProfilerActivity, profile

    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        lean.over_cache(torch.randint(100, 40000, (1, 256), device=device), torch.arange(256, device=device)[None], None, cache)
        ids = torch.randint(100, 40000, (1, 1), device=device)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        passes = 5
        with profile(activities=acts) as prof:
            for i in range(passes):
                lean.over_cache(ids, torch.tensor([[256 + i]], device=device), None, cache)
            if device.type == "cuda":
                torch.cuda.synchronize()
    events = prof.key_averages()
    launches = sum(e.count for e in events if e.key in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx"))
    top = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:10]
    print(f"eager decode pass (batch 1, 256 cached tokens), mean of {passes}: {launches / passes:.0f} kernel launches")
    print(f"{'op':<40} {'calls/pass':>10} {'self CPU us/pass':>17}")
    for e in top:
        print(f"{e.key[:40]:<40} {e.count / passes:>10.0f} {e.self_cpu_time_total / passes:>17.0f}")
    return {"launches_per_pass": launches / passes, "top_self_cpu_us_per_pass": {e.key: e.self_cpu_time_total / passes for e in top}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="smollm2-1.7b,qwen2.5-7b", help="comma-separated: " + ", ".join(SHAPES))
    ap.add_argument("--batch", default="1,8,64")
    ap.add_argument("--tokens", default="1,4,16,64,128", help="new tokens per row")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--json", default=None, help="write every measured row here")
    args = ap.parse_args()
    shapes = parse_shapes(ap, args.shape)
    batches = [int(b) for b in args.batch.split(",")]
    tokens = [int(n) for n in args.tokens.split(",")]

    device = pick_device()
    dtype = pick_dtype("auto", device)
    _, report = probe_report(device, dtype)

    def measure(shape: str) -> dict:
        model = random_llama(shape, dtype, device)
        lean = Pass(LeanLlama(model), Backend("torch", device))  # the engine's own pass over the dynamic cache
        print(f"\n== {shape} ({sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters)", flush=True)
        out = {"shape": shape, "passes": pass_rows(model, lean, device, batches, tokens, args.repeats)}
        out["profile"] = profile_decode(model, lean, device)
        del model, lean
        if device.type == "cuda":
            torch.cuda.empty_cache()
        return out

    run_shapes(shapes, report, args.json, measure)


if __name__ == "__main__":
    main()
