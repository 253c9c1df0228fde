"""Does a decode step on a GPU pay for a new attention plan at every new cache length?

`scripts/investigate/gpu_graphs.py`'s profile on an H200 showed `aten::_cudnn_attention_forward` taking ~3.8 ms of host
time per call in decode passes whose cache grew by one token each pass. cuDNN's fused attention builds an
execution plan per shape; `engine.bench` repeats the same prompts, so its medians may never see that
cost, while a real conversation brings a new length at every step.

This decodes `--steps` tokens one at a time (the engine's own forward, engine/model/fastllama.py, with a growing
cache: every step a new shape) and times every step with CUDA events, twice per attention setting,
alternating: PyTorch's default SDPA backend choice, and the same with cuDNN attention excluded.

    python scripts/investigate/gpu_attention.py [--shape smollm2-135m,smollm2-1.7b] [--steps 64] [--engine smollm2-1.7b]

`--engine SHAPE` then runs the engine end to end (`engine.generate`, plain and n-gram speculative decoding,
batch 1, each classroom prompt once, so every length is new) with the engine's own setting
(`engine.hardware.configure_attention`, cuDNN attention off) and with cuDNN attention forced back on.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from pathlib import Path

import torch
from gpu_bench import SHAPES, random_llama, random_pair
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers import DynamicCache

import engine.model.forward
from engine import DecodeConfig, generate
from engine.bench.prompts import prompt_set_list
from engine.hardware import configure_attention, pick_device, pick_dtype
from engine.model.backend import Backend
from engine.model.fastllama import LeanLlama
from engine.model.passes import Pass

ROOT = Path(__file__).resolve().parents[2]

NO_CUDNN = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def decode_steps(model, lean, device, context: int, steps: int, seed: int) -> list[float]:
    """Milliseconds of each of `steps` batch-1 decode passes after a `context`-token prefill."""
    gen = torch.Generator().manual_seed(seed)
    cache = DynamicCache(config=model.config)
    times = []
    with torch.inference_mode():
        prompt = torch.randint(100, 40000, (1, context), generator=gen).to(device)
        lean.over_cache(prompt, torch.arange(context, device=device)[None], None, cache, keep=1)
        ids = torch.randint(100, 40000, (1, 1), generator=gen).to(device)
        for i in range(steps):
            pos = torch.tensor([[context + i]], device=device)
            if device.type == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            logits = lean.over_cache(ids, pos, None, cache, keep=1)
            ids = logits[:, -1:].argmax(-1)  # feed the model's own token, as decoding does
            if device.type == "cuda":
                torch.cuda.synchronize()
            times.append(1000 * (time.perf_counter() - t))
    return times


def engine_check(shape: str, device, dtype, n_prompts: int, new_tokens: int, rounds: int = 2) -> None:
    """Tokens/s of engine.generate over the chat prompts (batch 1, one after another), cuDNN attention off
    (the engine's setting) vs forced on, alternating rounds."""
    pair = random_pair(shape, dtype, device)
    prompts = prompt_set_list("chat")[:n_prompts]
    modes = (
        ("AR", DecodeConfig(mode="autoregressive", max_new_tokens=new_tokens)),
        ("ngram depth 4", DecodeConfig(mode="speculative", drafter="ngram", depth=4, max_new_tokens=new_tokens)),
    )

    def force_cudnn(dev):
        torch.backends.cuda.enable_cudnn_sdp(True)

    print(f"\nengine.generate, {shape}, batch 1, {len(prompts)} chat prompts one after another, {new_tokens} new tokens each")
    print(f"{'decode':<14} {'attention':<16} {'round':>5} {'tok/s':>8}")
    for rnd in range(rounds):
        for name, setting in (("engine default", configure_attention), ("cuDNN forced on", force_cudnn)):
            engine.model.forward.configure_attention = setting  # what make_forward calls for every new cache
            for label, cfg in modes:
                tokens, seconds = 0, 0.0
                for i, prompt in enumerate(prompts):  # a different prompt prefix per round: new lengths
                    trace = generate(pair, [f"({rnd}.{i}) {prompt}"], cfg)
                    tokens += trace.summary["new_tokens"]
                    seconds += trace.summary["wall_s"]
                print(f"{label:<14} {name:<16} {rnd:>5} {tokens / seconds:>8.1f}", flush=True)
    engine.model.forward.configure_attention = configure_attention


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="smollm2-135m,smollm2-1.7b", help="comma-separated: " + ", ".join(SHAPES))
    ap.add_argument("--context", type=int, default=200, help="prompt tokens before decoding (lengths never repeat)")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--engine", default=None, help="also run engine.generate end to end on this shape")
    ap.add_argument("--engine-prompts", type=int, default=6)
    ap.add_argument("--engine-tokens", type=int, default=32)
    args = ap.parse_args()
    device = pick_device()
    dtype = pick_dtype("auto", device)
    print(f"{torch.cuda.get_device_name() if device.type == 'cuda' else device}; torch {torch.__version__}")
    print(f"{'shape':<14} {'attention':<16} {'round':>5} {'first step':>10} {'median':>8} {'mean':>8}  ms per decode step")
    for shape in [s for s in args.shape.split(",") if s]:
        model = random_llama(shape, dtype, device)
        lean = Pass(LeanLlama(model), Backend("torch", device))  # the engine's own pass over the dynamic cache
        for rnd in range(2):
            for name, ctx in (("default", contextlib.nullcontext), ("cuDNN excluded", lambda: sdpa_kernel(NO_CUDNN))):
                with ctx():  # a fresh context length per run, so no shape is ever seen twice
                    t = decode_steps(
                        model, lean, device, args.context + (args.steps + 1) * (2 * rnd + (name != "default")), args.steps, seed=rnd
                    )
                print(f"{shape:<14} {name:<16} {rnd:>5} {t[0]:>10.2f} {statistics.median(t):>8.2f} {statistics.mean(t):>8.2f}", flush=True)
        del model, lean
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if args.engine:
        engine_check(args.engine, device, dtype, args.engine_prompts, args.engine_tokens)


if __name__ == "__main__":
    main()
